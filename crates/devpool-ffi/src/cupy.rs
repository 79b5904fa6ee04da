//! The entry points for CuPy's `cupy.cuda.memory.CFunctionAllocator`, whose
//! functions have the types `void* malloc(void* param, size_t size, int device)` and
//! `void free(void* param, void* ptr, int device)`.
//!
//! CuPy does not say which stream an allocation is for, so `param` says it: a
//! `cudaStream_t` handle, or null for the legacy default stream (CuPy's default).
//! The rule that follows: memory freed through these functions is reused at once by
//! work on that stream, so CuPy work must be queued on that stream (the default
//! stream unless `param` names another). Work on other streams must allocate through
//! another `CFunctionAllocator` whose `param` is its stream, or through
//! `devpool_malloc` with the stream.

use crate::api::{stream_id, to_ptr};
use crate::guard::shielded;
use crate::ops;
use std::ffi::{c_int, c_void};
use std::ptr;

/// Allocate `size` bytes on `device` for work on the stream `param` (null: the legacy
/// default stream). Null on error or out of memory: CuPy does not check, so wrap its
/// `malloc` to raise (see `examples/cupy_devpool.py`).
#[no_mangle]
pub extern "C" fn devpool_cupy_malloc(
    param: *mut c_void,
    size: usize,
    device: c_int,
) -> *mut c_void {
    shielded("devpool_cupy_malloc", ptr::null_mut(), || {
        to_ptr(ops::malloc(size, device, stream_id(param)))
    })
}

/// Free `ptr` on `device`, last used on the stream `param` (null: the legacy default
/// stream). Bad pointers are handled as by `devpool_free`.
#[no_mangle]
pub extern "C" fn devpool_cupy_free(param: *mut c_void, ptr: *mut c_void, device: c_int) {
    shielded("devpool_cupy_free", (), || {
        ops::free(ptr.addr() as u64, None, device, stream_id(param))
    })
}
