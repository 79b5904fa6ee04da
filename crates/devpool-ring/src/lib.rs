//! # devpool-ring
//!
//! A stream-ordered ring buffer of device memory, for streaming work whose blocks are
//! freed in about the order they were made: frames, staging buffers of uploads and
//! downloads, the activations of a pipeline step.
//!
//! - One device range per stream: a virtual range whose pages are mapped as the ring
//!   first needs them (the default), or a region ([`RingMode`]).
//! - Allocation carves at the head; the tail follows, giving back blocks in the order
//!   they were made. A block freed before its elders comes back when they have; the
//!   newest block freed comes back at once (stack order). A block that does not fit
//!   before the end of the room goes round to the room the tail left (never split).
//! - Stream-ordered like every strategy: a block freed on another stream than its own,
//!   or declared used on other streams with `record_stream`, is passed by the tail
//!   only once an event recorded at its free on each of those streams has completed.
//! - When full, the choice is the user's ([`WhenFull`]): grow (more pages, or a second
//!   ring while the first drains), wait for the oldest blocks with a timeout, or fail
//!   with the ring's state in the message.
//! - A live block holding back the tail is passed and left in place when room is short
//!   ([`RingConfig::max_pinned`]), so one long-lived block does not stall the ring.
//! - Steady streaming costs no backend call: the ring stops growing once it holds the
//!   largest span of blocks the work keeps live.
//! - Not for work that frees in random order (training): the ring then holds much more
//!   than the live bytes, and says so in its statistics ([`RingDetail`]).
//!
//! ```
//! use devpool_core::{Allocator, Request, StreamId};
//! use devpool_testing::MockBackend;
//! use devpool_ring::{ring, RingConfig, WhenFull};
//! use std::time::Duration;
//! let cfg = RingConfig::default()
//!     .capacity(64 << 20)
//!     .when_full(WhenFull::Wait(Duration::from_millis(5)));
//! let r = ring(MockBackend::shared(), cfg);
//! let a = r.alloc(40 << 20).unwrap();
//! let e = r.alloc(40 << 20).unwrap_err(); // no room within 64 MiB, even after waiting
//! assert!(e.is_oom() && e.to_string().contains("the ring is full"), "{e}");
//! assert_eq!(r.detail().refused, 2); // refused, and again after the allocator's retry
//! r.free(a).unwrap();
//! let b = r.alloc(40 << 20).unwrap(); // the tail has moved on
//! r.free(b).unwrap();
//! ```
#![warn(missing_docs)]

mod config;
mod events;
mod place;
mod pool;
mod queue;
mod ring;
mod stats;
mod unit;

pub use config::{RingConfig, RingMode, WhenFull, MIB};
pub use place::{Placement, Shape, Slot, State, SEQ_BITS};
pub use pool::{RingPool, MAX_ALIGN};
pub use ring::{ring, Ring};
pub use stats::RingDetail;
