"""The package on the mock backend: no GPU, no PyTorch, no CuPy needed.

Settings are fixed at a process's first allocation, so each test runs its body in a
fresh interpreter (``run``) and checks what it printed."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PKG_PARENT = os.path.dirname(HERE)


def run(code: str, env: dict | None = None) -> dict:
    e = dict(os.environ)
    e.pop("DEVPOOL_CONFIG", None)
    e.update(env or {})
    # Import the package from this checkout unless it is installed.
    if importlib.util.find_spec("devpool") is None:
        e["PYTHONPATH"] = os.pathsep.join(p for p in [PKG_PARENT, e.get("PYTHONPATH", "")] if p)
    body = "import json, devpool\nout = {}\n" + textwrap.dedent(code) + "\nprint(json.dumps(out))\n"
    p = subprocess.run([sys.executable, "-c", body], capture_output=True, text=True, env=e, timeout=120)
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_import_needs_neither_torch_nor_cupy():
    out = run(
        """
        import sys, devpool.torch, devpool.cupy
        out["torch"] = "torch" in sys.modules
        out["cupy"] = "cupy" in sys.modules
        out["version"] = devpool.version()
        """
    )
    assert out == {"torch": False, "cupy": False, "version": out["version"]}
    assert out["version"].count(".") == 2


@pytest.mark.skipif(
    bool(os.environ.get("DEVPOOL_TEST_HAS_GPU")), reason="this machine has a GPU"
)
def test_without_a_gpu_the_mock_backend_is_chosen():
    out = run(
        """
        out["gpus"] = devpool.cuda_device_count()
        p = devpool.malloc(1 << 20)
        out["backend"] = devpool.backend()
        devpool.free(p)
        """
    )
    if out["gpus"] == 0:
        assert out["backend"] == "mock"


def test_configuration_errors_are_clear_and_change_nothing():
    out = run(
        """
        errors = {}
        for kw in [dict(strategy="best-fit-please"), dict(backend="opencl"), dict(colour="blue"),
                   dict(small_max="lots"), dict(strategy="slab", small_max="1M"), dict(mock_capacity=0),
                   dict(small_max=True)]:
            try:
                devpool.configure(**kw)
                errors[repr(kw)] = None
            except devpool.ConfigError as e:
                errors[repr(kw)] = str(e)
        try:
            devpool.configure(123)
        except devpool.ConfigError as e:
            errors["int"] = str(e)
        out["errors"] = errors
        devpool.configure("backend=mock;strategy=tlsf-virtual")
        out["strategy_before_alloc"] = devpool.stats()["config"]
        p = devpool.malloc(4096)
        try:
            devpool.configure(strategy="slab")
            out["late"] = None
        except devpool.ConfigError as e:
            out["late"] = str(e)
        out["strategy"] = devpool.stats()["strategy"]
        devpool.free(p)
        """
    )
    for k, msg in out["errors"].items():
        assert msg, f"{k} was accepted"
    assert "unknown strategy `best-fit-please`" in out["errors"]["{'strategy': 'best-fit-please'}"]
    assert "unknown key `colour`" in out["errors"]["{'colour': 'blue'}"]
    assert "before the first allocation" in out["late"]
    assert out["strategy"] == "tlsf-virtual"


def test_environment_configuration_is_read():
    out = run(
        """
        p = devpool.malloc(100)
        out["strategy"] = devpool.stats()["strategy"]
        out["backend"] = devpool.backend()
        devpool.free(p)
        """,
        env={"DEVPOOL_CONFIG": "backend=mock;strategy=slab"},
    )
    assert out == {"strategy": "slab", "backend": "mock"}


def test_page_settings_trade_memory_for_calls():
    out = run(
        """
        devpool.configure(backend="mock", strategy="hybrid", cache_floor="8M",
                          move_margin=0.05, move_memory=False, burst=True)
        out["config"] = devpool.stats()["config"]
        try:
            devpool.configure(strategy="slab", move_margin=0.05)
        except devpool.ConfigError as e:
            out["slab"] = str(e)
        try:
            devpool.configure(move_margin=3)
        except devpool.ConfigError as e:
            out["range"] = str(e)
        """
    )
    assert "cache_floor=8388608;move_margin=0.05;move_memory=off;burst=on" in out["config"]
    assert "page layer" in out["slab"]
    assert "fraction" in out["range"]


def test_a_reserve_is_held_from_the_first_large_block_until_trim():
    out = run(
        """
        devpool.configure(backend="mock", strategy="hybrid", reserve="256M")
        out["before"] = devpool.stats().get("backend_counters", {}).get("bytes_in_use", {}).get("current", 0)
        p = devpool.malloc(8 << 20)  # above the slab's sizes: the page layer's first range
        c = devpool.stats()["backend_counters"]
        out["held"] = c["bytes_in_use"]["current"]
        out["maps"] = c["map_calls"]
        q = devpool.malloc(100 << 20)  # inside the reserve: no more mapping
        out["maps_after"] = devpool.stats()["backend_counters"]["map_calls"]
        devpool.free(q)
        devpool.free(p)
        out["kept"] = devpool.stats()["backend_counters"]["bytes_in_use"]["current"]
        out["trimmed"] = devpool.trim()
        out["after"] = devpool.stats()["backend_counters"]["bytes_in_use"]["current"]
        """
    )
    assert out["before"] == 0
    assert out["held"] == 256 << 20, out
    assert out["maps_after"] == out["maps"], out
    assert out["kept"] == 256 << 20, out
    assert out["trimmed"] >= 256 << 20 and out["after"] == 0, out


def test_stats_match_an_independent_count():
    out = run(
        """
        import random
        devpool.configure(backend="mock", strategy="hybrid")
        rng = random.Random(7)
        live = {}
        for _ in range(2000):
            if live and rng.random() < 0.45:
                p = rng.choice(list(live))
                devpool.free(p)
                del live[p]
            else:
                n = int(2 ** rng.uniform(0, 27))
                live[devpool.malloc(n)] = n
        s = devpool.device_stats()
        full = devpool.stats()
        out["own_bytes"] = sum(live.values())
        out["own_blocks"] = len(live)
        out["requested"] = s["requested_bytes"]["current"]
        out["blocks"] = s["blocks"]["current"]
        out["allocated"] = s["allocated_bytes"]["current"]
        out["reserved"] = s["reserved_bytes"]["current"]
        out["strategy_live"] = full["stats"]["live_bytes"]["current"]
        out["live_pointers"] = full["live_pointers"]
        out["sizes_ok"] = all(devpool.block_size(p) == n for p, n in live.items())
        for p in list(live):
            devpool.free(p)
        out["after_free"] = devpool.device_stats()["requested_bytes"]["current"]
        out["peak"] = devpool.device_stats()["requested_bytes"]["peak"]
        devpool.reset_peak_stats()
        out["peak_after_reset"] = devpool.device_stats()["requested_bytes"]["peak"]
        out["trimmed"] = devpool.trim()
        out["reserved_after_trim"] = devpool.device_stats()["reserved_bytes"]["current"]
        """
    )
    assert out["requested"] == out["own_bytes"] == out["strategy_live"]
    assert out["blocks"] == out["own_blocks"] == out["live_pointers"]
    assert out["reserved"] >= out["allocated"] >= out["requested"]
    assert out["sizes_ok"]
    assert out["after_free"] == 0
    assert out["peak"] >= out["own_bytes"]
    assert out["peak_after_reset"] == 0
    assert out["trimmed"] > 0
    assert out["reserved_after_trim"] < out["reserved"]


def test_bad_pointers_raise_and_change_nothing():
    out = run(
        """
        devpool.configure(backend="mock")
        p = devpool.malloc(1000)
        names = {}
        for label, call in [
            ("double free", lambda: (devpool.free(p), devpool.free(p))),
            ("foreign", lambda: devpool.free(0x1234500)),
            ("inside a block", lambda: devpool.free(q + 256)),
            ("record_stream unknown", lambda: devpool.record_stream(0x1234500, stream=0)),
            ("free on stream unknown", lambda: devpool.free(0x1234500, stream=0)),
            ("negative size", lambda: devpool.malloc(-1)),
        ]:
            q = devpool.malloc(1 << 20)
            try:
                call()
                names[label] = None
            except (devpool.UnknownPointerError, ValueError) as e:
                names[label] = type(e).__name__
            devpool.free(q)
        out["errors"] = names
        out["live"] = devpool.device_stats()["blocks"]["current"]
        devpool.free(None or 0)  # a null pointer is nothing to free
        """
    )
    assert all(out["errors"].values()), out["errors"]
    assert out["errors"]["double free"] == "UnknownPointerError"
    assert out["live"] == 0


def test_out_of_memory_is_an_error_and_the_pool_goes_on():
    out = run(
        """
        devpool.configure(backend="mock", mock_capacity="256M")
        try:
            devpool.malloc(1 << 30)
            out["raised"] = None
        except devpool.OutOfMemoryError as e:
            out["raised"] = str(e)
        p = devpool.malloc(1 << 20)
        out["after"] = devpool.block_size(p)
        devpool.free(p)
        out["failures"] = devpool.device_stats()["failures"]
        """
    )
    assert out["raised"] and "out of memory" in out["raised"]
    assert out["after"] == 1 << 20
    assert out["failures"] == 1


def test_threads_allocate_and_free_concurrently():
    out = run(
        """
        import random, threading
        devpool.configure(backend="mock")
        per, n_threads = 2000, 8
        errors = []
        def work(seed):
            rng = random.Random(seed)
            mine = []
            try:
                for i in range(per):
                    mine.append(devpool.malloc(int(2 ** rng.uniform(0, 24)), stream=seed + 1))
                    if len(mine) > 16:
                        devpool.free(mine.pop(rng.randrange(len(mine))))
                for p in mine:
                    devpool.free(p)
            except Exception as e:
                errors.append(repr(e))
        ts = [threading.Thread(target=work, args=(k,)) for k in range(n_threads)]
        for t in ts: t.start()
        for t in ts: t.join()
        s = devpool.device_stats()
        out["errors"] = errors
        out["allocations"] = s["blocks"]["allocated"]
        out["live"] = s["blocks"]["current"]
        out["expected"] = per * n_threads
        """
    )
    assert out["errors"] == []
    assert out["allocations"] == out["expected"]
    assert out["live"] == 0


def test_building_the_torch_extension_names_what_is_missing():
    out = run(
        """
        from devpool import _build
        try:
            _build.cuda_include_dirs()
            out["cuda"] = "found"
        except _build.BuildError as e:
            out["cuda"] = str(e)
        out["header"] = _build.header_dir()
        """,
        env={"CUDA_HOME": "/nonexistent", "PATH": "/usr/bin:/bin"},
    )
    assert out["cuda"] == "found" or "cuda_runtime_api.h" in out["cuda"]
    assert out["header"].endswith("include")
