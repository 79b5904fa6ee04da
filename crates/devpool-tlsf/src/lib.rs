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
//!   A new block prefers free blocks whose pages are mapped already; the map batch
//!   rounds a run of missing pages up (8 pages by default) where the free room allows.
//! - The page cache: unused mapped memory is bounded by
//!   `floor + fraction × recent peak + (recent peak − allocated)`, enforced when the
//!   pool grows and once per window of operations, unmapping from the highest
//!   addresses down. What a training step frees stays mapped for the next step, so
//!   a repeating workload maps nothing after its first steps; at a new peak only
//!   the floor (32 MiB) and the fraction (0.2%) stay unused. When the policy's own
//!   unmaps keep coming back as maps (a working set wider than the bound), the
//!   bound widens for a while. `trim` unmaps every unused page and gives back
//!   empty ranges but one (address space costs no memory); on a backend
//!   out-of-memory the pool unmaps its unused pages and retries once.
//! - Region mode ([`Mode::Region`]): the same lists over regions taken in chunks of at
//!   least 64 MiB; wholly free chunks go back on trim and when the cache is over its
//!   bound.
//! - Alignment: any power of two up to the page size.
//! - [`TlsfPool::detail`]: free blocks, largest free block, mapped and unused pages,
//!   map and unmap calls, host bookkeeping bytes.
//!
//! On the bundled traces in traces/ (example `trace_frag`), the backend's peak of
//! held bytes over the peak of live bytes is 1.013 (resnet50_train) and 1.006
//! (gpt2_train_varlen) with requests up to 1 MiB served elsewhere at their exact
//! size, against 1.017 and 1.027 for PyTorch's expandable segments.
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
