//! # devpool-cuda
//!
//! The CUDA backend of devpool: the only crate that calls CUDA.
//!
//! - [`CudaBackend`]: device memory (`cuMemAlloc` regions and `cuMemCreate` /
//!   `cuMemMap` pages in `cuMemAddressReserve` ranges), streams and events of one
//!   device, as a [`devpool_core::Backend`]. Every strategy crate runs on it
//!   unchanged.
//! - Baselines, the driver's own allocators as [`devpool_core::Allocator`]s:
//!   [`cuda_malloc`] (one `cuMemAlloc` / `cuMemFree` per block) and
//!   [`CudaMallocAsync`] (`cuMemAllocAsync` / `cuMemFreeAsync` on the default pool).
//! - [`device_info`], [`device_count`], [`driver_version`], [`driver_available`].
//!
//! The driver library is loaded at run time: this crate builds and tests on machines
//! without CUDA, where every entry point returns
//! [`BackendError::Unavailable`](devpool_core::BackendError::Unavailable) instead of
//! panicking.
//!
//! ```
//! use devpool_core::{direct, Allocator};
//! match devpool_cuda::CudaBackend::get(0) {
//!     Ok(gpu) => {
//!         let alloc = direct(gpu);
//!         let block = alloc.alloc(1 << 20).unwrap();
//!         alloc.free(block).unwrap();
//!     }
//!     Err(e) => println!("no CUDA device: {e}"),
//! }
//! ```
#![warn(missing_docs)]

mod backend;
mod driver;
mod info;
mod malloc;
mod malloc_async;
mod peer;
mod timing;
mod vmm;

pub use backend::CudaBackend;
pub use info::{device_count, device_info, driver_available, driver_version, DeviceInfo};
pub use malloc::{cuda_malloc, MallocPool};
pub use malloc_async::CudaMallocAsync;
pub use timing::DriverCallTime;
