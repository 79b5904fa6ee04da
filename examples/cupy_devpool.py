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

devpool is reached through the Python package, ``devpool.cupy.enable()``: each
allocation is made for CuPy's current stream through ``CFunctionAllocator`` and
devpool's C functions. CuPy's pool is used as CuPy uses it by default
(``set_allocator(pool.malloc)``), with nothing wrapped around it.
"""

import argparse
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
    p.add_argument("--strategy", default="hybrid", help="devpool strategy")
    return p.parse_args()


def devpool_allocator(strategy):
    """devpool as CuPy's allocator, through the Python package (`pip install ./python`,
    or this checkout's python/ folder with the library built by cargo)."""
    try:
        import devpool.cupy
    except ImportError:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
        import devpool.cupy
    import devpool

    devpool.cupy.enable(strategy=strategy, backend="cuda")
    return devpool


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
    if args.allocator == "devpool":
        dp = devpool_allocator(args.strategy)
        config = dp.stats(device)["config"]
        pool = None
    else:
        # CuPy's own pool, called directly as CuPy does by default. It gives nothing
        # back unless asked, so what it holds at the end is its peak.
        dp = None
        pool = cupy.cuda.MemoryPool()
        cupy.cuda.set_allocator(pool.malloc)
        config = "cupy.cuda.MemoryPool"

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
    if dp is not None:
        s = dp.stats(device)
        result["peak_reserved_bytes"] = s["peak_reserved_bytes"]
        result["reserved_bytes"] = s["reserved_bytes"]
        result["devpool"] = {
            "stats": s["stats"],
            "backend_counters": s["backend_counters"],
            "bad_calls": s["bad_calls"],
            "driver_calls": s.get("driver_calls"),
        }
    else:
        result["peak_reserved_bytes"] = pool.total_bytes()
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
