"""GPU checks of devpool's PyTorch and CuPy allocators, run each in a fresh process by
test_gpu_torch.py / test_gpu_cupy.py (an allocator can only be swapped before the first
CUDA operation of a process).

    python3 gpu_scenarios.py MODE

MODE is one of:
  enabled:CHECK  devpool.torch.enable(), then one check (record_stream, stats,
               empty_cache, oom, graph, cudnn_benchmark, threads, compile); one JSON line
  pluggable    the bare CUDAPluggableAllocator over devpool_malloc/devpool_free, the
               record_stream race only (the control: it must show wrong results)
  default      PyTorch's own allocator, the record_stream race only
  mem_pool     PyTorch's allocator global, devpool behind a torch.cuda.MemPool
  cupy         devpool.cupy.enable(), array work on two streams against CuPy's pool
"""

from __future__ import annotations

import json
import os
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))

GIB = 1 << 30


def record_stream_race(torch, rounds=240, elems=1 << 20):
    """A tensor made on a side stream, read on the main stream after a sleep kernel,
    declared with record_stream and freed while the read is queued; then the side
    stream fills a new tensor at once. Returns how many reads saw the new data."""
    side = torch.cuda.Stream()
    main = torch.cuda.current_stream()
    results = []
    for i in range(rounds):
        with torch.cuda.stream(side):
            x = torch.full((elems,), float(i), device="cuda")
        main.wait_stream(side)
        torch.cuda._sleep(1_000_000)  # keeps the read below queued for a while
        y = x * 1.0
        x.record_stream(main)
        del x
        with torch.cuda.stream(side):
            z = torch.full((elems,), -1.0, device="cuda")
            del z
        results.append((i, y))
    torch.cuda.synchronize()
    return sum(1 for i, y in results if not bool(torch.all(y == float(i))))


def check_empty_cache(torch):
    torch.cuda.synchronize()
    xs = [torch.empty(1 << 30, dtype=torch.uint8, device="cuda") for _ in range(8)]
    reserved_full = torch.cuda.memory_reserved()
    del xs
    torch.cuda.synchronize()
    free_before, _ = torch.cuda.mem_get_info()
    reserved_before = torch.cuda.memory_reserved()
    torch.cuda.empty_cache()
    free_after, _ = torch.cuda.mem_get_info()
    reserved_after = torch.cuda.memory_reserved()
    return {
        "reserved_with_8GiB_live": reserved_full,
        "reserved_before_empty_cache": reserved_before,
        "reserved_after_empty_cache": reserved_after,
        "driver_free_gain_bytes": free_after - free_before,
        "ok": free_after - free_before >= 4 * GIB and reserved_after < reserved_before,
    }


def check_stats(torch):
    torch.cuda.synchronize()
    base_req = torch.cuda.memory_stats()["requested_bytes.all.current"]
    torch.cuda.reset_peak_memory_stats()
    free0, _ = torch.cuda.mem_get_info()
    res0 = torch.cuda.memory_reserved()
    sizes = [1, 1000, 4096, 70_000, 3 << 20, 100 << 20, 1 << 30]
    ts = [torch.empty(n, dtype=torch.uint8, device="cuda") for n in sizes]
    own = sum(t.untyped_storage().nbytes() for t in ts)  # the independent count
    st = torch.cuda.memory_stats()
    req = st["requested_bytes.all.current"] - base_req
    alloc = torch.cuda.memory_allocated()
    peak = torch.cuda.max_memory_allocated()
    free1, _ = torch.cuda.mem_get_info()
    res1 = torch.cuda.memory_reserved()
    summary = torch.cuda.memory_summary()
    del ts
    peak_after_free = torch.cuda.max_memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    peak_after_reset = torch.cuda.max_memory_allocated()
    now = torch.cuda.memory_allocated()
    driver_delta = free0 - free1
    reserved_delta = res1 - res0
    import devpool

    ds = devpool.stats(0)
    calls = {c["call"]: c for c in ds.get("driver_calls", [])}
    creates = calls.get("cuMemCreate", {}).get("calls", 0)
    return {
        "driver_creates": creates,
        "chunks_created": ds["backend_counters"]["chunks_created"],
        "requested_delta": req,
        "own_count": own,
        "allocated": alloc,
        "peak": peak,
        "reserved_delta": reserved_delta,
        "driver_used_delta": driver_delta,
        "ok": req == own
        and alloc >= own
        and peak >= alloc
        and peak_after_free == peak
        and peak_after_reset == now
        and st["num_ooms"] >= 0
        and "Allocated memory" in summary
        # The driver's creates, timed one by one, are the chunks the backend counts.
        and creates > 0
        and creates == ds["backend_counters"]["chunks_created"]
        # What the driver saw leave is what devpool says it took (within 64 MiB of
        # driver-side bookkeeping).
        and abs(driver_delta - reserved_delta) <= 64 << 20,
    }


