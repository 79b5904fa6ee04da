#!/usr/bin/env python3
"""CuPy on devpool, against CuPy's own memory pool.

    python3 examples/cupy_devpool.py --allocator devpool
    python3 examples/cupy_devpool.py --allocator default

Two phases, both seeded:
  math   a few hundred iterations of array work on arrays of varied sizes (random
         normals, real FFTs, sorts, matrix products, element-wise math, reductions)
         with a window of live results dropped in random order, so memory of many
         sizes is taken and given back;
  churn  many short-lived arrays of log-uniform sizes (16 B .. 64 MiB), the
         allocator's own cost with little work around it.

Prints the time of each phase, the peak device memory the allocator held, and a
checksum of the math (the same for both allocators), then one JSON line.

devpool is reached through ``cupy.cuda.memory.CFunctionAllocator`` with the library's
``devpool_cupy_malloc`` / ``devpool_cupy_free``. CuPy does not tell the allocator
which stream an array is for, so the allocator's ``param`` names it: here 0, the
legacy default stream, which is where CuPy queues its work unless told otherwise.
Memory freed is reused at once by work on that stream, so this script keeps all of
its work there (it checks). CuPy does not check the pointer it gets back, so the
allocator is wrapped to raise CuPy's ``OutOfMemoryError`` when devpool returns null.
"""

import argparse
import ctypes
import json
import math
import os
import random
import sys
import time

# Array lengths for the math phase: FFT plans are cached per length, so the lengths
# come from a fixed set (powers of two times 1, 3 or 5) rather than anything at all.
LENGTHS = sorted({b * (1 << k) for b in (1, 3, 5) for k in range(10, 21)})


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--allocator", choices=("default", "devpool"), default="devpool")
    p.add_argument("--iters", type=int, default=300, help="math iterations")
    p.add_argument("--churn", type=int, default=20000, help="churn allocations")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lib", default=os.environ.get("DEVPOOL_LIB", ".gpu/libdevpool_ffi.so"))
    p.add_argument("--devpool-config", default="strategy=hybrid")
    return p.parse_args()


class PeakTracker:
    """Wraps an allocator's ``malloc`` for CuPy: raises on a null pointer and, given
    ``held``, keeps the peak of what the pool holds (read after every allocation,
    the only time it grows)."""

    def __init__(self, malloc, held):
        self._malloc = malloc
        self._held = held
        self.peak = 0

    def __call__(self, size):
        mp = self._malloc(size)
        if size and not mp.ptr:
            import cupy

            raise cupy.cuda.memory.OutOfMemoryError(size, -1)
        if self._held is not None:
            h = self._held()
            if h > self.peak:
                self.peak = h
        return mp


def devpool_allocator(cupy, path, config, device):
    if not os.path.exists(path):
        sys.exit(f"devpool library not found at {path} (set --lib or DEVPOOL_LIB)")
    lib = ctypes.CDLL(os.path.abspath(path))
    lib.devpool_configure.argtypes = [ctypes.c_char_p]
    lib.devpool_stats_json.argtypes = [ctypes.c_int]
    lib.devpool_stats_json.restype = ctypes.c_void_p
    lib.devpool_string_free.argtypes = [ctypes.c_void_p]
    lib.devpool_last_error.restype = ctypes.c_char_p
    full = f"backend=cuda;{config}"
    rc = lib.devpool_configure(full.encode())
    if rc != 0:
        sys.exit(f"devpool_configure({full!r}) = {rc}: {lib.devpool_last_error().decode()}")

    def stats():
        p = lib.devpool_stats_json(device)
        if not p:
            raise RuntimeError(lib.devpool_last_error().decode())
        try:
            return json.loads(ctypes.string_at(p).decode())
        finally:
            lib.devpool_string_free(p)

    malloc_fn = ctypes.cast(lib.devpool_cupy_malloc, ctypes.c_void_p).value
    free_fn = ctypes.cast(lib.devpool_cupy_free, ctypes.c_void_p).value
    # param 0: the legacy default stream. `lib` is the owner kept alive with it.
    cfa = cupy.cuda.memory.CFunctionAllocator(0, malloc_fn, free_fn, lib)
    # No peak sampling: the devpool backend keeps its own exact peak.
    tracker = PeakTracker(cfa.malloc, None)
    return tracker, stats, full


