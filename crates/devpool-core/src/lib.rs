//! # devpool-core
//!
//! The contract of devpool, with no CUDA in it and no implementation of a device:
//!
//! - [`Allocator`]: what every strategy implements (`Send + Sync`, `&self` methods).
//! - [`Pool`]: a single-stream pool, the part a strategy writes; [`StreamOrdered`]
//!   turns a family of pools into an allocator with stream-ordered reuse.
//! - [`Backend`]: where device memory, streams and events come from (the CUDA
//!   driver in `devpool-cuda`, a CPU stand-in in `devpool-testing`).
//! - Types ([`DevicePtr`], [`Request`], [`Block`]...), [`Error`]s, [`Stats`] and
//!   [`Parts`].
//! - [`direct`]: the yardstick that sends every request to the backend.
//! - [`DeviceBuffer`]: an owning, typed handle to device memory.
//!
//! ```
//! use devpool_core::{direct, Allocator, Request};
//! use devpool_testing::MockBackend;
//! let mock = MockBackend::shared();
//! let alloc = direct(mock.clone());
//! let block = alloc.allocate(Request::new(1 << 20)).unwrap();
//! assert_eq!(alloc.stats().live_bytes.current, 1 << 20);
//! alloc.free(block).unwrap();
//! ```
#![warn(missing_docs)]

mod allocator;
mod backend;
mod buffer;
mod devices;
mod direct;
mod error;
mod events;
mod forward_backend;
mod lock;
mod ordered;
mod parts;
mod reserved;
mod rng;
mod setters;
mod stats;
mod table;
mod types;

pub use allocator::{Allocator, Pool};
pub use backend::{
    driver_region_bytes, Backend, BackendCounterCell, BackendCounters, BackendResult, IntoBackend,
    SMALL_REGION_ROUNDING,
};
pub use buffer::{DeviceBuffer, DeviceCopy};
pub use devices::Devices;
pub use direct::{direct, DirectPool};
pub use error::{BackendError, Error, OomInfo, Result};
pub use events::{events_passed, Passed};
pub use lock::{SpinGuard, SpinLock};
pub use ordered::{StreamOrdered, DEFAULT_MAX_STREAMS};
pub use parts::{ClassStats, Parts, Reuse, RouteStats};
pub use reserved::ReservedRanges;
pub use rng::Rng;
pub use stats::{AtomicGauge, Counters, Gauge, Stats, Tally};
pub use types::{
    align_up, excerpt, human_bytes, route_tag, Block, DeviceId, DevicePtr, EventId, Request,
    StreamId, GIB, HANDLE_ROUTES, MIN_ALIGN, POOL_HANDLE_BITS, POOL_HANDLE_MASK,
};
