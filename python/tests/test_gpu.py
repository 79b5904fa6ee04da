"""devpool's PyTorch and CuPy allocators on a real GPU. Skipped, with the reason, where
PyTorch (or CuPy) or a CUDA device is missing. Each scenario runs in a fresh process
(gpu_scenarios.py): an allocator can be swapped only before a process's first CUDA
operation."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def _torch_gpu():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: the GPU tests run only on a machine with a GPU")
    return torch


def run_mode(mode: str, timeout: int = 600) -> dict:
    env = dict(os.environ)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    if importlib.util.find_spec("devpool") is None:
        env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(HERE), env.get("PYTHONPATH", "")])
    p = subprocess.run(
        [sys.executable, "-X", "faulthandler", os.path.join(HERE, "gpu_scenarios.py"), mode],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    assert p.returncode == 0 and lines, f"{mode} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}"
    result = json.loads(lines[-1])
    print(mode, json.dumps(result, indent=1))
    return result


def test_record_stream_race_is_detected_by_the_bare_pluggable_allocator():
    """The control: without record_stream the race corrupts results, so the check below
    can fail."""
    _torch_gpu()
    assert run_mode("pluggable")["record_stream_wrong"] > 0


def test_pytorch_default_allocator_passes_the_race():
    _torch_gpu()
    assert run_mode("default")["record_stream_wrong"] == 0


@pytest.mark.parametrize(
    "check",
    ["record_stream", "stats", "empty_cache", "oom", "graph", "cudnn_benchmark", "threads", "compile"],
)
def test_devpool_as_pytorch_allocator(check):
    _torch_gpu()
    r = run_mode(f"enabled:{check}")
    assert r["is_enabled"]
    assert r["devpool_bad_calls"] == 0
    assert r["ok"], r


def test_devpool_mem_pool_beside_pytorch_allocator():
    _torch_gpu()
    r = run_mode("mem_pool")
    assert r["ok"], r


def test_devpool_as_cupy_allocator():
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed")
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001 - no driver
        n = 0
    if n == 0:
        pytest.skip("no CUDA device: the GPU tests run only on a machine with a GPU")
    r = run_mode("cupy")
    assert r["ok"], r
