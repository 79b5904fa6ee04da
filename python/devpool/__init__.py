"""devpool: GPU device-memory allocators written in Rust, for Python.

The package wraps devpool's C ABI (one allocator per device, made on first use):

- ``configure(...)`` picks the strategy and backend before the first allocation;
  without a GPU the backend is the CPU mock of a GPU, so everything here runs anywhere.
- ``stats(device)`` and ``device_stats(device)`` report what the allocator holds,
  ``trim(device)`` gives cached memory back, ``reset_peak_stats(device)`` resets peaks.
- ``malloc``/``free``/``record_stream`` reach the allocator directly (integers are
  device addresses; streams are ``cudaStream_t`` handles as integers, 0 the default).
- ``devpool.torch`` makes devpool PyTorch's CUDA allocator; ``devpool.cupy`` CuPy's.

>>> import devpool
>>> devpool.configure(strategy="hybrid", backend="mock")   # doctest: +SKIP
>>> p = devpool.malloc(1 << 20)                             # doctest: +SKIP
>>> devpool.free(p)                                          # doctest: +SKIP
"""

from __future__ import annotations

import ctypes
import json
import os
import threading
from typing import Any

from ._lib import DeviceStats, library, library_path

__all__ = [
    "Error",
    "ConfigError",
    "OutOfMemoryError",
    "UnknownPointerError",
    "configure",
    "backend",
    "stats",
    "device_stats",
    "reset_peak_stats",
    "trim",
    "malloc",
    "free",
    "record_stream",
    "block_size",
    "last_error",
    "version",
    "cuda_device_count",
    "library_path",
]

# Return codes of the C ABI (devpool.h).
OK = 0
ERR_INVALID = -1
ERR_TOO_LATE = -2
ERR_NOT_FOUND = -3
ERR_BACKEND = -4
ERR_PANIC = -5

CONFIG_ENV = "DEVPOOL_CONFIG"


class Error(RuntimeError):
    """A call into devpool failed; the message is devpool's."""


class ConfigError(Error, ValueError):
    """A configuration devpool refused (it does not parse, or it comes too late)."""


class OutOfMemoryError(Error, MemoryError):
    """devpool could not find the memory asked for, even after giving its cache back."""


class UnknownPointerError(Error, ValueError):
    """A pointer that is not a live devpool block (a double free, or a foreign one)."""


_choice_lock = threading.Lock()
_backend_chosen = False


def last_error() -> str:
    """The message of the last failed devpool call on this thread ("" if none)."""
    msg = library().devpool_last_error()
    return msg.decode(errors="replace") if msg else ""


def version() -> str:
    """The version of the loaded library."""
    return library().devpool_version().decode()


def cuda_device_count() -> int:
    """CUDA devices the driver sees (0 without a driver or a GPU)."""
    return int(library().devpool_cuda_device_count())


def _env_names_backend() -> bool:
    text = os.environ.get(CONFIG_ENV, "")
    return any(item.split("=", 1)[0].strip() == "backend" for item in text.split(";"))


def _choose_backend(explicit: bool) -> None:
    """Once, before the first use: with no backend named by the caller or by
    $DEVPOOL_CONFIG, use the GPU when there is one and the mock otherwise."""
    global _backend_chosen
    if _backend_chosen:
        return
    with _choice_lock:
        if _backend_chosen:
            return
        _backend_chosen = True
        if explicit or _env_names_backend():
            return
        if cuda_device_count() == 0:
            _apply("backend=mock")


def _apply(text: str) -> None:
    rc = library().devpool_configure(text.encode())
    if rc == OK:
        return
    if rc == ERR_TOO_LATE:
        raise ConfigError(
            f"{last_error()} (devpool.configure must come before the first allocation)"
        )
    raise ConfigError(last_error() or f"devpool_configure returned {rc}")


def _format_value(key: str, value: Any) -> str:
    if isinstance(value, bool):
        if key in ("move_memory", "burst"):
            return "on" if value else "off"
        raise ConfigError(f"{key}: expected a number, a size string or a name, not {value!r}")
    if value is None:
        return "off"
    return str(value)


def configure(config: str | None = None, /, **settings: Any) -> None:
    """Apply settings before the first allocation of this process.

    Either a configuration string (``"strategy=hybrid;backend=cuda"``) or keywords
    (``strategy="hybrid", backend="cuda", small_max="64K", huge_min=None``); the keys
    are those of the C ABI: ``strategy``, ``backend`` (``cuda``, ``mock``), ``small_max``,
    ``huge_min`` (``None`` means off), ``mock_capacity``, ``log`` (``off``, ``once``,
    ``all``), and for strategies that map pages (``hybrid``, ``tlsf-*``, ``buddy-*``)
    ``cache_floor`` (unused mapped bytes always kept), ``move_margin`` (how far past
    the recent peak of allocated bytes the pool grows before it moves unused memory
    instead, e.g. ``0.02``: more memory for fewer driver calls), ``move_slack`` (how far,
    as a fraction of that peak, the pool may widen this on its own when memory keeps
    moving from step to step), ``move_memory`` (``True``/``False``), ``burst``
    (``True``/``False``, default ``False``: whether growth that comes in bursts while
    little is freed, as in a training step's first pass, maps ahead, so that few of
    those allocations wait for the driver, for a little more memory at the peak), and
    ``map_batch`` (pages mapped at once where a block needs pages), ``chunk_pages``,
    ``chunk_divisor``, ``chunk_min_pages`` (how finely mapped runs
    are cut into physical chunks: every chunk costs the driver one mapping, so
    coarser chunks cost fewer driver calls and may hold more memory), and ``reserve``
    (bytes mapped at the first large allocation and kept while fewer are allocated,
    like RMM's initial pool size: a job that knows its footprint, e.g.
    ``reserve="40G"``, maps it once instead of in the allocations that grow the pool;
    :func:`trim` gives it back). Keys not given
    keep their value. Without a GPU and without a backend named
    here or in ``$DEVPOOL_CONFIG``, the mock backend is used.

    Raises :class:`ConfigError` if devpool refuses the settings (nothing changes then)
    or if an allocation has happened already.
    """
    parts = []
    if config is not None:
        if not isinstance(config, str):
            raise ConfigError(f"the configuration must be a string, not {type(config).__name__}")
        parts.append(config)
    for key, value in settings.items():
        parts.append(f"{key}={_format_value(key, value)}")
    text = ";".join(parts)
    names_backend = any(
        item.split("=", 1)[0].strip() == "backend" for item in text.split(";")
    )
    _choose_backend(explicit=names_backend)
    _apply(text)