def math_phase(cupy, iters, seed, lengths=None):
    """`iters` iterations on lengths drawn from LENGTHS, or one per entry of
    `lengths` in order."""
    rs = cupy.random.RandomState(seed)
    rng = random.Random(seed)
    window = []
    acc = cupy.zeros((), dtype=cupy.float64)
    for it in range(len(lengths) if lengths else iters):
        n = lengths[it] if lengths else rng.choice(LENGTHS)
        a = rs.standard_normal(n, dtype=cupy.float32)
        f = cupy.fft.rfft(a)
        s = cupy.sort(a)
        m = int(math.isqrt(n))
        x = a[: m * m].reshape(m, m)
        y = x @ x.T
        e = cupy.exp(-cupy.abs(a)) * 2.0 + s
        acc += (
            cupy.abs(f).sum(dtype=cupy.float64) * 1e-6
            + y.trace(dtype=cupy.float64) * 1e-6
            + e.mean(dtype=cupy.float64)
            + s[n // 2]
            + cupy.argmax(a) * 1e-6
        )
        window.append(y if it % 2 else e)
        if len(window) > 8:
            window.pop(rng.randrange(len(window)))
    return float(acc.get())


def churn_phase(cupy, count, seed):
    rng = random.Random(seed + 1)
    lo, hi = math.log(16), math.log(64 << 20)
    live = []
    for _ in range(count):
        size = int(math.exp(rng.uniform(lo, hi)))
        live.append(cupy.empty(size, dtype=cupy.uint8))
        if len(live) > 32:
            live.pop(rng.randrange(len(live)))
    live.clear()


def timed(cupy, fn, *args):
    cupy.cuda.Device().synchronize()
    t0 = time.perf_counter()
    out = fn(cupy, *args)
    cupy.cuda.Device().synchronize()
    return out, time.perf_counter() - t0


def main():
    args = parse_args()
    import cupy

    device = cupy.cuda.Device().id
    if cupy.cuda.get_current_stream().ptr != 0:
        sys.exit("this example keeps its work on the legacy default stream")
    if args.allocator == "devpool":
        alloc, stats, config = devpool_allocator(cupy, args.lib, args.devpool_config, device)
    else:
        pool = cupy.cuda.MemoryPool()
        alloc = PeakTracker(pool.malloc, pool.total_bytes)
        stats, config = None, "cupy.cuda.MemoryPool"
    cupy.cuda.set_allocator(alloc)

    # Warm up outside the timings: compile every kernel, make the cuBLAS handle and
    # one cuFFT plan per length (kept: the plan cache holds them all), so the timed
    # phases do the same work whichever process runs first.
    cupy.fft.config.get_plan_cache().set_size(2 * len(LENGTHS))
    math_phase(cupy, 0, args.seed + 1000, lengths=LENGTHS)
    churn_phase(cupy, 100, args.seed + 1000)

    checksum, t_math = timed(cupy, math_phase, args.iters, args.seed)
    _, t_churn = timed(cupy, churn_phase, args.churn, args.seed)

    result = {
        "allocator": args.allocator,
        "config": config,
        "iters": args.iters,
        "churn": args.churn,
        "seed": args.seed,
        "checksum": checksum,
        "math_ms_per_iter": t_math * 1e3 / max(1, args.iters),
        "churn_us_per_alloc": t_churn * 1e6 / max(1, args.churn),
        "cupy": cupy.__version__,
        "gpu": cupy.cuda.runtime.getDeviceProperties(device)["name"].decode(),
    }
    if stats is not None:
        s = stats()
        result["peak_reserved_bytes"] = s["peak_reserved_bytes"]
        result["reserved_bytes"] = s["reserved_bytes"]
        result["devpool"] = {
            "stats": s["stats"],
            "backend_counters": s["backend_counters"],
            "bad_calls": s["bad_calls"],
        }
    else:
        result["peak_reserved_bytes"] = alloc.peak
        result["reserved_bytes"] = pool.total_bytes()
    print(
        f"{args.allocator}: math {result['math_ms_per_iter']:.3f} ms/iter, "
        f"churn {result['churn_us_per_alloc']:.2f} us/alloc, "
        f"peak held {result['peak_reserved_bytes'] / 2**20:.1f} MiB, checksum {checksum!r}",
        flush=True,
    )
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