def check_oom(torch):
    import devpool.torch  # noqa: F401

    before = torch.cuda.memory_stats().get("num_ooms", 0)
    try:
        torch.empty(400 * GIB, dtype=torch.uint8, device="cuda")
        raised, msg = None, ""
    except torch.cuda.OutOfMemoryError as e:
        raised, msg = "OutOfMemoryError", str(e)
    x = torch.ones(1 << 20, device="cuda")  # the program goes on
    after = torch.cuda.memory_stats().get("num_ooms", 0)
    return {
        "raised": raised,
        "message_names_devpool": "devpool" in msg,
        "num_ooms_delta": after - before,
        "ok": raised == "OutOfMemoryError" and "devpool" in msg and float(x.sum()) == float(1 << 20)
        and after - before == 1,
    }


def check_graph(torch, replays=100):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512)
    ).cuda()
    static_in = torch.randn(64, 512, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            model(static_in)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_out = model(static_in)
    worst = 0.0
    for _ in range(replays):
        x = torch.randn(64, 512, device="cuda")
        static_in.copy_(x)
        g.replay()
        eager = model(x)
        worst = max(worst, float((static_out - eager).abs().max()))
    torch.cuda.synchronize()
    del g
    return {"replays": replays, "max_abs_diff": worst, "ok": worst == 0.0}


def check_cudnn_benchmark(torch):
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(32, 64, 3, padding=1).cuda()
    worst = 0.0
    for shape in [(8, 32, 56, 56), (16, 32, 28, 28), (4, 32, 112, 112)]:
        x = torch.randn(*shape, device="cuda", requires_grad=True)
        y = conv(x)
        y.sum().backward()
        ref = torch.nn.functional.conv2d(x.double(), conv.weight.double(), conv.bias.double(), padding=1)
        worst = max(worst, float((y.double() - ref).abs().max() / ref.abs().max()))
    torch.backends.cudnn.benchmark = False
    return {"max_rel_err": worst, "ok": worst < 1e-2}


def check_compile(torch):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.GELU(), torch.nn.Linear(256, 256)).cuda()
    fast = torch.compile(model, mode="reduce-overhead")
    worst = 0.0
    for _ in range(6):
        x = torch.randn(32, 256, device="cuda")
        worst = max(worst, float((fast(x) - model(x)).abs().max()))
    return {"max_abs_diff": worst, "ok": worst < 1e-4}


def check_threads(torch, threads=4, iters=50):
    errors = []

    def work(k):
        try:
            s = torch.cuda.Stream()
            with torch.cuda.stream(s):
                for i in range(iters):
                    a = torch.full((1 << 16,), float(k * 1000 + i), device="cuda")
                    b = a * 2
                    if float(b[-1]) != 2.0 * (k * 1000 + i):
                        errors.append((k, i))
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    ts = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return {"errors": errors[:5], "ok": not errors}


