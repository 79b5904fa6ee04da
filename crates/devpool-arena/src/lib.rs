//! # devpool-arena
//!
//! A linear (bump) allocator of device memory for per-frame or per-step scratch:
//! allocation moves a pointer, and [`reset`](Arena::reset) hands every byte back at
//! once, in O(1) plus O(chunks).
//!
//! - Memory comes from the backend in chunks ([`Backend::alloc_region`]): 64 MiB by
//!   default, each new one twice the last up to a cap, and one of its own for a
//!   request too large for that ([`ArenaConfig`]). A reset keeps the largest chunks
//!   for the next frame, so a steady frame costs no backend call at all.
//! - Blocks are aligned to 256 bytes; larger alignments (up to 1 GiB) are honoured.
//! - Allocation is one compare-and-swap on the current chunk's cursor plus a few
//!   counters, lock-free from any number of threads; a short lock is taken only when
//!   a chunk is full.
//! - A free is checked in O(1) against a host-side record of the block (foreign
//!   pointer: [`Error::NotOwned`], second free: [`Error::DoubleFree`]) and counted
//!   at once in the statistics, but its memory is reused only when the arena begins a
//!   new epoch: at a reset, or by itself once every block has been freed (a rewind).
//!   The one exception is the block bumped last, whose room comes back at once, so
//!   temporaries freed in stack order are reused within the frame. Blocks of an epoch
//!   that ended, or already freed, are rejected, never confused with new ones.
//! - [`trim`](devpool_core::Allocator::trim) gives back the chunks not used in the
//!   current epoch, and every chunk once nothing is live.
//! - Metadata stays on the host (24 bytes a block, reused from frame to frame); the
//!   arena never touches the memory it manages.
//! - Limits: one epoch hands out at most 4 Mi blocks (then [`Error::Limit`] until a
//!   reset), a pool holds at most 255 chunks, and alignments go up to 1 GiB.
//!
//! ```
//! use devpool_arena::{arena, ArenaConfig};
//! use devpool_core::{Allocator, Request};
//! use devpool_testing::MockBackend;
//! let a = arena(MockBackend::shared(), ArenaConfig::default());
//! let x = a.alloc(1000).unwrap();
//! let y = a.allocate(Request::new(5000).with_align(4096)).unwrap();
//! assert!(y.ptr.is_aligned(4096));
//! a.free(x).unwrap(); // counted now, reused at the next reset
//! assert_eq!(a.stats().live_bytes.current, 5000);
//! a.reset().unwrap(); // the step is over
//! assert_eq!(a.stats().live_blocks.current, 0);
//! assert!(a.free(y).is_err()); // y belonged to the last step
//! ```
//!
//! [`Backend::alloc_region`]: devpool_core::Backend::alloc_region
//! [`Error::NotOwned`]: devpool_core::Error::NotOwned
//! [`Error::DoubleFree`]: devpool_core::Error::DoubleFree
//! [`Error::Limit`]: devpool_core::Error::Limit
#![warn(missing_docs)]

mod arena;
mod bump;
mod chunks;
mod config;
mod fence;
mod pool;
mod records;
mod stats;
mod word;

pub use arena::{arena, Arena};
pub use config::{ArenaConfig, MIB};
pub use pool::{ArenaPool, MAX_ALIGN};
pub use stats::ArenaDetail;
