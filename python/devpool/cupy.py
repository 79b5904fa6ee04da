"""devpool as CuPy's memory allocator.

>>> import devpool.cupy
>>> devpool.cupy.enable()                      # doctest: +SKIP
>>> with devpool.cupy.allocator():             # doctest: +SKIP  (only inside the block)
...     x = cupy.zeros(1 << 20)

Each allocation is made for CuPy's current stream, and freed on it when CuPy drops
the array: memory is reused at once by later work on that stream and by other streams
only once that stream's work is done, as with CuPy's own pool. The allocation goes
through ``cupy.cuda.memory.CFunctionAllocator`` straight into devpool's C functions;
only the stream lookup and the out-of-memory check run in Python.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading

import devpool

__all__ = ["enable", "disable", "allocator", "malloc"]

_lock = threading.Lock()
_state: dict = {}


def _make_malloc():
    import cupy

    lib = devpool._lib.library()
    malloc_fn = ctypes.cast(lib.devpool_cupy_malloc, ctypes.c_void_p).value
    free_fn = ctypes.cast(lib.devpool_cupy_free, ctypes.c_void_p).value
    CFunctionAllocator = cupy.cuda.memory.CFunctionAllocator
    OutOfMemoryError = cupy.cuda.memory.OutOfMemoryError
    current_stream = cupy.cuda.get_current_stream
    # One CFunctionAllocator per stream: its `param` is the stream, so both the
    # allocation and the free name it.
    per_stream: dict = {}

    def malloc(size):
        s = current_stream().ptr
        a = per_stream.get(s)
        if a is None:
            a = per_stream[s] = CFunctionAllocator(s, malloc_fn, free_fn, lib).malloc
        mp = a(size)
        if not mp.ptr and size:
            raise OutOfMemoryError(size, -1)
        return mp

    return malloc


def malloc(size: int):
    """Allocate like CuPy's allocator does: a ``cupy.cuda.MemoryPointer``."""
    return _malloc()(size)


def _malloc():
    with _lock:
        m = _state.get("malloc")
        if m is None:
            devpool._choose_backend(explicit=False)
            m = _state["malloc"] = _make_malloc()
        return m


def enable(strategy: str | None = None, **settings) -> None:
    """Make devpool CuPy's allocator (``cupy.cuda.set_allocator``) in this process.
    ``strategy`` and ``settings`` configure devpool if it has not allocated yet."""
    import cupy

    if strategy is not None or settings:
        opts = dict(settings)
        if strategy is not None:
            opts["strategy"] = strategy
        devpool.configure(**opts)
    m = _malloc()
    with _lock:
        if "previous" not in _state:
            _state["previous"] = cupy.cuda.get_allocator()
    cupy.cuda.set_allocator(m)


def disable() -> None:
    """Give CuPy back the allocator it had before :func:`enable`."""
    import cupy

    with _lock:
        prev = _state.pop("previous", None)
    if prev is not None:
        cupy.cuda.set_allocator(prev)


@contextlib.contextmanager
def allocator(strategy: str | None = None, **settings):
    """Within the block, CuPy allocates through devpool (this thread only, as
    ``cupy.cuda.using_allocator``)."""
    import cupy

    if strategy is not None or settings:
        opts = dict(settings)
        if strategy is not None:
            opts["strategy"] = strategy
        devpool.configure(**opts)
    with cupy.cuda.using_allocator(_malloc()):
        yield
