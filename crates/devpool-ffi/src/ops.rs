//! What the entry points do, in safe Rust over plain integers: the C, PyTorch and
//! CuPy functions are thin wrappers around these.

use crate::registry::{self, Device};
use crate::report::{fail, Kind, DEVPOOL_ERR_BACKEND, DEVPOOL_ERR_INVALID, DEVPOOL_ERR_NOT_FOUND};
use devpool_core::{Block, Error, Request, StreamId};
use std::ffi::c_int;
use std::sync::atomic::Ordering::Relaxed;

/// Allocate `size` bytes on `device` for use on `stream`; the address, or 0.
#[inline]
pub(crate) fn malloc(size: usize, device: c_int, stream: StreamId) -> u64 {
    #[cfg(feature = "test-hooks")]
    crate::hooks::maybe_panic(size);
    let dev = match registry::ordinal(device).and_then(registry::device) {
        Ok(d) => d,
        Err(e) => {
            fail(Kind::Backend, &format!("devpool_malloc: {e}"));
            return 0;
        }
    };
    match dev.alloc().allocate(Request::new(size).on_stream(stream)) {
        Ok(block) => {
            if let Some(old) = dev.table.insert(block) {
                fail(
                    Kind::Backend,
                    &format!(
                        "devpool_malloc: device {device}: the allocator handed out {} while it was live (allocator bug)",
                        old.ptr
                    ),
                );
            }
            block.ptr.0
        }
        Err(e) => {
            let kind = if e.is_oom() {
                Kind::OutOfMemory
            } else {
                Kind::Backend
            };
            fail(
                kind,
                &format!("devpool_malloc: device {device}: {size} B on {stream:?}: {e}"),
            );
            0
        }
    }
}

/// Free the block at `addr`, allocated on `device`, last used on `stream`.
/// `size` is what the caller believes it allocated (`None`: not said).
#[inline]
pub(crate) fn free(addr: u64, size: Option<usize>, device: c_int, stream: StreamId) {
    #[cfg(feature = "test-hooks")]
    crate::hooks::maybe_panic(size.unwrap_or(0));
    if addr == 0 {
        return; // like free(NULL)
    }
    let dev = match registry::ordinal(device) {
        Ok(d) => registry::existing(d),
        Err(e) => {
            fail(Kind::UnknownPointer, &format!("devpool_free: {e}"));
            return;
        }
    };
    let Some(dev) = dev else {
        return refuse_free(addr, device, None);
    };
    let Some(block) = dev.table.remove(addr) else {
        return refuse_free(addr, device, Some(dev));
    };
    if let Some(s) = size {
        if s != block.requested {
            dev.misuse.size_mismatch.fetch_add(1, Relaxed);
            fail(
                Kind::SizeMismatch,
                &format!(
                    "devpool_free: {:#x} on device {device} was allocated with {} B but freed with {s} B; freed all the same",
                    addr, block.requested
                ),
            );
        }
    }
    give_back(dev, block, stream, "devpool_free");
}

/// Hand a block taken out of `dev`'s table back to its allocator; on failure keep it
/// known, so the table and the allocator agree.
#[inline]
fn give_back(dev: &Device, block: Block, stream: StreamId, call: &str) -> bool {
    match dev.alloc().deallocate(block, stream) {
        Ok(()) => true,
        Err(e) => {
            dev.table.insert(block);
            fail(
                Kind::Backend,
                &format!("{call}: {:#x} on device {}: {e}", block.ptr.0, dev.ordinal),
            );
            false
        }
    }
}

/// The device whose table holds `addr`, and the block, taken out of the table.
#[inline]
fn take_anywhere(addr: u64) -> Option<(&'static Device, Block)> {
    registry::all_existing().find_map(|d| Some((d, d.table.remove(addr)?)))
}

