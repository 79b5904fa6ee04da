//! Stream-ordered reuse: one mechanism for every strategy.
//!
//! [`StreamOrdered`] turns a family of single-stream [`Pool`]s into an [`Allocator`]:
//!
//! - Each stream gets its own pool, made on first use. A block freed on the stream it
//!   was allocated on goes straight back into that stream's pool and may be reused by
//!   that stream at once: work on one stream runs in order, so the next user of the
//!   block queues behind the last.
//! - No other stream can get that memory while it sits in the pool. A free on another
//!   stream, or of a block declared used on other streams with
//!   [`record_stream`](Allocator::record_stream), records one event on each of those
//!   streams (events come from a pool, not created per free) and waits in a queue;
//!   the block goes back to its pool only once the backend says every event completed.
//! - Memory moves between streams through the backend only: on out of memory, the
//!   allocator waits for pending frees, synchronizes the streams it serves, trims every
//!   pool, and retries once; [`trim`](Allocator::trim) does the same.
//!
//! The stream lookup is a fixed open-addressed table read with plain atomic loads, so
//! threads on different streams share no lock and no written cache line.

use crate::allocator::{Allocator, Pool};
use crate::backend::Backend;
use crate::error::{Error, OomInfo, Result};
use crate::stats::Stats;
use crate::types::{Block, Request, StreamId};
use crate::EventId;
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crate::table::{KeyTable, EMPTY};

/// How many distinct streams one allocator serves by default.
pub const DEFAULT_MAX_STREAMS: usize = 512;

struct Pending {
    block: Block,
    events: Vec<EventId>,
}

#[derive(Default)]
struct PendingQueue {
    queue: VecDeque<Pending>,
    ptrs: HashSet<u64>,
}

type Factory<P> = Box<dyn Fn(StreamId) -> P + Send + Sync>;

/// An [`Allocator`] made of one [`Pool`] per stream, with cross-stream frees guarded by
/// events (the design is in docs/DESIGN.md, "Why one pool per stream").
///
/// ```
/// use devpool_core::{Allocator, Backend, DirectPool, Request, StreamOrdered};
/// use devpool_testing::{MockBackend, MockConfig};
/// use std::sync::Arc;
/// let mock = MockBackend::shared_with(MockConfig::default().manual_events());
/// let backend: Arc<dyn devpool_core::Backend> = mock.clone();
/// let b2 = backend.clone();
/// let alloc = StreamOrdered::new("direct", backend, move |_| DirectPool::new(b2.clone()));
/// let (a, s) = (mock.create_stream().unwrap(), mock.create_stream().unwrap());
/// let blk = alloc.allocate(Request::new(4096).on_stream(a)).unwrap();
/// alloc.deallocate(blk, s).unwrap(); // freed on another stream: waits for an event
/// assert_eq!(alloc.pending_frees(), 1);
/// mock.complete_stream(s);
/// alloc.allocate(Request::new(1).on_stream(a)).unwrap(); // polls the queue
/// assert_eq!(alloc.pending_frees(), 0);
/// ```
pub struct StreamOrdered<P: Pool> {
    name: String,
    backend: Arc<dyn Backend>,
    device: crate::DeviceId,
    factory: Factory<P>,
    keys: KeyTable,
    pools: Box<[OnceLock<P>]>,
    pending: Mutex<PendingQueue>,
    pending_count: AtomicUsize,
    events: Mutex<Vec<EventId>>,
    recorded: Mutex<HashMap<u64, Vec<StreamId>>>,
    recorded_count: AtomicUsize,
    failures: AtomicU64,
}

impl<P: Pool> StreamOrdered<P> {
    /// An allocator named `name` that makes a pool for each stream with `factory`.
    pub fn new(
        name: impl Into<String>,
        backend: Arc<dyn Backend>,
        factory: impl Fn(StreamId) -> P + Send + Sync + 'static,
    ) -> Self {
        Self::with_max_streams(name, backend, DEFAULT_MAX_STREAMS, factory)
    }

