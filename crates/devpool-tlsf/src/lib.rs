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
//! - Virtual mode ([`TlsfMode::Virtual`]): one large reserved address range, blocks packed
//!   contiguously so neighbours share pages. The pages themselves belong to the page
//!   layer ([`devpool_vm::PageLayer`]), shared with the buddy strategy: it maps what
//!   a new block is missing (one call per run, the last run rounded up to a batch of
//!   8 pages where the free room allows), keeps pages no live block touches mapped
//!   as a bounded cache, and unmaps in stream order (see [`VmConfig`]). Memory held
//!   tracks the live bytes closely, with no power-of-two rounding and no per-block
//!   page tail. A new block prefers free blocks whose pages are mapped already.
//! - The cache bound: `floor + fraction × recent peak + (recent peak − allocated)`,
//!   enforced when the pool grows and once per window of operations
//!   ([`devpool_vm::CachePolicy`]). What a training step frees stays mapped for the
//!   next step, so a repeating workload maps nothing after its first steps; at a new
//!   peak only the floor (32 MiB) and the fraction (0.2%) stay unused. `trim` gives
//!   back every unused page and empty ranges but one (address space costs no
//!   memory); on a backend out-of-memory the pool gives back its unused pages and
//!   retries once.
//! - Region mode ([`TlsfMode::Region`]): the same lists over regions taken in chunks of at
//!   least 64 MiB; wholly free regions go back on trim and when the memory held
//!   without a live block is over the same bound.
//! - Alignment: any power of two up to the page size.
//! - [`TlsfPool::detail`]: free blocks, largest free block, the page layer's pages
//!   and calls, host bookkeeping bytes.
//!
//! On the bundled training traces in traces/, `tlsf-virtual` holds 1.008
//! (resnet50_train) and 1.003 (gpt2_train_varlen) times the peak of live bytes,
//! against 1.017 and 1.027 for PyTorch's expandable segments (`devpool compare`;
//! docs/BENCHMARKS.md).
//!
//! ```
//! use devpool_core::{Allocator, Backend, Request};
//! use devpool_testing::MockBackend;
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
mod memo;
mod parked;
mod pool;
mod span;
mod vm;

pub use config::{TlsfConfig, TlsfMode};
pub use detail::TlsfDetail;
pub use devpool_vm::{ReserveOnce, VmConfig, VmDetail, BURST_ON};
pub use pool::{tlsf, TlsfPool};
