//! # devpool-hybrid
//!
//! A router that sends each request to the strategy that suits its size:
//!
//! | route | sizes | strategy |
//! |---|---|---|
//! | small | up to `small_max`: 64 KiB in the `training`, `coarse` and `inference` presets, 1 MiB in `with_buddy` | [`devpool_slab`]: size classes, O(1), per-thread caches; its slabs are blocks of the large route (`slabs_from_large`), so both share pages |
//! | large | above `small_max` | a virtual-memory strategy: TLSF best fit ([`devpool_tlsf`]) or buddy ([`devpool_buddy`]), pages mapped only for bytes in use (in `coarse`, each block's pages one mapping, and unused memory never moves: fewer driver calls, more memory) |
//! | huge | from `huge_min`: 1 GiB in the `inference` preset, off (never) in `training`, `coarse` and `with_buddy` | one backend region per block ([`devpool_core::DirectPool`]) |
//!
//! Routing is one or two compares on the request size; a block remembers its route
//! in the top two bits of its handle (the router's bits of the core contract,
//! [`devpool_core::POOL_HANDLE_BITS`]), so a free goes straight back to the strategy
//! that made it.
//!
//! ```
//! use devpool_core::Allocator;
//! use devpool_testing::MockBackend;
//! use devpool_hybrid::{hybrid, HybridConfig};
//! let alloc = hybrid(MockBackend::shared(), HybridConfig::training());
//! let small = alloc.alloc(4096).unwrap();
//! let large = alloc.alloc(100 << 20).unwrap();
//! alloc.free(small).unwrap();
//! alloc.free(large).unwrap();
//! ```
#![warn(missing_docs)]

mod config;
mod pool;
mod slabs;

pub use config::{HybridConfig, LargeStrategy};
pub use pool::{hybrid, HybridPool, Route};
