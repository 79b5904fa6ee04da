//! # devpool-vm
//!
//! The page layer: one implementation, for every strategy that maps virtual memory,
//! of what lies between a placement (which block goes where) and the backend (which
//! maps physical memory into reserved address ranges).
//!
//! - **Ranges**: address space reserved from the backend ([`PageLayer::reserve`]).
//!   Reserved space costs no memory.
//! - **The page map**: per page, how many live blocks touch it, whether it is
//!   mapped, where its physical chunk starts, and whether it is retiring. A
//!   placement calls [`PageLayer::acquire`] when it hands out a block and
//!   [`PageLayer::release`] when it takes one back; blocks may share pages (packed
//!   neighbours, blocks smaller than a page).
//! - **Mapping runs**: the pages a new block needs are mapped in one backend call
//!   per run of missing pages, the last run rounded up to a batch where the free
//!   room around the block allows, so that the next blocks above it find their
//!   pages mapped.
//! - **Physical chunks**: each call maps one physical allocation per chunk of up to
//!   [`VmConfig::chunk_pages`] pages (`cuMemCreate` costs about the same for 2 MiB
//!   and 64 MiB), cut at multiples of the chunk size so that chunks line up from one
//!   run to the next. A chunk is given back only whole.
//! - **The cache policy** ([`CachePolicy`]): pages that no live block touches stay
//!   mapped up to `floor + fraction × peak + (peak − allocated) + slack`: what was
//!   freed since the recent peak stays for the next step of the same work, the
//!   floor and fraction bound what stays on top of the peak, and the slack widens
//!   the bound while unmapped pages keep coming back (hysteresis). The bound is
//!   enforced when the pool grows and at the end of each window of operations.
//! - **Unmapping in stream order**: a page no live block touches may still be read
//!   or written by work queued before its last block was freed. Pages the policy
//!   gives back first become *retiring*: still mapped and counted as held; one
//!   event is recorded on each stream whose blocks were released into the layer,
//!   and the pages are unmapped once every event has completed. Nothing waits for
//!   the device; the queue is looked at on later operations, and waited on (per
//!   event, not per device) only by [`PageLayer::trim`] and when the backend is out
//!   of memory. Blocks freed on another stream, or used on other streams
//!   (`record_stream`), reach a pool only after those streams' events completed
//!   (see [`StreamOrdered`](devpool_core::StreamOrdered)), so the block's own stream
//!   is the only one left to wait for.
//!
//! ```
//! use devpool_core::{Backend, MockBackend, MockConfig, StreamId};
//! use devpool_vm::{PageLayer, VmConfig};
//! let mock = MockBackend::shared_with(MockConfig::default().manual_events());
//! let mut vm = PageLayer::new(mock.clone(), VmConfig::default().cache(0, 0.0).map_batch_pages(1));
//! let page = vm.page_size();
//! let r = vm.reserve(16 * page as usize, page as usize).unwrap();
//! let (lo, hi) = (vm.base(r), vm.base(r) + 4 * page);
//! let s = StreamId(7);
//! vm.acquire(r, (lo, hi), (lo, vm.base(r) + 16 * page)).unwrap();
//! vm.release(r, (lo, hi), s); // work on stream 7 may still use the pages
//! vm.trim_nowait().unwrap();
//! assert_eq!(vm.detail().retiring_pages, 4, "held until stream 7 passes");
//! assert_eq!(mock.counters().bytes_in_use.current, 4 * page);
//! mock.complete_stream(s);
//! vm.poll_retiring().unwrap();
//! assert_eq!(mock.counters().bytes_in_use.current, 0);
//! ```
#![warn(missing_docs)]

mod bits;
mod config;
mod detail;
mod layer;
mod map;
mod policy;
mod range;
mod retire;
mod uses;

pub use config::VmConfig;
pub use detail::VmDetail;
pub use layer::{PageLayer, RangeId};
pub use policy::CachePolicy;
