//! [`Ring`]: one [`RingPool`] per stream, as an [`Allocator`].
//!
//! It wraps a [`StreamOrdered<RingPool>`](StreamOrdered), which makes each stream's
//! pool on first use, shares the out-of-memory policy of every strategy (wait for
//! pending frees, synchronize, trim every pool, retry once, report where the memory
//! is) and sums the statistics. Frees do not go through its queue of event-guarded
//! frees, though: the ring keeps the events of a block freed on other streams in the
//! block's own place in its queue, so the tail passes exactly the blocks whose events
//! completed, in order, and a block waiting for another stream never holds back the
//! frees of unrelated streams. `record_stream` is kept by the ring for the same
//! reason.

use crate::config::RingConfig;
use crate::pool::RingPool;
use crate::stats::RingDetail;
use devpool_core::{
    Allocator, Backend, Block, DeviceId, Error, IntoBackend, Result, StreamId, StreamOrdered,
};
use std::sync::Arc;

/// A stream-ordered ring buffer allocator: a ring per stream. Made by [`ring`].
///
/// # The stream rule
///
/// A block freed on its own stream comes back to that stream's ring when the tail
/// reaches it. A block freed on another stream, or declared used on other streams
/// with [`record_stream`](Allocator::record_stream), comes back only once an event
/// recorded on each of those streams at the free has completed: the ring never hands
/// out bytes the device may still touch.
pub struct Ring {
    inner: StreamOrdered<RingPool>,
    cfg: RingConfig,
    device: DeviceId,
}

/// A ring buffer allocator over `backend`.
///
/// ```
/// use devpool_core::{Allocator, Request};
/// use devpool_testing::MockBackend;
/// use devpool_ring::{ring, RingConfig};
/// let r = ring(MockBackend::shared(), RingConfig::default());
/// let mut frames = std::collections::VecDeque::new();
/// for _ in 0..100 {
///     frames.push_back(r.alloc(3 << 20).unwrap()); // a frame in
///     if frames.len() > 8 {
///         r.free(frames.pop_front().unwrap()).unwrap(); // the oldest out
///     }
/// }
/// let s = r.detail();
/// assert_eq!(s.live_blocks, 8);
/// assert!(s.held_bytes <= 10 * (3 << 20)); // nine frames at most, and a page
/// ```
pub fn ring(backend: impl IntoBackend, cfg: RingConfig) -> Ring {
    let backend: Arc<dyn Backend> = backend.into_backend();
    let b = backend.clone();
    let c = cfg.clone();
    let device = backend.device();
    Ring {
        device,
        inner: StreamOrdered::new("ring", backend, move |s| {
            RingPool::for_stream(b.clone(), c.clone(), s)
        }),
        cfg,
    }
}

impl Ring {
    /// The ring's own figures, summed over streams.
    pub fn detail(&self) -> RingDetail {
        self.inner
            .fold(|s: &mut RingDetail, p| s.merge(&p.detail()))
    }

    /// The pool of `stream`, if it has one.
    pub fn pool(&self, stream: StreamId) -> Option<&RingPool> {
        self.inner.pool(stream)
    }

    /// The settings in force.
    pub fn config(&self) -> &RingConfig {
        &self.cfg
    }
}

impl Allocator for Ring {
    devpool_core::forward_allocator!(|r| &r.inner; name, backend, allocate, stats, trim);

    fn device(&self) -> DeviceId {
        self.device
    }

    #[inline]
    fn deallocate(&self, block: Block, stream: StreamId) -> Result<()> {
        // The pool checks the device, and everything else.
        match self.inner.pool(block.stream) {
            Some(pool) => pool.free_on(&block, stream),
            None => Err(Error::NotOwned { ptr: block.ptr }),
        }
    }

    fn record_stream(&self, block: &Block, stream: StreamId) -> Result<()> {
        block.check_device(self.device)?;
        match self.inner.pool(block.stream) {
            Some(pool) => pool.record_stream(block, stream),
            None => Err(Error::NotOwned { ptr: block.ptr }),
        }
    }
}