/// Free the live block at `addr`, whichever device holds it, on the stream it was
/// allocated for (its last use, unless `record_stream` named others). An unknown
/// address is not reported as misuse: the caller may own other pointers (a framework
/// keeping a second allocator beside devpool) and decides what it means.
pub(crate) fn release(addr: u64) -> c_int {
    if addr == 0 {
        return crate::DEVPOOL_OK;
    }
    let Some((dev, block)) = take_anywhere(addr) else {
        crate::report::set_last_error(&format!(
            "devpool_release: {addr:#x} is not a live block of any device"
        ));
        return DEVPOOL_ERR_NOT_FOUND;
    };
    if give_back(dev, block, block.stream, "devpool_release") {
        crate::DEVPOOL_OK
    } else {
        DEVPOOL_ERR_BACKEND
    }
}

/// The live block at `addr` and its device's ordinal.
pub(crate) fn block_info(addr: u64) -> Option<(Block, u32)> {
    registry::all_existing().find_map(|d| Some((d.table.get(addr)?, d.ordinal)))
}

#[cold]
fn refuse_free(addr: u64, device: c_int, dev: Option<&Device>) {
    if let Some(owner) = registry::all_existing().find(|d| d.table.get(addr).is_some()) {
        if let Some(dev) = dev {
            dev.misuse.wrong_device.fetch_add(1, Relaxed);
        }
        fail(
            Kind::WrongDevice,
            &format!(
                "devpool_free: {addr:#x} lives on device {} but was freed on device {device}; not freed",
                owner.ordinal
            ),
        );
        return;
    }
    if let Some(dev) = dev {
        dev.misuse.unknown_pointer.fetch_add(1, Relaxed);
    }
    fail(
        Kind::UnknownPointer,
        &format!(
            "devpool_free: {addr:#x} is not a live block of device {device} (double free, or a pointer devpool did not hand out); ignored"
        ),
    );
}

/// Declare that the block at `addr` is also used on `stream`.
pub(crate) fn record_stream(addr: u64, device: c_int, stream: StreamId) -> c_int {
    let dev = match registry::ordinal(device) {
        Ok(d) => registry::existing(d),
        Err(e) => {
            crate::report::set_last_error(&format!("devpool_record_stream: {e}"));
            return DEVPOOL_ERR_INVALID;
        }
    };
    let Some((dev, block)) = dev.and_then(|d| Some((d, d.table.get(addr)?))) else {
        if let Some(d) = dev {
            d.misuse.unknown_pointer.fetch_add(1, Relaxed);
        }
        fail(
            Kind::UnknownPointer,
            &format!("devpool_record_stream: {addr:#x} is not a live block of device {device}"),
        );
        return DEVPOOL_ERR_NOT_FOUND;
    };
    match dev.alloc().record_stream(&block, stream) {
        Ok(()) => crate::DEVPOOL_OK,
        Err(e @ (Error::NotOwned { .. } | Error::DoubleFree { .. })) => {
            fail(
                Kind::UnknownPointer,
                &format!("devpool_record_stream: {addr:#x} on device {device}: {e}"),
            );
            DEVPOOL_ERR_NOT_FOUND
        }
        Err(e) => {
            fail(
                Kind::Backend,
                &format!("devpool_record_stream: {addr:#x} on device {device}: {e}"),
            );
            DEVPOOL_ERR_BACKEND
        }
    }
}

/// Give cached memory of `device` back; bytes released (0 when the device has no
/// allocator yet, or on error).
pub(crate) fn trim(device: c_int) -> usize {
    let dev = match registry::ordinal(device) {
        Ok(d) => registry::existing(d),
        Err(e) => {
            crate::report::set_last_error(&format!("devpool_trim: {e}"));
            return 0;
        }
    };
    let Some(dev) = dev else { return 0 };
    match dev.alloc().trim() {
        Ok(n) => n,
        Err(e) => {
            fail(
                Kind::Backend,
                &format!("devpool_trim: device {device}: {e}"),
            );
            0
        }
    }
}
