//! # devpool-buddy
//!
//! A buddy allocator for large device blocks.
//!
//! Blocks are powers of two, from [`BuddyConfig::min_block`] up to
//! `2^`[`BuddyConfig::max_order`]. Each order has a free list; an allocation splits a
//! free block that fits, and a free merges the block with its buddy for as long as
//! the buddy is free too. A node per block, made in pairs, lets each step find the
//! buddy and the parent in O(1), so every operation is O(orders). All metadata lives
//! on the host.
//!
//! - **Trimmed tails** ([`BuddyConfig::trim_tail`]): a block hands out its size rounded
//!   up to a sixteenth of its power of two (a page in virtual mode), and the rest of
//!   the power of two goes back to the free lists as smaller blocks.
//! - **Quick lists** ([`BuddyConfig::quick_depth`]): the last few whole blocks freed
//!   per order are kept unmerged, so that work which frees and allocates the same
//!   sizes costs neither splits nor merges.
//! - **Growth**: when no free block fits, a new span is taken from the backend, at
//!   least as large as the request rounded up to a power of two; `trim` gives back
//!   spans that are wholly free.
//!
//! Two modes ([`BuddyMode`]):
//!
//! - **Region**: each span is one contiguous backend region. New blocks go to the
//!   lowest free address that fits (address-ordered first fit), which keeps large
//!   free blocks whole.
//! - **Virtual**: each span is a large reserved address range, and only the bytes a
//!   block needs are backed by mapped pages (its size rounded up to a page; blocks
//!   smaller than a page share pages). Rounding then costs address space, not memory.
//!   The pages belong to the page layer ([`devpool_vm::PageLayer`]), shared with
//!   TLSF: freed pages stay mapped for the next block under the same cache bound,
//!   pages are mapped in one call per contiguous run, and unused pages are unmapped
//!   in stream order. New blocks go where pages are mapped.
//!
//! [`buddy`] builds the [`Allocator`](devpool_core::Allocator): one [`BuddyPool`] per
//! stream, with stream-ordered reuse. [`BuddyPool::detail`] says what a pool holds,
//! order by order.
//!
//! ```
//! use devpool_buddy::{buddy, BuddyConfig};
//! use devpool_core::{Allocator, Backend};
//! use devpool_testing::MockBackend;
//! let mock = MockBackend::shared();
//! let alloc = buddy(mock.clone(), BuddyConfig::default());
//! assert_eq!(alloc.name(), "buddy-virtual");
//! let b = alloc.alloc(100 << 20).unwrap();
//! assert_eq!(b.size, 100 << 20, "backed to the page, not to 128 MiB");
//! assert_eq!(mock.counters().bytes_in_use.current, 100 << 20);
//! alloc.free(b).unwrap();
//! alloc.trim().unwrap();
//! assert_eq!(mock.counters().bytes_in_use.current, 0);
//! ```
#![warn(missing_docs)]

mod config;
mod place;
mod pool;
mod rounding;
mod span;
mod stats;
mod tree;
mod vmem;

pub use config::{BuddyConfig, BuddyMode};
pub use devpool_vm::{ReserveOnce, VmConfig, VmDetail};
pub use pool::BuddyPool;
pub use stats::{BuddyDetail, OrderStats, SpanDetail};

use devpool_core::{IntoBackend, StreamOrdered};

/// The buddy allocator over `backend`: one [`BuddyPool`] per stream. Its name is
/// `"buddy-region"` or `"buddy-virtual"`, by the mode in use.
///
/// ```
/// use devpool_buddy::{buddy, BuddyConfig};
/// use devpool_core::Allocator;
/// use devpool_testing::{MockBackend, MockConfig};
/// let mock = MockBackend::shared_with(MockConfig::default().without_virtual());
/// let alloc = buddy(mock, BuddyConfig::default());
/// assert_eq!(alloc.name(), "buddy-region");
/// let b = alloc.alloc(5000).unwrap();
/// assert_eq!(b.size, 5120, "the rest of the 8 KiB block serves others");
/// alloc.free(b).unwrap();
/// ```
pub fn buddy(backend: impl IntoBackend, cfg: BuddyConfig) -> StreamOrdered<BuddyPool> {
    let backend = backend.into_backend();
    let virt = config::Resolved::new(&cfg, backend.supports_virtual(), backend.granularity()).virt;
    let name = if virt {
        "buddy-virtual"
    } else {
        "buddy-region"
    };
    let b = backend.clone();
    let once = ReserveOnce::default();
    StreamOrdered::new(name, backend, move |_| {
        let mut c = cfg.clone();
        c.pages = once.settings(&cfg.pages);
        BuddyPool::new(b.clone(), c)
    })
}
