//! Entry points that a framework's own allocator interface needs beyond malloc and
//! free (the Python package's PyTorch allocator uses all of them): free by pointer
//! alone, statistics as a plain struct with resettable peaks, the size behind a
//! pointer, peer access, and how many CUDA devices there are.

use crate::api::to_ptr;
use crate::counters::Counter;
use crate::guard::shielded;
use crate::registry;
use crate::report::{
    fail, set_last_error, Kind, DEVPOOL_ERR_BACKEND, DEVPOOL_ERR_INVALID, DEVPOOL_ERR_PANIC,
    DEVPOOL_OK,
};
use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering::Relaxed;

/// The statistics of one device as a plain C struct (`devpool_device_stats_t`), for
/// callers that read them often (PyTorch's `memory_allocated()` is called every
/// step by many training loops).
///
/// The byte and block figures are counted by the C ABI itself as blocks cross it,
/// independently of the strategy; their peaks are reset by
/// [`devpool_reset_peak_stats`]. `reserved_bytes` is the device memory the backend
/// holds (regions plus mapped pages) as the backend counts it; its `allocated` and
/// `freed` totals are not kept (0).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DevpoolDeviceStats {
    /// `sizeof(devpool_device_stats_t)` as the library knows it.
    pub struct_size: u64,
    /// Requested bytes of live blocks.
    pub requested_bytes: Counter,
    /// Granted bytes of live blocks (requested plus rounding).
    pub allocated_bytes: Counter,
    /// Live blocks (`allocated`: allocations ever, `freed`: frees ever).
    pub blocks: Counter,
    /// Device memory held from the driver: regions plus mapped pages.
    pub reserved_bytes: Counter,
    /// Regions and mapped pages held now (PyTorch's "segments").
    pub segments: u64,
    /// Backend calls that took or gave back memory.
    pub backend_memory_calls: u64,
    /// Failed allocations (out of memory or a backend error).
    pub failures: u64,
    /// Calls refused as misuse: unknown pointers, wrong device, wrong size.
    pub bad_calls: u64,
}

/// Free the live block at `ptr`, whichever device it is on, on the stream it was
/// allocated for: what a framework's deleter calls when it knows only the pointer.
/// Work queued on that stream may still use the block (it is reused on that stream
/// at once, elsewhere only after that work, and work on streams named by
/// [`devpool_record_stream`](crate::devpool_record_stream), has completed).
///
/// Returns [`DEVPOOL_OK`] (also for null), [`DEVPOOL_ERR_NOT_FOUND`](crate::DEVPOOL_ERR_NOT_FOUND) when `ptr` is
/// not a live block of any device (nothing is freed, and unlike `devpool_free` it is
/// not counted as misuse: a framework may hold pointers of a second allocator and
/// try devpool first), or [`DEVPOOL_ERR_BACKEND`].
#[no_mangle]
pub extern "C" fn devpool_release(ptr: *mut c_void) -> c_int {
    shielded("devpool_release", DEVPOOL_ERR_PANIC, || {
        crate::ops::release(ptr.addr() as u64)
    })
}

/// Fill `out` with the statistics of `device`. A device without an allocator yet
/// gives zeros. Returns [`DEVPOOL_OK`], or [`DEVPOOL_ERR_INVALID`] for a null `out`
/// or a bad ordinal.
///
/// # Safety
/// `out` is null or points to writable memory for one `DevpoolDeviceStats`.
#[no_mangle]
pub unsafe extern "C" fn devpool_device_stats(
    device: c_int,
    out: *mut DevpoolDeviceStats,
) -> c_int {
    shielded("devpool_device_stats", DEVPOOL_ERR_PANIC, || {
        if out.is_null() {
            set_last_error("devpool_device_stats: null output pointer");
            return DEVPOOL_ERR_INVALID;
        }
        let stats = match device_stats(device) {
            Ok(s) => s,
            Err(e) => {
                set_last_error(&format!("devpool_device_stats: {e}"));
                return DEVPOOL_ERR_INVALID;
            }
        };
        // SAFETY: not null, and writable for one struct by the caller's contract.
        unsafe { out.write(stats) };
        DEVPOOL_OK
    })
}

/// The statistics of `device` (zeros when it has no allocator yet).
pub(crate) fn device_stats(device: c_int) -> Result<DevpoolDeviceStats, registry::DeviceError> {
    let ordinal = registry::ordinal(device)?;
    let mut s = DevpoolDeviceStats {
        struct_size: size_of::<DevpoolDeviceStats>() as u64,
        ..Default::default()
    };
    let Some(dev) = registry::existing(ordinal) else {
        return Ok(s);
    };
    let live = dev.live();
    let c = dev.alloc().backend().counters();
    s.requested_bytes = live.requested_bytes;
    s.allocated_bytes = live.allocated_bytes;
    s.blocks = live.blocks;
    s.reserved_bytes = Counter {
        current: c.bytes_in_use.current,
        peak: c.bytes_in_use.peak,
        allocated: 0,
        freed: 0,
    };
    s.segments =
        (c.region_allocs + c.pages_mapped).saturating_sub(c.region_frees + c.pages_unmapped);
    s.backend_memory_calls = c.memory_calls();
    s.failures = live.failures;
    s.bad_calls = dev.misuse.unknown_pointer.load(Relaxed)
        + dev.misuse.wrong_device.load(Relaxed)
        + dev.misuse.size_mismatch.load(Relaxed);
    Ok(s)
}

