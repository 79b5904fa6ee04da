//! # devpool
//!
//! One crate that brings every devpool strategy together, and builds any of them by
//! name: what the command-line tool and the C ABI use.
//!
//! ```
//! use devpool::{build, Allocator, MockBackend, STRATEGIES};
//! let mock = MockBackend::shared();
//! for s in STRATEGIES {
//!     let alloc = build(s.name, mock.clone()).unwrap();
//!     let b = alloc.alloc(4096).unwrap();
//!     alloc.free(b).unwrap();
//! }
//! ```
#![warn(missing_docs)]

pub use devpool_arena as arena;
pub use devpool_buddy as buddy;
pub use devpool_core as core;
pub use devpool_core::{
    direct, Allocator, Backend, Block, DeviceBuffer, DeviceId, DevicePtr, Error, MockBackend,
    MockConfig, Request, Result, Stats, StreamId,
};
pub use devpool_hybrid as hybrid;
pub use devpool_ring as ring;
pub use devpool_slab as slab;
pub use devpool_tlsf as tlsf;

use std::sync::Arc;

/// A strategy that [`build`] knows.
#[derive(Clone, Copy, Debug)]
pub struct Strategy {
    /// Its name.
    pub name: &'static str,
    /// What it is, in a line.
    pub about: &'static str,
}

/// Every strategy [`build`] knows, in the order tables show them.
pub const STRATEGIES: &[Strategy] = &[
    Strategy {
        name: "direct",
        about: "every request straight to the backend (what cudaMalloc does): the yardstick",
    },
    Strategy {
        name: "slab",
        about: "size classes (4 per power of two) up to 4 GiB, one class per slab",
    },
    Strategy {
        name: "buddy-region",
        about: "power-of-two buddy blocks in contiguous regions",
    },
    Strategy {
        name: "buddy-virtual",
        about: "buddy over a virtual range, pages mapped only for bytes in use",
    },
    Strategy {
        name: "tlsf-region",
        about: "TLSF best fit in contiguous regions",
    },
    Strategy {
        name: "tlsf-virtual",
        about: "TLSF best fit packed in a virtual range, pages mapped on demand",
    },
    Strategy {
        name: "arena",
        about: "linear bump arena: frees reuse memory only once everything is freed",
    },
    Strategy {
        name: "ring",
        about: "ring buffer for streaming work: frees in about allocation order, virtual pages mapped as it grows",
    },
    Strategy {
        name: "hybrid",
        about: "slab up to 64 KiB, TLSF over virtual memory above (training preset)",
    },
    Strategy {
        name: "hybrid-inference",
        about: "hybrid, with blocks of 1 GiB and more in their own regions",
    },
    Strategy {
        name: "hybrid-buddy",
        about: "slab up to 1 MiB, buddy over virtual memory above",
    },
];

/// Build the strategy called `name` over `backend`.
pub fn build(name: &str, backend: Arc<dyn Backend>) -> Result<Box<dyn Allocator>> {
    use devpool_buddy::BuddyConfig;
    use devpool_hybrid::HybridConfig;
    use devpool_tlsf::{Mode, TlsfConfig};
    Ok(match name {
        "direct" => Box::new(direct(backend)),
        "slab" => Box::new(devpool_slab::slab(
            backend,
            devpool_slab::SlabConfig::geometric(4, 1 << 32),
        )),
        "buddy-region" => Box::new(devpool_buddy::buddy(backend, BuddyConfig::region())),
        "buddy-virtual" => Box::new(devpool_buddy::buddy(backend, BuddyConfig::virtual_ranges())),
        "tlsf-region" => Box::new(devpool_tlsf::tlsf(
            backend,
            TlsfConfig::default().mode(Mode::Region),
        )),
        "tlsf-virtual" => Box::new(devpool_tlsf::tlsf(
            backend,
            TlsfConfig::default().mode(Mode::Virtual),
        )),
        "arena" => Box::new(devpool_arena::arena(
            backend,
            devpool_arena::ArenaConfig::default(),
        )),
        "ring" => Box::new(devpool_ring::ring(
            backend,
            devpool_ring::RingConfig::default(),
        )),
        "hybrid" => Box::new(devpool_hybrid::hybrid(backend, HybridConfig::training())),
        "hybrid-inference" => Box::new(devpool_hybrid::hybrid(backend, HybridConfig::inference())),
        "hybrid-buddy" => Box::new(devpool_hybrid::hybrid(backend, HybridConfig::with_buddy())),
        _ => {
            return Err(Error::Unsupported(
                "unknown strategy name (see devpool::STRATEGIES)",
            ))
        }
    })
}
