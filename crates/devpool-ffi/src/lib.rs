//! # devpool-ffi
//!
//! The C ABI of devpool: `libdevpool_ffi.so`, for C and CUDA programs, PyTorch
//! (`torch.cuda.memory.CUDAPluggableAllocator`) and CuPy
//! (`cupy.cuda.memory.CFunctionAllocator`). The header is `include/devpool.h`.
//!
//! | function | for |
//! |---|---|
//! | [`devpool_malloc`], [`devpool_free`] | C, CUDA, PyTorch (its exact signatures) |
//! | [`devpool_cupy_malloc`], [`devpool_cupy_free`] | CuPy (its exact signatures) |
//! | [`devpool_configure`] | strategy, backend, thresholds, before the first allocation |
//! | [`devpool_stats_json`], [`devpool_string_free`] | statistics as JSON |
//! | [`devpool_trim`], [`devpool_record_stream`] | give cache back; cross-stream use |
//! | [`devpool_last_error`], [`devpool_version`] | diagnostics |
//! | [`devpool_release`], [`devpool_device_stats`], [`devpool_reset_peak_stats`], [`devpool_block_info`], [`devpool_enable_peer_access`], [`devpool_cuda_device_count`] | what a framework's allocator needs beyond malloc/free (the Python package's PyTorch allocator) |
//!
//! ## Rules
//!
//! - **One allocator per device**, made on the first call that names the device
//!   (ordinals `0..64`), with the settings of that moment: [`DEVPOOL_CONFIG`](CONFIG_ENV)
//!   from the environment (read once, on first use), then every
//!   [`devpool_configure`] string over it. After that the settings are fixed.
//! - **Streams**: a free names the stream of the block's last use; the block is
//!   reused at once on that stream and on others only after that work is done
//!   (events). A null stream is the legacy default stream. CuPy's functions take
//!   their stream from `param` ([`cupy`] module docs).
//! - **Zero bytes** get a real, unique, aligned pointer (counted as one byte), freed
//!   like any other: callers that key tables by pointer (PyTorch does) never see
//!   two live blocks at one address.
//! - **Out of memory** returns null after the allocator has given its cached memory
//!   back and retried once. The message is in [`devpool_last_error`] and, the first
//!   time, on standard error.
//! - **Bad frees never crash** and change nothing: a null pointer is ignored (like
//!   `free(NULL)`); a double free, a pointer devpool did not hand out, or a block
//!   freed on the wrong device is reported (once per kind on standard error, always
//!   in [`devpool_last_error`] and the `bad_calls` counts of the statistics) and not
//!   freed; a wrong size is reported and the block freed.
//! - **No panic unwinds into the caller**: every entry point catches them and
//!   returns its error value (the library is built with `panic = "unwind"`).
//!
//! ## Example (Rust calling the C ABI on the mock backend)
//!
//! ```
//! use devpool_ffi::*;
//! use std::ffi::CStr;
//! use std::ptr::null_mut;
//! // SAFETY: a NUL-terminated literal.
//! assert_eq!(unsafe { devpool_configure(c"backend=mock;strategy=hybrid".as_ptr()) }, DEVPOOL_OK);
//! let p = devpool_malloc(1 << 20, 0, null_mut());
//! assert!(!p.is_null());
//! devpool_free(p, 1 << 20, 0, null_mut());
//! devpool_free(p, 1 << 20, 0, null_mut()); // double free: reported, ignored
//! let json = devpool_stats_json(0);
//! // SAFETY: a string from devpool_stats_json, read then freed once.
//! let text = unsafe { CStr::from_ptr(json) }.to_str().unwrap().to_owned();
//! unsafe { devpool_string_free(json) };
//! let v: serde_json::Value = serde_json::from_str(&text).unwrap();
//! assert_eq!(v["stats"]["allocations"], 1);
//! assert_eq!(v["bad_calls"]["unknown_pointer"], 1);
//! ```
#![warn(missing_docs)]

mod api;
pub mod config;
mod counters;
pub mod cupy;
mod framework;
mod guard;
#[cfg(feature = "test-hooks")]
pub mod hooks;
mod ops;
mod registry;
mod report;
mod stats_json;
mod table;

pub use api::{
    devpool_configure, devpool_free, devpool_last_error, devpool_malloc, devpool_record_stream,
    devpool_stats_json, devpool_string_free, devpool_trim, devpool_version, CudaStream,
};
pub use config::{Config, ConfigError, LogMode};
pub use counters::Counter;
pub use cupy::{devpool_cupy_free, devpool_cupy_malloc};
pub use devpool::BackendKind;
pub use framework::{
    devpool_block_info, devpool_cuda_device_count, devpool_device_stats,
    devpool_enable_peer_access, devpool_release, devpool_reset_peak_stats, DevpoolDeviceStats,
};
pub use registry::{CONFIG_ENV, MAX_DEVICES};
pub use report::{
    DEVPOOL_ERR_BACKEND, DEVPOOL_ERR_INVALID, DEVPOOL_ERR_NOT_FOUND, DEVPOOL_ERR_PANIC,
    DEVPOOL_ERR_TOO_LATE, DEVPOOL_OK,
};
