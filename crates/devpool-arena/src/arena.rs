//! [`Arena`]: one [`ArenaPool`] per stream, as an [`Allocator`].
//!
//! It wraps a [`StreamOrdered<ArenaPool>`](StreamOrdered), which makes each stream's
//! pool on first use, shares the out-of-memory policy of every strategy (trim all
//! pools, retry once, report where the memory is) and sums the statistics. Frees do
//! not go through its queue of event-guarded frees, though: an arena reuses memory
//! only when it begins a new epoch, so a free on another stream (or of a block used on
//! other streams, see [`record_stream`](Allocator::record_stream)) is done at once,
//! and it is the pool's next rewind that waits for those streams (a fence). A free
//! that waited in a queue could also outlive a reset of its pool and then fail.

use crate::config::ArenaConfig;
use crate::pool::ArenaPool;
use crate::stats::ArenaDetail;
use devpool_core::{
    Allocator, Backend, Block, Error, Pool, Result, Reuse, StreamId, StreamOrdered,
};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Streams a block was declared used on: (owner stream, other streams).
type Recorded = HashMap<(u64, u64), (StreamId, Vec<StreamId>)>;

/// A linear arena allocator: a bump pointer per stream, everything handed back at once
/// by [`reset`](Arena::reset). Made by [`arena`].
///
/// # The stream rule
///
/// Each stream has its own arena. [`reset`](Arena::reset) is the caller's promise
/// that the device work of the frame has completed, or that the next frame's work runs
/// on the same stream, queued behind it: the memory is handed out again at once. A
/// block freed on another stream, or declared used on another stream, holds back the
/// arena's own rewinds until that stream's work completes, but not a reset.
pub struct Arena {
    inner: StreamOrdered<ArenaPool>,
    cfg: ArenaConfig,
    recorded: Mutex<Recorded>,
    recorded_count: AtomicUsize,
}

/// A linear arena over `backend`.
///
/// ```
/// use devpool_arena::{arena, ArenaConfig};
/// use devpool_core::Allocator;
/// use devpool_testing::MockBackend;
/// let a = arena(MockBackend::shared(), ArenaConfig::default());
/// for _frame in 0..3 {
///     let x = a.alloc(4096).unwrap();
///     let y = a.alloc(1 << 20).unwrap();
///     assert!(y.ptr.0 >= x.ptr.0 + 4096);
///     a.reset().unwrap(); // the frame's work is done: everything comes back
/// }
/// assert_eq!(a.detail().chunks, 1); // one chunk served every frame
/// ```
pub fn arena(backend: impl devpool_core::IntoBackend, cfg: ArenaConfig) -> Arena {
    let backend: Arc<dyn Backend> = backend.into_backend();
    let b = backend.clone();
    let c = cfg.clone();
    Arena {
        inner: StreamOrdered::new("arena", backend, move |_| {
            ArenaPool::new(b.clone(), c.clone())
        }),
        cfg: cfg.normalized(),
        recorded: Mutex::new(HashMap::new()),
        recorded_count: AtomicUsize::new(0),
    }
}

impl Arena {
    /// End the frame on every stream: see [`ArenaPool::reset`]. Returns the first error
    /// (a chunk that could not be given back); every pool is reset all the same.
    pub fn reset(&self) -> Result<()> {
        let mut first_err = None;
        for (_, pool) in self.inner.pools() {
            if let Err(e) = pool.reset() {
                first_err.get_or_insert(e);
            }
        }
        let mut r = self.recorded.lock();
        r.clear();
        self.recorded_count.store(0, Ordering::Release);
        first_err.map_or(Ok(()), Err)
    }

    /// End the frame on `stream` only.
    pub fn reset_stream(&self, stream: StreamId) -> Result<()> {
        let Some(pool) = self.inner.pool(stream) else {
            return Ok(());
        };
        let r = pool.reset();
        let mut rec = self.recorded.lock();
        rec.retain(|_, (owner, _)| *owner != stream);
        self.recorded_count.store(rec.len(), Ordering::Release);
        r
    }

    /// The arena's own figures, summed over streams.
    pub fn detail(&self) -> ArenaDetail {
        self.inner
            .fold(|s: &mut ArenaDetail, p| s.merge(&p.detail()))
    }

    /// The pool of `stream`, if it has one.
    pub fn pool(&self, stream: StreamId) -> Option<&ArenaPool> {
        self.inner.pool(stream)
    }

    /// The settings in force.
    pub fn config(&self) -> &ArenaConfig {
        &self.cfg
    }

    fn take_recorded(&self, block: &Block) -> Vec<StreamId> {
        if self.recorded_count.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        let mut r = self.recorded.lock();
        let v = r
            .remove(&(block.ptr.0, block.handle))
            .map(|(_, v)| v)
            .unwrap_or_default();
        self.recorded_count.store(r.len(), Ordering::Release);
        v
    }

    fn put_back(&self, block: &Block, streams: Vec<StreamId>) {
        let mut r = self.recorded.lock();
        r.insert((block.ptr.0, block.handle), (block.stream, streams));
        self.recorded_count.store(r.len(), Ordering::Release);
    }
}

impl Allocator for Arena {
    devpool_core::forward_allocator!(|a| &a.inner; name, backend, allocate, stats, trim);

    fn reuse(&self) -> Reuse {
        Reuse::WhenEmpty
    }

    fn reset(&self) -> Result<()> {
        Arena::reset(self)
    }

    #[inline]
    fn deallocate(&self, block: Block, stream: StreamId) -> Result<()> {
        block.check_device(self.inner.device())?;
        let pool = self
            .inner
            .pool(block.stream)
            .ok_or(Error::NotOwned { ptr: block.ptr })?;
        let recorded = self.take_recorded(&block);
        if recorded.is_empty() && stream == block.stream {
            return pool.deallocate(&block);
        }
        let mut waits = recorded.clone();
        if !waits.contains(&stream) {
            waits.push(stream);
        }
        waits.retain(|s| *s != block.stream);
        let r = pool.deallocate_after(&block, &waits);
        if r.is_err() && !recorded.is_empty() {
            self.put_back(&block, recorded);
        }
        r
    }

    fn record_stream(&self, block: &Block, stream: StreamId) -> Result<()> {
        self.inner.owner(block)?;
        if stream == block.stream {
            return Ok(());
        }
        let mut r = self.recorded.lock();
        let (_, v) = r
            .entry((block.ptr.0, block.handle))
            .or_insert_with(|| (block.stream, Vec::new()));
        if !v.contains(&stream) {
            v.push(stream);
        }
        self.recorded_count.store(r.len(), Ordering::Release);
        Ok(())
    }
}
