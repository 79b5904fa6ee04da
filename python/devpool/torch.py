"""devpool as PyTorch's CUDA allocator.

>>> import devpool.torch
>>> devpool.torch.enable()            # doctest: +SKIP  (before the first CUDA operation)

Not the bare ``CUDAPluggableAllocator``: a small C++ extension, compiled once against
the installed PyTorch (see ``devpool._build``), implements PyTorch's own
``CUDAAllocator`` interface over devpool, so that:

- ``Tensor.record_stream`` is honoured: a block used on another stream is not reused
  until that stream's work is done;
- ``torch.cuda.empty_cache()`` gives devpool's cached memory back;
- ``memory_allocated``, ``memory_reserved``, their peaks, ``reset_peak_memory_stats``,
  ``memory_stats`` and ``memory_summary`` report devpool's figures;
- out of memory raises ``torch.cuda.OutOfMemoryError`` with devpool's message;
- ``cacheInfo`` is answered, so ``torch.backends.cudnn.benchmark = True`` works;
- private pools (CUDA graph capture, ``torch.compile(mode="reduce-overhead")``,
  ``torch.cuda.MemPool``) are served by PyTorch's own caching allocator kept beside
  devpool, with their lifetime and checkpointing as PyTorch defines them.

``mem_pool()`` gives a ``torch.cuda.MemPool`` whose memory comes from devpool, for
using devpool in part of a program without replacing PyTorch's allocator.
"""

from __future__ import annotations

import threading
from typing import Any

import devpool

__all__ = ["enable", "is_enabled", "mem_pool", "allocator", "extension"]

_lock = threading.Lock()
_ext = None


def extension():
    """The compiled extension module (built on first call, then cached)."""
    global _ext
    if _ext is None:
        with _lock:
            if _ext is None:
                from devpool._build import build_extension

                _ext = build_extension()
    return _ext


def allocator():
    """devpool's ``torch._C._cuda_CUDAAllocator`` (one per process)."""
    return extension().allocator(devpool.library_path())


def is_enabled() -> bool:
    """Whether devpool is PyTorch's CUDA allocator in this process."""
    return _ext is not None and bool(_ext.is_current())


def _configure(strategy: str | None, settings: dict[str, Any]) -> None:
    opts = dict(settings)
    if strategy is not None:
        opts["strategy"] = strategy
    opts.setdefault("backend", "cuda")
    try:
        devpool.configure(**opts)
    except devpool.ConfigError:
        # Settings already fixed by an earlier allocation: fine only if nothing new
        # was asked for.
        if strategy is not None or settings:
            raise


def enable(strategy: str | None = None, **settings: Any) -> None:
    """Make devpool PyTorch's CUDA allocator for this process.

    Call it before the first CUDA operation (PyTorch cannot swap an allocator that has
    served memory). ``strategy`` and ``settings`` are devpool's configuration (see
    :func:`devpool.configure`; the strategy defaults to ``hybrid``, or to what
    ``devpool.configure`` or ``$DEVPOOL_CONFIG`` chose). Calling it again does nothing.

    Raises ``RuntimeError`` if PyTorch's CUDA state is already initialized, and
    :class:`devpool._build.BuildError` if the extension cannot be built here.
    """
    import torch

    if is_enabled():
        return
    if not torch.cuda.is_available():
        raise RuntimeError("devpool.torch.enable: PyTorch sees no CUDA device")
    if torch.cuda.is_initialized():
        raise RuntimeError(
            "devpool.torch.enable() must run before the first CUDA operation of the "
            "process (PyTorch cannot replace an allocator that has served memory); "
            "call it first, or use devpool.torch.mem_pool() with torch.cuda.use_mem_pool"
        )
    _configure(strategy, settings)
    alloc = allocator()
    torch.cuda.memory.change_current_allocator(torch.cuda.memory._CUDAAllocator(alloc))


def mem_pool(strategy: str | None = None, **settings: Any):
    """A ``torch.cuda.MemPool`` whose segments come from devpool.

    >>> pool = devpool.torch.mem_pool()                     # doctest: +SKIP
    >>> with torch.cuda.use_mem_pool(pool):                 # doctest: +SKIP
    ...     x = torch.empty(1 << 20, device="cuda")

    Works whether or not devpool is the global allocator. PyTorch's caching allocator
    manages the pool (its streams, splitting and caching) on top of devpool's blocks.
    """
    import torch

    if not is_enabled():
        _configure(strategy, settings)
    return torch.cuda.MemPool(allocator())