CHECKS = {
    "record_stream": lambda torch: {"wrong": (w := record_stream_race(torch)), "ok": w == 0},
    "stats": check_stats,
    "empty_cache": check_empty_cache,
    "oom": check_oom,
    "graph": check_graph,
    "cudnn_benchmark": check_cudnn_benchmark,
    "threads": check_threads,
    "compile": check_compile,
}


def enabled(check: str):
    """devpool as PyTorch's allocator, then one check."""
    import devpool
    import devpool.torch
    import torch

    devpool.torch.enable()
    out = {"check": check, "is_enabled": devpool.torch.is_enabled()}
    print(f"running {check}", file=sys.stderr, flush=True)
    out.update(CHECKS[check](torch))
    out["devpool_bad_calls"] = devpool.device_stats()["bad_calls"]
    out["ok"] = bool(out["ok"] and out["is_enabled"] and out["devpool_bad_calls"] == 0)
    return out


def pluggable():
    import devpool
    import torch

    devpool.configure(backend="cuda")
    alloc = torch.cuda.memory.CUDAPluggableAllocator(
        devpool.library_path(), "devpool_malloc", "devpool_free"
    )
    torch.cuda.memory.change_current_allocator(alloc)
    return {"record_stream_wrong": record_stream_race(torch)}


def default():
    import torch

    return {"record_stream_wrong": record_stream_race(torch)}


def mem_pool():
    import devpool
    import devpool.torch
    import torch

    torch.ones(1, device="cuda")  # PyTorch's allocator is in use: enable() would refuse
    refused = False
    try:
        devpool.torch.enable()
    except RuntimeError:
        refused = True
    pool = devpool.torch.mem_pool()
    before = devpool.device_stats()["blocks"]["current"]
    with torch.cuda.use_mem_pool(pool):
        x = torch.full((1 << 24,), 3.0, device="cuda")
    y = torch.full((1 << 24,), 4.0, device="cuda")
    during = devpool.device_stats()["blocks"]["current"]
    ok_values = float(x.sum()) == 3.0 * (1 << 24) and float(y.sum()) == 4.0 * (1 << 24)
    del x, y, pool
    torch.cuda.synchronize()
    return {
        "enable_refused_after_cuda_init": refused,
        "devpool_blocks_before": before,
        "devpool_blocks_during": during,
        "ok": refused and during > before and ok_values,
    }


def cupy_check():
    import cupy

    import devpool
    import devpool.cupy

    def work():
        rs = cupy.random.RandomState(0)
        acc = 0.0
        for n in (1 << 10, 3 << 12, 1 << 20, 5 << 18):
            a = rs.standard_normal(n, dtype=cupy.float32)
            acc += float(cupy.sort(a)[n // 2] + cupy.abs(cupy.fft.rfft(a)).sum() * 1e-6)
        return acc

    ref = work()  # CuPy's own pool
    devpool.cupy.enable()
    got = work()
    s2 = cupy.cuda.Stream()
    with s2:
        a = cupy.arange(1 << 20, dtype=cupy.float32)
        b = float((a * 2).sum())
    s2.synchronize()
    st = devpool.device_stats()
    devpool.cupy.disable()
    return {
        "checksum_default": ref,
        "checksum_devpool": got,
        "stream_sum": b,
        "devpool_allocations": st["blocks"]["allocated"],
        "ok": abs(ref - got) <= 1e-6 * max(1.0, abs(ref))
        and b == float((1 << 20) * ((1 << 20) - 1))
        and st["blocks"]["allocated"] > 0,
    }


MODES = {"pluggable": pluggable, "default": default, "mem_pool": mem_pool, "cupy": cupy_check}

if __name__ == "__main__":
    mode = sys.argv[1]
    if mode.startswith("enabled:"):
        result = enabled(mode.split(":", 1)[1])
    else:
        result = MODES[mode]()
    print(json.dumps(result), flush=True)
