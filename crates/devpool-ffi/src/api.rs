//! The C entry points for C and CUDA programs and PyTorch (`devpool.h` declares
//! them). Each runs its body through [`shielded`](crate::guard::shielded): no panic
//! and no error ever unwinds into the caller.

use crate::guard::shielded;
use crate::registry::{self, ConfigureError};
use crate::report::{
    last_error_ptr, set_last_error, DEVPOOL_ERR_INVALID, DEVPOOL_ERR_PANIC, DEVPOOL_ERR_TOO_LATE,
    DEVPOOL_OK,
};
use crate::{ops, stats_json};
use devpool_core::StreamId;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::ptr;

/// A CUDA stream handle (`cudaStream_t`, `CUstream`), passed through opaquely.
/// Null is the legacy default stream.
pub type CudaStream = *mut c_void;

/// The stream a C caller names.
#[inline]
pub(crate) fn stream_id(stream: CudaStream) -> StreamId {
    // SAFETY: the C ABI's contract (include/devpool.h): `stream` is null (the legacy
    // default stream) or a stream of the device's context that outlives the call's
    // use of it, as for any CUDA allocator interface.
    unsafe { StreamId::from_raw(stream.addr() as u64) }
}

#[inline]
pub(crate) fn to_ptr(addr: u64) -> *mut c_void {
    // Device addresses carry no host provenance: they are numbers to the host.
    ptr::without_provenance_mut(addr as usize)
}

/// Allocate `size` bytes on `device` for work queued on `stream`: the signature
/// PyTorch's `CUDAPluggableAllocator` loads.
///
/// Returns a 256-byte aligned device pointer, or null when out of memory or on any
/// error (the reason is in [`devpool_last_error`]). A zero size gets a real, unique
/// pointer, freed like any other. The device's allocator is made on the first call
/// naming the device.
#[no_mangle]
pub extern "C" fn devpool_malloc(size: usize, device: c_int, stream: CudaStream) -> *mut c_void {
    shielded("devpool_malloc", ptr::null_mut(), || {
        to_ptr(ops::malloc(size, device, stream_id(stream)))
    })
}

/// Free `ptr`, allocated on `device`, whose last use was queued on `stream`: the
/// signature PyTorch's `CUDAPluggableAllocator` loads.
///
/// The memory is reused at once by work on `stream` (queued after this point), and
/// by other streams only once the work queued on `stream` so far (and on streams
/// named by [`devpool_record_stream`]) has completed. `size` is the size passed to
/// [`devpool_malloc`], or 0 when not known; a different nonzero size is reported
/// and the block is freed all the same.
///
/// A null `ptr` does nothing. A pointer that is not live on `device` (a double
/// free, a foreign pointer, a block of another device) is reported once on
/// standard error and left alone: nothing is freed.
#[no_mangle]
pub extern "C" fn devpool_free(ptr: *mut c_void, size: usize, device: c_int, stream: CudaStream) {
    shielded("devpool_free", (), || {
        ops::free(
            ptr.addr() as u64,
            (size != 0).then_some(size),
            device,
            stream_id(stream),
        )
    })
}

/// Apply a configuration string (`"strategy=hybrid;backend=cuda"`; the keys are in
/// the [`config`](crate::config) module's table) over the current settings.
///
/// Returns 0, [`DEVPOOL_ERR_INVALID`] when the string is null or does not parse
/// (nothing changes), or [`DEVPOOL_ERR_TOO_LATE`] once any device's allocator
/// exists: settings take effect only before the first allocation.
///
/// # Safety
/// `config` is null or points to a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn devpool_configure(config: *const c_char) -> c_int {
    shielded("devpool_configure", DEVPOOL_ERR_PANIC, || {
        if config.is_null() {
            set_last_error("devpool_configure: null configuration string");
            return DEVPOOL_ERR_INVALID;
        }
        // SAFETY: not null, and NUL-terminated by the caller's contract.
        let text = unsafe { CStr::from_ptr(config) };
        let Ok(text) = text.to_str() else {
            set_last_error("devpool_configure: the configuration string is not UTF-8");
            return DEVPOOL_ERR_INVALID;
        };
        match registry::configure(text) {
            Ok(()) => DEVPOOL_OK,
            Err(ConfigureError::Invalid(e)) => {
                set_last_error(&format!("devpool_configure: {e}"));
                DEVPOOL_ERR_INVALID
            }
            Err(ConfigureError::TooLate) => {
                set_last_error(
                    "devpool_configure: an allocator exists already; settings apply only before the first allocation",
                );
                DEVPOOL_ERR_TOO_LATE
            }
        }
    })
}

/// The statistics of `device` as a JSON object (see the crate docs for its keys),
/// in a string to be freed with [`devpool_string_free`]; null on error.
#[no_mangle]
pub extern "C" fn devpool_stats_json(device: c_int) -> *mut c_char {
    shielded(
        "devpool_stats_json",
        ptr::null_mut(),
        || match stats_json::stats_json(device).map(CString::new) {
            Ok(Ok(s)) => s.into_raw(),
            Ok(Err(e)) => {
                set_last_error(&format!("devpool_stats_json: {e}"));
                ptr::null_mut()
            }
            Err(e) => {
                set_last_error(&format!("devpool_stats_json: {e}"));
                ptr::null_mut()
            }
        },
    )
}

/// Free a string returned by [`devpool_stats_json`]. Null does nothing.
///
/// # Safety
/// `s` is null or a string from [`devpool_stats_json`] not freed yet.
#[no_mangle]
pub unsafe extern "C" fn devpool_string_free(s: *mut c_char) {
    shielded("devpool_string_free", (), || {
        if !s.is_null() {
            // SAFETY: by the caller's contract `s` came from CString::into_raw in
            // devpool_stats_json and is freed once.
            drop(unsafe { CString::from_raw(s) });
        }
    })
}

/// Give `device`'s cached memory back to the driver (after waiting for pending
/// cross-stream frees); returns the bytes released, 0 when the device has no
/// allocator yet or on error.
#[no_mangle]
pub extern "C" fn devpool_trim(device: c_int) -> usize {
    shielded("devpool_trim", 0, || ops::trim(device))
}

/// Declare that the block at `ptr` on `device` is also used by work on `stream`
/// (PyTorch's `record_stream`): its free then also waits for that work.
///
/// Returns 0, [`DEVPOOL_ERR_NOT_FOUND`](crate::DEVPOOL_ERR_NOT_FOUND) when `ptr` is
/// not a live block of `device`, [`DEVPOOL_ERR_INVALID`] for a bad ordinal, or
/// [`DEVPOOL_ERR_BACKEND`](crate::DEVPOOL_ERR_BACKEND).
#[no_mangle]
pub extern "C" fn devpool_record_stream(
    ptr: *mut c_void,
    device: c_int,
    stream: CudaStream,
) -> c_int {
    shielded("devpool_record_stream", DEVPOOL_ERR_PANIC, || {
        ops::record_stream(ptr.addr() as u64, device, stream_id(stream))
    })
}

/// The message of the last failure on the calling thread, or an empty string;
/// successful calls leave it as it was (like `errno`). The pointer stays valid until
/// this thread calls `devpool_last_error` again: no other devpool call, failing or
/// not, frees it.
#[no_mangle]
pub extern "C" fn devpool_last_error() -> *const c_char {
    shielded("devpool_last_error", c"".as_ptr(), last_error_ptr)
}

/// The library's version, a static string.
#[no_mangle]
pub extern "C" fn devpool_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
