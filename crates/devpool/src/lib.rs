//! # devpool
//!
//! One crate that brings every devpool strategy together: [`StrategySpec`] is a
//! strategy and its settings, parsed from and printed as the names of one table
//! ([`STRATEGIES`]), and built by one function ([`StrategySpec::build`]). The
//! command-line tool, the C ABI and through it the Python package all go through it.
//!
//! ```
//! use devpool::{Allocator, MockBackend, StrategySpec};
//! let mock = MockBackend::shared();
//! for spec in StrategySpec::listed() {
//!     let alloc = spec.build(mock.clone());
//!     let b = alloc.alloc(4096).unwrap();
//!     alloc.free(b).unwrap();
//! }
//! ```
#![warn(missing_docs)]

pub use devpool_arena as arena;
pub use devpool_buddy as buddy;
pub use devpool_core as core;
pub use devpool_core::{
    direct, Allocator, Backend, Block, DeviceBuffer, DeviceId, DevicePtr, Error, Request, Result,
    Stats, StreamId,
};
pub use devpool_hybrid as hybrid;
pub use devpool_ring as ring;
pub use devpool_slab as slab;
pub use devpool_testing as testing;
pub use devpool_testing::{MockBackend, MockConfig};
pub use devpool_tlsf as tlsf;

mod backend_kind;
mod spec;

pub use backend_kind::{BackendKind, UnknownBackend};
pub use spec::{Strategy, StrategySpec, UnknownStrategy, FIXED_BLOCK_SIZE, STRATEGIES};
