"""Finding and loading devpool's C ABI library, with every function's C types declared."""

from __future__ import annotations

import ctypes
import glob
import os
import threading

ENV_LIB = "DEVPOOL_LIB"

_HERE = os.path.dirname(os.path.abspath(__file__))
_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_path: str | None = None


class Counter(ctypes.Structure):
    """``devpool_counter_t``: now, peak since the last reset, totals added and taken."""

    _fields_ = [
        ("current", ctypes.c_ulonglong),
        ("peak", ctypes.c_ulonglong),
        ("allocated", ctypes.c_ulonglong),
        ("freed", ctypes.c_ulonglong),
    ]


class DeviceStats(ctypes.Structure):
    """``devpool_device_stats_t``, as ``devpool.h`` declares it."""

    _fields_ = [
        ("struct_size", ctypes.c_ulonglong),
        ("requested_bytes", Counter),
        ("allocated_bytes", Counter),
        ("blocks", Counter),
        ("reserved_bytes", Counter),
        ("segments", ctypes.c_ulonglong),
        ("backend_memory_calls", ctypes.c_ulonglong),
        ("failures", ctypes.c_ulonglong),
        ("bad_calls", ctypes.c_ulonglong),
    ]


def _candidates() -> list[str]:
    """Where the library may be, in order: $DEVPOOL_LIB, inside the installed package,
    then a cargo build of the checkout this package sits in."""
    out = []
    env = os.environ.get(ENV_LIB)
    if env:
        out.append(env)
    out += sorted(glob.glob(os.path.join(_HERE, "_devpool_ffi*.so")))
    repo = os.path.dirname(os.path.dirname(_HERE))
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(repo, "target"))
    for profile in ("release", "debug"):
        out.append(os.path.join(target, profile, "libdevpool_ffi.so"))
    return out


def _declare(lib: ctypes.CDLL) -> None:
    c_int, c_size, c_void_p, c_char_p = ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_char_p
    sigs = {
        "devpool_malloc": (c_void_p, [c_size, c_int, c_void_p]),
        "devpool_free": (None, [c_void_p, c_size, c_int, c_void_p]),
        "devpool_release": (c_int, [c_void_p]),
        "devpool_configure": (c_int, [c_char_p]),
        "devpool_stats_json": (c_void_p, [c_int]),
        "devpool_string_free": (None, [c_void_p]),
        "devpool_trim": (c_size, [c_int]),
        "devpool_record_stream": (c_int, [c_void_p, c_int, c_void_p]),
        "devpool_last_error": (c_char_p, []),
        "devpool_version": (c_char_p, []),
        "devpool_device_stats": (c_int, [c_int, ctypes.POINTER(DeviceStats)]),
        "devpool_reset_peak_stats": (c_int, [c_int]),
        "devpool_block_info": (c_void_p, [c_void_p, ctypes.POINTER(c_size), ctypes.POINTER(c_int)]),
        "devpool_enable_peer_access": (c_int, [c_int, c_int]),
        "devpool_cuda_device_count": (c_int, []),
        "devpool_cupy_malloc": (c_void_p, [c_void_p, c_size, c_int]),
        "devpool_cupy_free": (None, [c_void_p, c_void_p, c_int]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args


def library() -> ctypes.CDLL:
    """The loaded library (loaded on first call)."""
    global _lib, _path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for p in _candidates():
            if not os.path.exists(p):
                tried.append(p)
                continue
            lib = ctypes.CDLL(os.path.abspath(p))
            try:
                _declare(lib)
            except AttributeError as e:
                raise ImportError(
                    f"devpool: {p} lacks an entry point this package needs ({e}); "
                    "rebuild it from the same checkout (cargo build --release -p devpool-ffi)"
                ) from None
            _lib, _path = lib, os.path.abspath(p)
            return lib
        raise ImportError(
            "devpool: the C ABI library was not found; install the package with "
            "`pip install ./python` from the repository, or build it with "
            "`cargo build --release -p devpool-ffi` and set DEVPOOL_LIB to "
            "target/release/libdevpool_ffi.so. Looked in: " + ", ".join(tried)
        )


def library_path() -> str:
    """The absolute path of the loaded library."""
    library()
    assert _path is not None
    return _path