    /// The same, serving at most `max_streams` distinct streams.
    pub fn with_max_streams(
        name: impl Into<String>,
        backend: Arc<dyn Backend>,
        max_streams: usize,
        factory: impl Fn(StreamId) -> P + Send + Sync + 'static,
    ) -> Self {
        let n = max_streams.max(1).next_power_of_two() * 2;
        let keys = KeyTable::new(n);
        let pools = (0..n).map(|_| OnceLock::new()).collect();
        StreamOrdered {
            name: name.into(),
            device: backend.device(),
            backend,
            factory: Box::new(factory),
            keys,
            pools,
            pending: Mutex::new(PendingQueue::default()),
            pending_count: AtomicUsize::new(0),
            events: Mutex::new(Vec::new()),
            recorded: Mutex::new(HashMap::new()),
            recorded_count: AtomicUsize::new(0),
            failures: AtomicU64::new(0),
        }
    }

    /// The pool of `stream`, if it has one.
    #[inline]
    pub fn pool(&self, stream: StreamId) -> Option<&P> {
        // A slot's pool is made right after its key is claimed: a lookup between the
        // two sees no pool, and only an allocation (which makes it) can get there.
        self.pools.get(self.keys.slot_of(stream.0))?.get()
    }

    /// The pool of `stream` if its key sits in its home slot of the table (most
    /// do): plain loads and no call, for the fast paths; `None` sends them to
    /// their slow paths, which look further with [`pool`](Self::pool).
    #[inline]
    fn pool_fast(&self, stream: StreamId) -> Option<&P> {
        self.pools.get(self.keys.home_slot(stream.0)?)?.get()
    }

    /// The pool that owns `block`: the block is of this device, its stream has a pool,
    /// and that pool knows it ([`Pool::check`]). What `record_stream` checks before
    /// it records anything.
    pub fn owner(&self, block: &Block) -> Result<&P> {
        block.check_device(self.device)?;
        let pool = self
            .pool(block.stream)
            .ok_or(Error::NotOwned { ptr: block.ptr })?;
        pool.check(block)?;
        Ok(pool)
    }

    /// The pool of `stream`, made now if it is the stream's first allocation.
    #[cold]
    fn pool_or_create(&self, stream: StreamId) -> Result<&P> {
        if stream.0 == EMPTY {
            return Err(Error::Unsupported("stream handle u64::MAX is reserved"));
        }
        match self.keys.claim(stream.0) {
            Some(i) => Ok(self.pools[i].get_or_init(|| (self.factory)(stream))),
            None => Err(Error::Limit(format!(
                "allocator {} serves at least {} streams, and no more here",
                self.name,
                self.keys.len() / 2
            ))),
        }
    }

    /// Whether no free waits for an event and no block was declared used elsewhere:
    /// then a free on the block's own stream goes straight to its pool.
    #[inline]
    fn quiet(&self) -> bool {
        self.pending_count.load(Ordering::Acquire) == 0
            && self.recorded_count.load(Ordering::Acquire) == 0
    }

    /// Every stream's pool made so far, with its stream.
    pub fn pools(&self) -> impl Iterator<Item = (StreamId, &P)> {
        (0..self.keys.len()).filter_map(|i| {
            let k = self.keys.key(i);
            (k != EMPTY)
                .then(|| self.pools[i].get().map(|p| (StreamId(k), p)))
                .flatten()
        })
    }

    /// A figure of every stream's pool folded into one: `fold(|sum, pool| ...)` starts
    /// from `T::default()` and adds each pool in turn.
    pub fn fold<T: Default>(&self, mut add: impl FnMut(&mut T, &P)) -> T {
        let mut sum = T::default();
        for (_, p) in self.pools() {
            add(&mut sum, p);
        }
        sum
    }

    /// Frees waiting for other streams' events.
    pub fn pending_frees(&self) -> usize {
        self.pending_count.load(Ordering::Acquire)
    }

    fn take_event(&self) -> Result<EventId> {
        if let Some(e) = self.events.lock().pop() {
            return Ok(e);
        }
        Ok(self.backend.create_event()?)
    }

