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
//!   per run of missing pages, the last run rounded up to a batch (16 pages, at most
//!   twice what the block needs) where the free room around the block allows, so
//!   that the next blocks above it find their pages mapped. Asked for
//!   ([`VmConfig::burst_ops`]), growth that comes in bursts while the pool frees
//!   little maps further ahead, twice as far each time.
//! - **Physical chunks**: each call maps one physical allocation per chunk
//!   ([`Backend::map_chunks`](devpool_core::Backend::map_chunks)): a run is cut at
//!   the block's ends (the pages it shares with neighbours and those mapped ahead
//!   are chunks of their own), and each piece into chunks of about a sixteenth of it,
//!   at most [`VmConfig::chunk_pages`] pages. Each chunk is one mapping, and the
//!   driver's cost grows with the mappings rather than the bytes, so large blocks
//!   cost few of them; a chunk is given back, or moved, only whole, so finer chunks
//!   hold less memory for more driver time.
//! - **Moving memory**: once the pool holds its limit (the recent peak of allocated
//!   bytes plus the floor, or the recent peak of bytes held, whichever is higher), a
//!   block that needs pages takes the memory of unused chunks elsewhere instead of
//!   new memory: the backend maps the same physical memory at the block's place
//!   ([`Backend::alias`](devpool_core::Backend::alias)), and the old addresses
//!   retire. Memory held does not grow, and the cache is never in the wrong place.
//! - **The cache policy** ([`CachePolicy`]): pages that no live block touches stay
//!   mapped up to `floor + fraction × peak + (peak − allocated)`: what was freed
//!   since the recent peak stays for the next step of the same work, the floor (at
//!   most 1/32 of the peak) and fraction bound what stays on top of the peak. The
//!   bound is enforced at the end of each window of operations, on the free path,
//!   and keeps at least one unused page (a pool of one small block keeps its page
//!   instead of unmapping and mapping it again every window).
//!   Without moving (a backend that cannot alias), it is also enforced when the
//!   pool grows, and a slack widens it while unmapped pages keep coming back
//!   (hysteresis).
//! - **Unmapping in stream order**: a page no live block touches may still be read
//!   or written by work queued before its last block was freed. Pages the policy
//!   gives back first become *retiring*: still mapped and counted as held; one
//!   event is recorded on each stream whose blocks were released into the layer,
//!   and the pages are unmapped once every event has completed. Nothing waits for
//!   the device; the queue is looked at on later frees, and waited on (per event,
//!   not per device) only by [`PageLayer::trim`], when the backend is out of
//!   memory, and when a block lands on an old address of moved memory. Blocks freed
//!   on another stream, or used on other streams (`record_stream`), reach a pool
//!   only after those streams' events completed (see
//!   [`StreamOrdered`](devpool_core::StreamOrdered)), so the block's own stream is
//!   the only one left to wait for.
//! - **Off the allocation path**: handing out a block maps or moves memory only when
//!   it needs pages; giving back, sweeping old addresses and the window's work happen
//!   on frees.
//!
//! ```
//! use devpool_core::{Backend, StreamId};
//! use devpool_testing::{MockBackend, MockConfig};
//! use devpool_vm::{PageLayer, VmConfig};
//! let mock = MockBackend::shared_with(MockConfig::default().manual_events());
//! let mut vm = PageLayer::new(mock.clone(), VmConfig::default().cache(0, 0.0).map_batch_pages(1));
//! let page = vm.page_size();
//! let r = vm.reserve(16 * page as usize, page as usize).unwrap();
//! let (lo, hi) = (vm.base(r), vm.base(r) + 4 * page);
//! let s = devpool_testing::MockBackend::stream(7);
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
mod deferred;
mod detail;
mod layer;
mod map;
mod moves;
mod once;
mod policy;
mod queue;
mod range;
mod retire;
mod summed;
mod uses;

pub use config::{VmConfig, BURST_ON};
pub use detail::VmDetail;
pub use layer::{PageLayer, RangeId};
pub use once::ReserveOnce;
pub use policy::CachePolicy;
