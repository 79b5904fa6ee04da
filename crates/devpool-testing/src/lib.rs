//! # devpool-testing
//!
//! What devpool tests with, apart from the contract in `devpool-core`:
//!
//! - [`MockBackend`]: a CPU stand-in for one GPU's memory, streams and events, with
//!   fault injection, manual events and optional host memory behind the addresses.
//!   The command-line tool and the C ABI use it as their `mock` backend.
//! - `conformance` (feature `suite`): the cases every strategy runs, one test each
//!   from `conformance_tests!`, and a proptest model test.
//! - [`gpu_checks`]: data checks of any allocator on a real device (or a host-backed
//!   mock): overlapping blocks and stream-order violations show up as wrong bytes.
//! - [`faults`]: the checks of a pool under fault injection: patterns that read
//!   back, failures that change no block, reserved bytes that match the backend's.
//! - [`fixtures`]: small allocators for tests: a caching pool that reuses freed
//!   blocks at once, per stream or (deliberately wrong) shared by every stream.
//!
//! ```
//! use devpool_core::{direct, Allocator, Backend};
//! use devpool_testing::MockBackend;
//! let mock = MockBackend::shared();
//! let alloc = direct(mock.clone());
//! let b = alloc.alloc(1 << 20).unwrap();
//! // Held as the driver would hold it: regions are rounded to its granularity.
//! assert!(mock.counters().bytes_in_use.current >= 1 << 20);
//! alloc.free(b).unwrap();
//! ```
#![warn(missing_docs)]

#[cfg(feature = "suite")]
pub mod conformance;
pub mod faults;
pub mod fixtures;
pub mod gpu_checks;
mod mock;

pub use mock::{EventPolicy, FaultOn, MockBackend, MockConfig};

/// What `conformance_tests!` expands to needs, by a path of this crate.
#[doc(hidden)]
pub mod __private {
    pub use devpool_core::Allocator;
}
