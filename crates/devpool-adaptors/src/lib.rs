//! # devpool-adaptors
//!
//! Wrappers around any [`Allocator`](devpool_core::Allocator). Each adaptor is generic
//! over the allocator it wraps, is itself an `Allocator`, and forwards what it does
//! not change (`backend`, `record_stream`, `trim`, `stats`, `parts`...) with
//! [`devpool_core::forward_allocator!`], so adaptors stack in any order:
//!
//! - [`Statistics`]: its own exact counters (current, peak and total of live bytes
//!   and blocks, allocations, frees, failures) and a histogram of request sizes.
//! - [`Limit`]: a cap on the granted bytes of live blocks.
//! - [`Logging`]: every allocation and free as a row of RAPIDS RMM's logging CSV,
//!   the format of the bundled traces in `traces/`, so a logged run can be replayed.
//! - [`Tracking`]: every live block, with an optional backtrace, and a leak report.
//! - [`Guarded`]: guard bytes around every block, checked at free.
//! - [`OomRetry`]: on out of memory, a user callback, a trim and another try.
//!
//! Names stack too: the allocator below is called
//! `stats(limit(log(tracking(direct))))`.
//!
//! ```
//! use devpool_adaptors::{Limit, Logging, Statistics, Tracking};
//! use devpool_core::{direct, Allocator};
//! use devpool_testing::MockBackend;
//!
//! let alloc = Statistics::new(Limit::new(
//!     Logging::new(Tracking::new(direct(MockBackend::shared())), Vec::new()),
//!     1 << 30,
//! ));
//! let b = alloc.alloc(1000).unwrap();
//! assert_eq!(alloc.snapshot().requested_bytes.current, 1000);
//! assert_eq!(alloc.inner().inner().inner().live_blocks().len(), 1);
//! alloc.free(b).unwrap();
//! assert_eq!(alloc.name(), "stats(limit(log(tracking(direct))))");
//! ```
//!
//! ## Blocks outlive nothing
//!
//! A [`Block`](devpool_core::Block) is plain data, but freeing one needs the
//! allocator, and Rust will not let an allocator be dropped while it is borrowed.
//! A [`DeviceBuffer`](devpool_core::DeviceBuffer) borrows its allocator, so this does
//! not compile:
//!
//! ```compile_fail
//! use devpool_core::{direct, DeviceBuffer, StreamId};
//! use devpool_testing::MockBackend;
//! let alloc = direct(MockBackend::shared());
//! let buf = DeviceBuffer::<u8>::new(&alloc, 16, StreamId::DEFAULT).unwrap();
//! drop(alloc); // error: `alloc` is still borrowed by `buf`
//! drop(buf);
//! ```
//!
//! Shared ownership goes through [`Arc`](std::sync::Arc): the allocator lives as long
//! as its last handle. When it is finally dropped it gives all of its memory back, and
//! a stale `Block` shown to another allocator is refused as not owned.
#![warn(missing_docs)]

mod guarded;
mod leak;
mod limit;
mod logging;
mod oom_retry;
mod statistics;
mod tracking;

pub use guarded::{Guarded, DEFAULT_GUARD, GUARD_PATTERN};
pub use leak::{Leak, LeakReport};
pub use limit::Limit;
pub use logging::Logging;
pub use oom_retry::{OomCallback, OomRetry, DEFAULT_MAX_ATTEMPTS};
pub use statistics::{size_bucket, Counter, Statistics, StatisticsSnapshot, HISTOGRAM_BUCKETS};
pub use tracking::{LeakCallback, Tracking};
