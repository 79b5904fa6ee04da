//! # devpool-tlsf
//!
//! A TLSF (two-level segregated fit) allocator for large device blocks, with all of
//! its bookkeeping on the host.
//!
//! - [`TlsfPool`]: a single-stream [`Pool`](devpool_core::Pool); [`tlsf`] turns a
//!   family of them into an [`Allocator`](devpool_core::Allocator) with
//!   stream-ordered reuse.
//! - Free blocks sit in segregated lists, one per size class (16 classes per power of
//!   two), found through two levels of bitmaps: allocation and free are O(1). Blocks
//!   are split on allocation (sizes rounded to a 512-byte granule) and merged with
//!   both address neighbours on free.
//! - Virtual mode ([`Mode::Virtual`]): one large reserved address range, blocks packed
//!   contiguously so neighbours share pages, physical pages mapped on demand (one call
//!   per run of missing pages) and kept mapped as a bounded cache when no live block
//!   touches them (see the policy in [`TlsfConfig`]). Memory held tracks the live
//!   bytes closely, with no power-of-two rounding and no per-block page tail.
//! - Region mode ([`Mode::Region`]): the same lists over regions taken in chunks of at
//!   least 64 MiB; wholly free chunks go back on trim.
//! - Alignment: any power of two up to the page size.
//! - [`TlsfPool::detail`]: free blocks, largest free block, mapped and unused pages,
//!   map and unmap calls.
//!
//! ```
//! use devpool_core::{Allocator, Backend, MockBackend, Request};
//! use devpool_tlsf::{tlsf, TlsfConfig};
//! let mock = MockBackend::shared();
//! let alloc = tlsf(mock.clone(), TlsfConfig::default());
//! let a = alloc.alloc(3 << 20).unwrap();
//! let b = alloc.allocate(Request::new(5 << 20).with_align(1 << 20)).unwrap();
//! assert!(b.ptr.is_aligned(1 << 20));
//! alloc.free(a).unwrap();
//! alloc.free(b).unwrap();
//! alloc.trim().unwrap();
//! assert_eq!(mock.counters().bytes_in_use.current, 0);
//! ```
#![warn(missing_docs)]

mod cache;
mod config;
mod detail;
mod index;
mod pages;
mod pool;
mod span;
mod vm;

pub use config::{Mode, TlsfConfig};
pub use detail::TlsfDetail;
pub use pool::{tlsf, TlsfPool};