def backend(device: int = 0) -> str:
    """The backend the allocator of ``device`` uses, or would use if made now."""
    s = stats(device)
    if s.get("initialized"):
        return s["backend"]
    for item in s["config"].split(";"):
        k, _, v = item.partition("=")
        if k == "backend":
            return v
    return "cuda"


def stats(device: int = 0) -> dict:
    """Everything devpool reports of ``device``, as a dict (see ``devpool.h``):
    strategy, config, the strategy's own ``stats``, ``backend_counters`` (device memory
    held), the C ABI's own count ``c_abi``, ``bad_calls``, hybrid ``routes``."""
    _choose_backend(explicit=False)
    lib = library()
    p = lib.devpool_stats_json(int(device))
    if not p:
        raise Error(last_error())
    try:
        return json.loads(ctypes.string_at(p).decode())
    finally:
        lib.devpool_string_free(p)


def device_stats(device: int = 0) -> dict:
    """The statistics struct of ``device`` as a dict of plain figures: for
    ``requested_bytes``, ``allocated_bytes``, ``blocks`` and ``reserved_bytes`` a dict of
    ``current``, ``peak`` (since the last reset), ``allocated`` and ``freed`` (totals);
    then ``segments``, ``backend_memory_calls``, ``failures`` and ``bad_calls``."""
    out = DeviceStats()
    rc = library().devpool_device_stats(int(device), ctypes.byref(out))
    if rc != OK:
        raise Error(last_error())
    result: dict[str, Any] = {}
    for name, _ in DeviceStats._fields_:
        if name == "struct_size":
            continue
        v = getattr(out, name)
        if isinstance(v, int):
            result[name] = v
        else:
            result[name] = {k: getattr(v, k) for k, _ in v._fields_}
    return result


def reset_peak_stats(device: int = 0) -> None:
    """Set the peaks of ``device``'s statistics back to their current values."""
    if library().devpool_reset_peak_stats(int(device)) != OK:
        raise Error(last_error())


def trim(device: int = 0) -> int:
    """Give ``device``'s cached memory back to the driver; returns the bytes released."""
    return int(library().devpool_trim(int(device)))


def malloc(size: int, device: int = 0, stream: int = 0) -> int:
    """Allocate ``size`` bytes on ``device`` for work on ``stream``; the device address.

    Raises :class:`OutOfMemoryError` when there is no room, :class:`Error` otherwise.
    """
    if size < 0:
        raise ValueError(f"size must not be negative, got {size}")
    _choose_backend(explicit=False)
    p = library().devpool_malloc(int(size), int(device), int(stream) or None)
    if p:
        return int(p)
    msg = last_error()
    if "out of memory" in msg or "larger than" in msg:
        raise OutOfMemoryError(msg)
    raise Error(msg)


def free(ptr: int, stream: int | None = None, device: int | None = None) -> None:
    """Free the block at ``ptr``.

    With no ``stream``, the block is freed on the stream it was allocated for (its
    memory is reused at once there, elsewhere once that stream's work is done). With a
    ``stream`` (and ``device``, default 0), it is freed as last used on that stream.
    Raises :class:`UnknownPointerError` for a pointer that is not a live block.
    """
    lib = library()
    if stream is None:
        if device is not None:
            raise ValueError("device is only meaningful together with stream")
        rc = lib.devpool_release(int(ptr) or None)
        if rc == ERR_NOT_FOUND:
            raise UnknownPointerError(
                f"{int(ptr):#x} is not a live devpool block (double free, or not devpool's)"
            )
        if rc != OK:
            raise Error(last_error())
        return
    if block_size(ptr) is None:
        raise UnknownPointerError(
            f"{int(ptr):#x} is not a live devpool block (double free, or not devpool's)"
        )
    lib.devpool_free(int(ptr), 0, int(device or 0), int(stream) or None)


def record_stream(ptr: int, stream: int, device: int = 0) -> None:
    """Declare that the block at ``ptr`` is also used by work on ``stream``: its free
    then waits for that work too (PyTorch's ``record_stream``)."""
    rc = library().devpool_record_stream(int(ptr) or None, int(device), int(stream) or None)
    if rc == ERR_NOT_FOUND:
        raise UnknownPointerError(last_error())
    if rc != OK:
        raise Error(last_error())


def block_size(ptr: int) -> int | None:
    """The requested size of the live block at ``ptr``, or None if there is none."""
    size = ctypes.c_size_t(0)
    start = library().devpool_block_info(int(ptr) or None, ctypes.byref(size), None)
    return int(size.value) if start else None