    /// Release pending frees whose events completed (all of them, waiting, if `wait`).
    fn poll(&self, wait: bool) -> Result<()> {
        let mut q = if wait {
            self.pending.lock()
        } else {
            match self.pending.try_lock() {
                Some(q) => q,
                None => return Ok(()),
            }
        };
        let mut released = Vec::new();
        let mut first_err = None;
        while let Some(front) = q.queue.front() {
            let passed = crate::events_passed(&*self.backend, &front.events, wait);
            if let Some(err) = passed.error {
                first_err.get_or_insert(Error::from(err));
            }
            if !passed.done {
                break;
            }
            let p = q.queue.pop_front().expect("front exists");
            q.ptrs.remove(&p.block.ptr.0);
            released.push(p);
        }
        self.pending_count.store(q.queue.len(), Ordering::Release);
        drop(q);
        for p in released {
            self.events.lock().extend(p.events);
            if let Some(pool) = self.pool(p.block.stream) {
                if let Err(e) = pool.deallocate(&p.block) {
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn synchronize_streams(&self) -> Result<()> {
        match self.backend.synchronize_device() {
            Ok(()) => return Ok(()),
            Err(crate::BackendError::Unsupported(_)) => {}
            Err(e) => return Err(e.into()),
        }
        for (s, _) in self.pools() {
            self.backend.synchronize(s)?;
        }
        Ok(())
    }

    fn trim_all(&self) -> Result<usize> {
        let mut total = 0;
        for (_, p) in self.pools() {
            total += p.trim()?;
        }
        Ok(total)
    }

    fn oom(&self, req: &Request) -> Error {
        let stats = self.stats();
        let (free, total) = self.backend.mem_info().unwrap_or((0, 0));
        let mut note = String::new();
        if let Some((s, p)) = self.pools().max_by_key(|(_, p)| p.stats().cached_bytes()) {
            let d = p.describe_cache();
            note = format!(
                "most unused memory: {} cached in the pool of stream {s}{}{d}",
                crate::human_bytes(p.stats().cached_bytes()),
                if d.is_empty() { "" } else { ": " }
            );
        }
        Error::OutOfMemory(Box::new(OomInfo::from_stats(
            req.size,
            &stats,
            (free, total),
            format!("allocator {}; {note}", self.name),
        )))
    }

    /// A free the fast path of [`deallocate`](Allocator::deallocate) does not take:
    /// a block of another device or of no pool of ours (errors), or one that
    /// [`deallocate_slow`](Self::deallocate_slow) handles.
    #[cold]
    #[inline(never)]
    fn deallocate_checked(&self, block: &Block, stream: StreamId) -> Result<()> {
        block.check_device(self.device)?;
        let Some(pool) = self.pool(block.stream) else {
            return Err(Error::NotOwned { ptr: block.ptr });
        };
        if stream == block.stream && self.quiet() {
            return pool.deallocate(block);
        }
        self.deallocate_slow(pool, *block, stream)
    }

    /// A free on another stream, or with frees queued or blocks declared used
    /// elsewhere: check for a double free in the queue, record the events the block
    /// must wait for, and queue it (or free it at once when it waits for nothing).
    #[cold]
    fn deallocate_slow(&self, pool: &P, block: Block, stream: StreamId) -> Result<()> {
        if self.pending_count.load(Ordering::Acquire) > 0
            && self.pending.lock().ptrs.contains(&block.ptr.0)
        {
            return Err(Error::DoubleFree { ptr: block.ptr });
        }
        let mut waits: Vec<StreamId> = Vec::new();
        if self.recorded_count.load(Ordering::Acquire) > 0 {
            if let Some(v) = self.recorded.lock().remove(&block.ptr.0) {
                self.recorded_count.fetch_sub(1, Ordering::AcqRel);
                waits = v;
            }
        }
        if stream != block.stream && !waits.contains(&stream) {
            waits.push(stream);
        }
        waits.retain(|s| *s != block.stream);
        if waits.is_empty() {
            return pool.deallocate(&block);
        }
        pool.check(&block)?;
        let mut events = Vec::with_capacity(waits.len());
        for s in waits {
            let e = self.take_event()?;
            if let Err(err) = self.backend.record_event(e, s) {
                self.events.lock().push(e);
                self.events.lock().extend(events);
                return Err(err.into());
            }
            events.push(e);
        }
        let mut q = self.pending.lock();
        q.ptrs.insert(block.ptr.0);
        q.queue.push_back(Pending { block, events });
        self.pending_count.store(q.queue.len(), Ordering::Release);
        drop(q);
        // The other streams may be done already (an idle device): release at once.
        let _ = self.poll(false);
        Ok(())
    }

    /// An allocation on a stream with no pool yet, or with frees waiting for events:
    /// make the pool, release the frees whose events completed, allocate.
    #[cold]
    fn allocate_slow(&self, req: Request) -> Result<Block> {
        let pool = match self.pool(req.stream) {
            Some(p) => p,
            None => self.pool_or_create(req.stream)?,
        };
        if self.pending_count.load(Ordering::Relaxed) > 0 {
            // Errors of a broken event are reported by trim; allocation goes on.
            let _ = self.poll(false);
        }
        let mut r = pool.allocate(&req);
        if r.is_err() {
            self.allocate_failed(pool, &req, &mut r);
        }
        r
    }

    /// The fast path's allocation of `req` failed with `r`:
    /// [`allocate_failed`](Self::allocate_failed) in the request's pool.
    #[cold]
    #[inline(never)]
    fn allocate_retry(&self, req: &Request, e: Error) -> Result<Block> {
        let mut r = Err(e);
        if let Some(pool) = self.pool(req.stream) {
            self.allocate_failed(pool, req, &mut r);
        }
        r
    }

    /// An allocation failed with `r`: on out of memory, give everything cached back
    /// and try once more, leaving that result in `r`; count the failure.
    #[cold]
    fn allocate_failed(&self, pool: &P, req: &Request, r: &mut Result<Block>) {
        if !matches!(r, Err(e) if e.is_oom()) {
            if r.is_err() {
                self.failures.fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        let _ = self.poll(true);
        let _ = self.synchronize_streams();
        let _ = self.trim_all();
        *r = pool.allocate(req).map_err(|e| {
            self.failures.fetch_add(1, Ordering::Relaxed);
            if e.is_oom() {
                self.oom(req)
            } else {
                e
            }
        });
    }
}

impl<P: Pool> Allocator for StreamOrdered<P> {
    fn name(&self) -> &str {
        &self.name
    }

    fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    #[inline]
    fn allocate(&self, req: Request) -> Result<Block> {
        match self.pool_fast(req.stream) {
            Some(pool) if self.pending_count.load(Ordering::Relaxed) == 0 => {
                match pool.allocate(&req) {
                    // Only the request stays alive across the call: the pool is
                    // looked up again on this rare path.
                    Err(e) => self.allocate_retry(&req, e),
                    ok => ok,
                }
            }
            _ => self.allocate_slow(req),
        }
    }

    #[inline]
    fn deallocate(&self, block: Block, stream: StreamId) -> Result<()> {
        // The common case: a block of this device freed on its own stream, nothing
        // declared, nothing queued. Both ways out are calls in tail position, so
        // this path saves no registers.
        if block.device == self.device && stream == block.stream && self.quiet() {
            if let Some(pool) = self.pool_fast(block.stream) {
                return pool.deallocate(&block);
            }
        }
        // By reference: the fast path copies no block to pass it on.
        self.deallocate_checked(&block, stream)
    }

    fn record_stream(&self, block: &Block, stream: StreamId) -> Result<()> {
        self.owner(block)?;
        if stream == block.stream {
            return Ok(());
        }
        let mut r = self.recorded.lock();
        let v = r.entry(block.ptr.0).or_insert_with(|| {
            self.recorded_count.fetch_add(1, Ordering::AcqRel);
            Vec::new()
        });
        if !v.contains(&stream) {
            v.push(stream);
        }
        Ok(())
    }

    fn stats(&self) -> Stats {
        let mut s = self.fold(|s: &mut Stats, p| s.merge(&p.stats()));
        s.failures = self.failures.load(Ordering::Relaxed);
        s
    }

    fn trim(&self) -> Result<usize> {
        self.poll(false)?;
        self.synchronize_streams()?;
        self.trim_all()
    }

    fn parts(&self) -> crate::Parts {
        self.fold(|parts: &mut crate::Parts, p| parts.merge(p.parts()))
    }
}

impl<P: Pool> Drop for StreamOrdered<P> {
    fn drop(&mut self) {
        let _ = self.poll(true);
        for e in self.events.get_mut().drain(..) {
            let _ = self.backend.destroy_event(e);
        }
    }
}
