//! Loading the CUDA driver, turning its result codes into [`BackendError`]s, and
//! making a context current on the calling thread.
//!
//! The driver library is opened at run time. Before the first call into it, the
//! library and every entry point this crate uses are looked up, so that a machine
//! without a driver (or with one too old) gets an error value instead of a panic.

use cudarc::driver::sys::{self, CUresult};
use devpool_core::BackendError;
use std::ffi::{c_char, CStr};
use std::sync::OnceLock;

/// Every driver entry point this crate calls, as exported by the driver library.
const SYMBOLS: &[&str] = &[
    "cuInit",
    "cuDriverGetVersion",
    "cuGetErrorName",
    "cuGetErrorString",
    "cuDeviceGet",
    "cuDeviceGetCount",
    "cuDeviceGetName",
    "cuDeviceGetAttribute",
    "cuDeviceTotalMem_v2",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxGetCurrent",
    "cuCtxSetCurrent",
    "cuCtxSynchronize",
    "cuMemGetInfo_v2",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemGetAllocationGranularity",
    "cuMemAddressReserve",
    "cuMemAddressFree",
    "cuMemCreate",
    "cuMemMap",
    "cuMemSetAccess",
    "cuMemUnmap",
    "cuMemRelease",
    "cuMemRetainAllocationHandle",
    "cuStreamCreate",
    "cuStreamDestroy_v2",
    "cuStreamSynchronize",
    "cuStreamWaitEvent",
    "cuEventCreate",
    "cuEventDestroy_v2",
    "cuEventRecord",
    "cuEventQuery",
    "cuEventSynchronize",
    "cuMemsetD8Async",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
    "cuMemAllocAsync",
    "cuMemFreeAsync",
    "cuDeviceGetDefaultMemPool",
    "cuMemPoolSetAttribute",
    "cuMemPoolGetAttribute",
    "cuMemPoolTrimTo",
    "cuDeviceCanAccessPeer",
    "cuCtxEnablePeerAccess",
    "cuMemcpyAsync",
];

static LOADED: OnceLock<Result<(), BackendError>> = OnceLock::new();
static INITIALIZED: OnceLock<Result<(), BackendError>> = OnceLock::new();

/// Whether the driver library can be opened and has every entry point this crate
/// uses. Nothing is initialized.
pub(crate) fn load() -> Result<(), BackendError> {
    LOADED
        .get_or_init(|| {
            // SAFETY: this only tries to open the driver library by its usual names.
            if !unsafe { sys::is_culib_present() } {
                return Err(BackendError::Unavailable(
                    "the CUDA driver library (libcuda) was not found".into(),
                ));
            }
            // SAFETY: the library is present (checked just above), so `culib` opens it
            // with the same list of names and does not panic.
            let lib = unsafe { sys::culib() };
            for name in SYMBOLS {
                // SAFETY: looking a symbol up has no side effect; it is not called here.
                let found = unsafe { lib.get::<unsafe extern "C" fn()>(name.as_bytes()) };
                if found.is_err() {
                    return Err(BackendError::Unavailable(format!(
                        "the CUDA driver has no {name}: it is too old for this crate"
                    )));
                }
            }
            Ok(())
        })
        .clone()
}

/// Load the driver and initialize it (`cuInit`), once per process.
pub(crate) fn init() -> Result<(), BackendError> {
    load()?;
    INITIALIZED
        .get_or_init(|| {
            // SAFETY: the driver is loaded with every symbol checked; cuInit takes flags 0.
            let r = unsafe { sys::cuInit(0) };
            if r == CUresult::CUDA_SUCCESS {
                Ok(())
            } else {
                Err(BackendError::Unavailable(format!(
                    "cuInit failed: {}",
                    describe(r)
                )))
            }
        })
        .clone()
}

/// The name of a result code and the driver's sentence for it:
/// `CUDA_ERROR_OUT_OF_MEMORY (out of memory)`. Only called once the driver is loaded.
pub(crate) fn describe(r: CUresult) -> String {
    let mut text: *const c_char = std::ptr::null();
    // SAFETY: the driver is loaded (every caller got `r` from it); cuGetErrorString
    // writes a pointer to a static string or leaves it null.
    let ok = unsafe { sys::cuGetErrorString(r, &mut text) } == CUresult::CUDA_SUCCESS;
    if ok && !text.is_null() {
        // SAFETY: the driver returned a NUL-terminated string that lives forever.
        let s = unsafe { CStr::from_ptr(text) }.to_string_lossy();
        format!("{r:?} ({s})")
    } else {
        format!("{r:?}")
    }
}

/// The [`BackendError::Driver`] of a failed call.
pub(crate) fn error(call: &'static str, r: CUresult) -> BackendError {
    BackendError::Driver {
        call,
        detail: describe(r),
    }
}

/// `Ok` on success, else a [`BackendError::Driver`] naming `call` and the code.
#[inline]
pub(crate) fn check(call: &'static str, r: CUresult) -> Result<(), BackendError> {
    if r == CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(error(call, r))
    }
}

/// A CUDA context handle (the device's primary context).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Context(pub(crate) sys::CUcontext);

// SAFETY: a context handle is an opaque token; the driver lets any thread make it
// current and use it, and synchronizes internally.
unsafe impl Send for Context {}
// SAFETY: as above: shared use from several threads is what the driver expects.
unsafe impl Sync for Context {}

impl Context {
    /// Make this context current on the calling thread until the guard drops.
    ///
    /// One `cuCtxGetCurrent` (a thread-local read in the driver) when it is current
    /// already, the common case. When another context was current (the caller works
    /// with another device), it is made current again when the guard drops, so the
    /// caller's own CUDA state is left as it was. A thread with no context keeps this
    /// one, so the next call costs only the check.
    #[inline]
    pub(crate) fn enter(self) -> Result<Entered, BackendError> {
        let mut current: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: the driver is initialized (a Context exists only after cuInit);
        // cuCtxGetCurrent writes one handle.
        check("cuCtxGetCurrent", unsafe {
            sys::cuCtxGetCurrent(&mut current)
        })?;
        if current == self.0 {
            return Ok(Entered { restore: None });
        }
        // SAFETY: `self.0` is a retained primary context, valid while its backend lives.
        check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(self.0) })?;
        Ok(Entered {
            restore: (!current.is_null()).then_some(current),
        })
    }
}

/// Guard of [`Context::enter`]: puts the caller's previous context back on drop. It
/// holds a raw pointer, so it stays on the thread that made it.
#[must_use]
pub(crate) struct Entered {
    restore: Option<sys::CUcontext>,
}

impl Drop for Entered {
    fn drop(&mut self) {
        if let Some(prev) = self.restore.take() {
            // SAFETY: `prev` was current on this thread a moment ago, so it is a live
            // context; a failure leaves ours current, which is harmless.
            let _ = unsafe { sys::cuCtxSetCurrent(prev) };
        }
    }
}

/// The raw stream handle of a [`StreamId`](devpool_core::StreamId).
#[inline]
pub(crate) fn raw_stream(s: devpool_core::StreamId) -> sys::CUstream {
    s.raw() as usize as sys::CUstream
}

/// The raw event handle of an [`EventId`](devpool_core::EventId).
#[inline]
pub(crate) fn raw_event(e: devpool_core::EventId) -> sys::CUevent {
    e.0 as usize as sys::CUevent
}