/// Set the peaks of `device`'s statistics (bytes, blocks, and the backend's bytes
/// held) back to their current values. Returns [`DEVPOOL_OK`] (also for a device
/// without an allocator yet) or [`DEVPOOL_ERR_INVALID`] for a bad ordinal.
#[no_mangle]
pub extern "C" fn devpool_reset_peak_stats(device: c_int) -> c_int {
    shielded(
        "devpool_reset_peak_stats",
        DEVPOOL_ERR_PANIC,
        || match registry::ordinal(device) {
            Ok(d) => {
                if let Some(dev) = registry::existing(d) {
                    dev.allocator.reset_peaks();
                    dev.alloc().backend().reset_peak_bytes();
                }
                DEVPOOL_OK
            }
            Err(e) => {
                set_last_error(&format!("devpool_reset_peak_stats: {e}"));
                DEVPOOL_ERR_INVALID
            }
        },
    )
}

/// What devpool knows of the live block at `ptr`: its start (the pointer itself:
/// blocks are never parts of a larger one handed out), its requested size in
/// `*size` and its device in `*device` (either may be null). Returns the block's
/// start, or null when `ptr` is not a live block (nothing is written then).
///
/// # Safety
/// `size` and `device` are each null or writable.
#[no_mangle]
pub unsafe extern "C" fn devpool_block_info(
    ptr: *const c_void,
    size: *mut usize,
    device: *mut c_int,
) -> *mut c_void {
    shielded("devpool_block_info", std::ptr::null_mut(), || {
        let Some((block, ordinal)) = crate::ops::block_info(ptr.addr() as u64) else {
            return std::ptr::null_mut();
        };
        if !size.is_null() {
            // SAFETY: not null, writable by the caller's contract.
            unsafe { size.write(block.requested) };
        }
        if !device.is_null() {
            // SAFETY: not null, writable by the caller's contract.
            unsafe { device.write(ordinal as c_int) };
        }
        to_ptr(block.ptr.0)
    })
}

/// Let device `peer` access the memory `device`'s allocator holds now and maps
/// later (needed for direct copies between devices; regions need the driver's peer
/// access, mapped pages an access grant). Makes `device`'s allocator if needed.
/// Returns [`DEVPOOL_OK`], [`DEVPOOL_ERR_INVALID`] for bad ordinals, or
/// [`DEVPOOL_ERR_BACKEND`] (the message says why: no peer path, say).
#[no_mangle]
pub extern "C" fn devpool_enable_peer_access(device: c_int, peer: c_int) -> c_int {
    shielded("devpool_enable_peer_access", DEVPOOL_ERR_PANIC, || {
        let (d, p) = match (registry::ordinal(device), registry::ordinal(peer)) {
            (Ok(d), Ok(p)) => (d, p),
            (Err(e), _) | (_, Err(e)) => {
                set_last_error(&format!("devpool_enable_peer_access: {e}"));
                return DEVPOOL_ERR_INVALID;
            }
        };
        let dev = match registry::device(d) {
            Ok(dev) => dev,
            Err(e) => {
                fail(Kind::Backend, &format!("devpool_enable_peer_access: {e}"));
                return DEVPOOL_ERR_BACKEND;
            }
        };
        match dev
            .alloc()
            .backend()
            .enable_peer_access(devpool_core::DeviceId(p as u32))
        {
            Ok(()) => DEVPOOL_OK,
            Err(e) => {
                fail(
                    Kind::Backend,
                    &format!("devpool_enable_peer_access: device {d} to {p}: {e}"),
                );
                DEVPOOL_ERR_BACKEND
            }
        }
    })
}

/// How many CUDA devices the driver sees; 0 when there is no driver or no device
/// (the reason is in [`devpool_last_error`](crate::devpool_last_error)). Callers
/// use it to choose the mock backend on machines without a GPU.
#[no_mangle]
pub extern "C" fn devpool_cuda_device_count() -> c_int {
    shielded(
        "devpool_cuda_device_count",
        0,
        || match devpool_cuda::device_count() {
            Ok(n) => n.min(c_int::MAX as u32) as c_int,
            Err(e) => {
                set_last_error(&format!("devpool_cuda_device_count: {e}"));
                0
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_struct_layout_is_fixed() {
        // The size word, four counters of four u64, four u64: as the header declares.
        assert_eq!(size_of::<DevpoolDeviceStats>(), 8 * (1 + 4 * 4 + 4));
    }
}
