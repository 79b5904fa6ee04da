//! # devpool-slab
//!
//! The strategy for many small blocks: size classes, slabs with slot bitmaps, and
//! per-thread caches, so the common allocation and free touch no shared lock.
//!
//! - [`slab`]: the slab allocator (name "slab"), classes from a [`SlabConfig`]; by
//!   default 4 classes per power of two from 256 B to 1 MiB.
//! - [`fixed`]: the fixed-size pool (name "fixed"), one class of one block size.
//! - [`SlabPool`]: the single-stream pool behind both, with per-class statistics
//!   ([`SlabPool::detail`]) and its host metadata size
//!   ([`SlabPool::metadata_bytes`]).
//!
//! Requests larger than the largest class fail with
//! [`Error::TooLarge`](devpool_core::Error::TooLarge), so a router can send them to
//! another strategy.
//!
//! ```
//! use devpool_core::{Allocator, Request};
//! use devpool_testing::MockBackend;
//! use devpool_slab::{slab, SlabConfig};
//! let alloc = slab(MockBackend::shared(), SlabConfig::default());
//! let b = alloc.alloc(3000).unwrap();
//! assert_eq!(b.size, 3072); // the 3 KiB class
//! let a = alloc.allocate(Request::new(3000).with_align(4096)).unwrap();
//! assert!(a.ptr.is_aligned(4096)); // a class whose slots are 4 KiB aligned
//! assert!(alloc.alloc(2 << 20).is_err()); // above the largest class
//! alloc.free(a).unwrap();
//! alloc.free(b).unwrap();
//! ```
//!
//! ## Design
//!
//! - **Classes** are computed in a few bit operations (TLSF-style buckets, or a
//!   small table for a custom list), and for requests up to 64 KiB read from one
//!   byte table; see [`SlabConfig`].
//! - **Slabs** are backend regions, each serving one class; a two-level bitmap
//!   finds the lowest free slot in O(1). A block's handle names its thread cache,
//!   its slab's place in that cache, the slot and the slab's generation, so a free
//!   finds its slab with no lookup and rejects, changing nothing, a block it never
//!   gave out or one already free.
//! - **Thread caches**: each thread allocates from slabs its own cache holds. A
//!   cache's lock is taken with one atomic swap and given back with a plain store;
//!   other threads take it only to free a block of one of its slabs, or for
//!   statistics and trims. See [`SlabPool`] for the empty-slab policy.
//! - **The fast paths call nothing**: an allocation served by the thread's cache
//!   and a free that leaves no extra empty slab run without a function call; all
//!   else (a busy lock, a new slab, an aligned request, a bad block) takes a slow
//!   path out of line.
//! - **Streams**: [`slab`] and [`fixed`] wrap the pools in
//!   [`StreamOrdered`], which gives each stream its
//!   own pool, so a slot freed on one stream reaches another only through the
//!   backend, and a cross-stream free waits for its event before its slot is free.
//!
//! ## Host metadata
//!
//! Each slab costs about 100 B of host memory (its record and its bitmap's
//! allocation) plus one bit per slot and one bit per 64 slots. With 2 MiB slabs
//! that is under 1 B per block for classes up to 8 KiB (0.1 B for 256 B blocks)
//! and under 16 B per block for the 1 MiB class (8 slots per slab). A pool also
//! has a fixed part of about 4 KiB (its 32 thread caches) and about 50 B per class
//! in each thread cache in use (2 KiB for the 44 default classes).
//! [`SlabPool::metadata_bytes`] gives the exact figure.
#![warn(missing_docs)]

mod bitmap;
mod classes;
mod config;
mod depot;
mod handle;
mod heap;
mod isolated;
mod pool;
mod slab;
mod thread;

pub use config::{SlabConfig, MAX_CLASS_BYTES, MAX_SLAB_BYTES};
pub use devpool_core::ClassStats;
pub use pool::{SlabPool, THREAD_CACHES};

use devpool_core::{Backend, IntoBackend, StreamOrdered};
use std::sync::Arc;

/// The smallest slot, and the alignment of every slot.
pub const MIN_SLOT: usize = devpool_core::MIN_ALIGN;

fn build(name: &str, backend: Arc<dyn Backend>, cfg: SlabConfig) -> StreamOrdered<SlabPool> {
    let classes = Arc::new(crossbeam_utils::CachePadded::new(classes::Classes::new(
        &cfg,
        backend.granularity(),
    )));
    let b = backend.clone();
    StreamOrdered::new(name, backend, move |_| {
        SlabPool::with_classes(b.clone(), classes.clone())
    })
}

/// The slab allocator over `backend` (an `Arc` of any backend): one [`SlabPool`] per
/// stream, classes from `cfg`.
///
/// ```
/// use devpool_core::Allocator;
/// use devpool_testing::MockBackend;
/// use devpool_slab::{slab, SlabConfig};
/// let alloc = slab(MockBackend::shared(), SlabConfig::geometric(8, 16 << 20));
/// let b = alloc.alloc(9 << 20).unwrap();
/// assert!(b.size >= 9 << 20 && b.size <= (9 << 20) + (9 << 20) / 8);
/// alloc.free(b).unwrap();
/// assert_eq!(alloc.name(), "slab");
/// ```
pub fn slab(backend: impl IntoBackend, cfg: SlabConfig) -> StreamOrdered<SlabPool> {
    build("slab", backend.into_backend(), cfg)
}

/// The fixed-size pool over `backend`: every request up to `block_size` bytes gets
/// one block of `block_size` (rounded up to 256 B); larger ones are refused.
///
/// ```
/// use devpool_core::Allocator;
/// use devpool_testing::MockBackend;
/// let alloc = devpool_slab::fixed(MockBackend::shared(), 4096);
/// let b = alloc.alloc(100).unwrap();
/// assert_eq!(b.size, 4096);
/// assert!(alloc.alloc(4097).is_err());
/// alloc.free(b).unwrap();
/// assert_eq!(alloc.name(), "fixed");
/// ```
pub fn fixed(backend: impl IntoBackend, block_size: usize) -> StreamOrdered<SlabPool> {
    build(
        "fixed",
        backend.into_backend(),
        SlabConfig::fixed(block_size),
    )
}
