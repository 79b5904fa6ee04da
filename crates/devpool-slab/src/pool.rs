//! [`SlabPool`]: the single-stream slab pool.

use crate::classes::Classes;
use crate::depot::{Depot, Shared, SharedClasses};
use crate::handle::Handle;
use crate::heap::{Freed, Heap};
use crate::SlabConfig;
use crossbeam_utils::CachePadded;
use devpool_core::ClassStats;
use devpool_core::{
    human_bytes, Backend, Block, DeviceId, DevicePtr, Error, IntoBackend, Pool, Request, Result,
    Stats,
};
use devpool_core::{SpinGuard, SpinLock};
use parking_lot::Mutex;
use std::sync::Arc;

/// Thread caches per pool. Each running thread holds the lowest number no other
/// running thread holds and uses that cache, so up to this many threads each get
/// their own; a new thread takes over the cache (and slabs) of one that exited.
pub const THREAD_CACHES: usize = 32;

type Cache = CachePadded<SpinLock<Heap>>;

/// A single-stream pool of size-classed slabs. Use it through
/// [`slab`](crate::slab) or [`fixed`](crate::fixed), which give each stream its own.
///
/// - **Classes.** A request goes to the smallest class that fits it and whose slots
///   are aligned as asked; larger than the largest class is [`Error::TooLarge`].
/// - **Slabs.** Each slab is one backend region serving one class, its slots
///   tracked in a bitmap; allocation takes the lowest free slot of the first slab
///   with one, and a free finds its slab from the block's handle (thread cache,
///   place in the cache, slot and generation, checked against the pointer and
///   size): both O(1). A slab changes caches only through the depot, when empty, so
///   a live block's handle stays right.
/// - **Thread caches.** Each thread allocates from slabs its own cache holds, under
///   that cache's lock, which no other thread takes on the hot path. A block freed
///   on another thread goes back to the cache that owns its slab.
/// - **Empty slabs.** A cache keeps one empty slab per class, so a loop that
///   allocates and frees at a slab boundary does not call the backend each time.
///   Further empty slabs go to the pool's depot, which keeps up to
///   [`keep_empty`](SlabConfig::keep_empty) per class for any thread and gives the
///   rest back to the backend at once. [`trim`](Pool::trim) gives back every
///   empty slab, in the caches and the depot.
/// - **Statistics.** Each cache counts its own blocks as plain numbers under its
///   lock; [`stats`](Pool::stats) adds them up, exact whenever no operation is in
///   flight. Peaks are exact when one thread uses the pool; with several they are
///   the sum of the caches' peaks, an upper bound (as [`Stats::merge`] does).
///
/// ```
/// use devpool_core::{Pool, Request};
/// use devpool_testing::MockBackend;
/// use devpool_slab::{SlabConfig, SlabPool};
/// let pool = SlabPool::new(MockBackend::shared(), SlabConfig::default());
/// let b = pool.allocate(&Request::new(1000)).unwrap();
/// assert_eq!(b.size, 1024);
/// assert_eq!(pool.detail()[3].live_slots, 1);
/// pool.deallocate(&b).unwrap();
/// assert!(pool.deallocate(&b).is_err());
/// ```
pub struct SlabPool {
    caches: Box<[Cache; THREAD_CACHES]>,
    device: DeviceId,
    sh: Shared,
}

impl SlabPool {
    /// A pool over `backend` (an `Arc` of any backend) with the classes of `cfg`.
    pub fn new(backend: impl IntoBackend, cfg: SlabConfig) -> Self {
        let backend = backend.into_backend();
        let classes = Arc::new(CachePadded::new(Classes::new(&cfg, backend.granularity())));
        Self::with_classes(backend, classes)
    }

    pub(crate) fn with_classes(backend: Arc<dyn Backend>, classes: SharedClasses) -> Self {
        SlabPool {
            caches: Box::new(std::array::from_fn(|i| {
                CachePadded::new(SpinLock::new(Heap::new(i as u8)))
            })),
            device: backend.device(),
            sh: Shared {
                depot: CachePadded::new(Mutex::new(Depot::new(classes.info.len()))),
                counters: CachePadded::default(),
                backend,
                classes,
            },
        }
    }

    /// The calling thread's cache, or another idle one already in use if it is busy.
    fn my_cache(&self) -> SpinGuard<'_, Heap> {
        let home = crate::thread::index() % THREAD_CACHES;
        if let Some(g) = self.caches[home].try_lock() {
            return g;
        }
        for i in 1..THREAD_CACHES {
            if let Some(g) = self.caches[(home + i) % THREAD_CACHES].try_lock() {
                if g.is_made() {
                    return g;
                }
            }
        }
        self.caches[home].lock()
    }

    /// Free `block`: the fast path, which calls nothing. The handle names the cache
    /// that holds the block's slab, whose lock is taken without waiting; a busy lock
    /// or a bad block goes the slow way.
    #[inline]
    fn free_fast(&self, block: &Block) -> Result<()> {
        let h = Handle::decode(block.handle);
        if let Some(cache) = self.caches.get(h.cache) {
            if let Some(mut g) = cache.try_lock() {
                match g.free_fast(h, block) {
                    Freed::Done => return Ok(()),
                    Freed::Extra => {
                        drop(g);
                        self.give_away(block.handle);
                        return Ok(());
                    }
                    Freed::Refused => return Err(g.refusal(block)),
                }
            }
        }
        self.release_slow(block, true)
    }

    /// A free left a cache with more empty slabs of a class than it keeps: hand the
    /// slab on to the depot, if it is still there and still empty.
    /// It takes the block's raw handle, not the decoded one: the fast path then
    /// keeps one value alive across the free, not four.
    #[cold]
    fn give_away(&self, handle: u64) {
        let h = Handle::decode(handle);
        let mut g = self.caches[h.cache].lock();
        if g.is_extra_empty(h.local, h.gen) {
            g.give_away(h.local, &self.sh);
        }
    }

    /// Check `block` and, when `free` is set, free it, waiting for its cache's lock.
    #[cold]
    fn release_slow(&self, block: &Block, free: bool) -> Result<()> {
        let h = Handle::decode(block.handle);
        let Some(cache) = self.caches.get(h.cache) else {
            return Err(Error::NotOwned { ptr: block.ptr });
        };
        let mut g = cache.lock();
        if free {
            g.free(h, block, &self.sh)
        } else {
            g.check_live(h, block)
        }
    }

    #[inline]
    fn block(&self, req: &Request, ptr: u64, size: usize, handle: u64) -> Block {
        req.granted(DevicePtr(ptr), size, self.device, handle)
    }

    /// An allocation the fast path could not serve: an aligned or refused request,
    /// a busy or new cache, or a class that needs a slab from the depot.
    #[cold]
    fn allocate_slow(&self, req: &Request) -> Result<Block> {
        let c = self.sh.classes.class_for(req)?;
        let mut g = self.my_cache();
        if !g.is_made() {
            g.make(self.sh.classes.info.len());
        }
        let (ptr, size, handle) = g.alloc(c, req.size, &self.sh)?;
        drop(g);
        Ok(self.block(req, ptr, size, handle))
    }

    /// Statistics per class, smallest class first.
    pub fn detail(&self) -> Vec<ClassStats> {
        let mut out: Vec<ClassStats> = self
            .sh
            .classes
            .info
            .iter()
            .map(|c| ClassStats {
                size: c.size,
                slab_bytes: c.slab_bytes,
                slots_per_slab: c.slots as usize,
                ..ClassStats::default()
            })
            .collect();
        for cache in self.caches.iter() {
            let heap = cache.lock();
            let live = heap.live_slots();
            for ((o, cl), live) in out.iter_mut().zip(heap.classes()).zip(live) {
                o.slabs += cl.slabs;
                o.empty_slabs += cl.empty;
                o.live_slots += live;
                o.free_slots += cl.capacity - live;
                o.requested_bytes += cl.requested;
            }
        }
        for (o, (slabs, slots)) in out.iter_mut().zip(self.sh.depot.lock().kept()) {
            o.slabs += slabs as u64;
            o.empty_slabs += slabs as u64;
            o.free_slots += slots;
        }
        for o in &mut out {
            o.waste_bytes = (o.live_slots * o.size as u64).saturating_sub(o.requested_bytes);
        }
        out
    }

    /// Host bytes of this pool's metadata: caches, slabs and bitmaps.
    pub fn metadata_bytes(&self) -> usize {
        let mut bytes = std::mem::size_of::<SlabPool>()
            + self.caches.len() * std::mem::size_of::<Cache>()
            + self.sh.depot.lock().metadata_bytes();
        for cache in self.caches.iter() {
            bytes += cache.lock().metadata_bytes();
        }
        bytes
    }

    /// A debug check: walk every slab and check that its bitmap, free count and list
    /// agree with each other and with the class and block counts.
    /// It locks each thread cache in turn; run it when no operation is in flight.
    /// Returns [`Error::Corrupted`] naming the first disagreement.
    pub fn verify(&self) -> Result<()> {
        let corrupted = |detail: String| Error::Corrupted {
            ptr: DevicePtr::NULL,
            detail,
        };
        for cache in self.caches.iter() {
            cache.lock().check().map_err(corrupted)?;
        }
        self.sh.depot.lock().check().map_err(corrupted)
    }

    /// The slot sizes of the classes, smallest first.
    pub fn class_sizes(&self) -> Vec<usize> {
        self.sh.classes.info.iter().map(|c| c.size).collect()
    }

    /// The slot size a request would get, or the error it would get.
    pub fn granted_size(&self, req: &Request) -> Result<usize> {
        Ok(self.sh.classes.info[self.sh.classes.class_for(req)?].size)
    }
}

impl Pool for SlabPool {
    fn parts(&self) -> devpool_core::Parts {
        devpool_core::Parts::Classes(self.detail())
    }

    #[inline]
    fn allocate(&self, req: &Request) -> Result<Block> {
        // The fast path calls nothing: a plain request, this thread's cache free, a
        // slab of the class with a free slot. Anything else goes the slow way.
        // A thread's first allocation takes its number on the slow path.
        if let (Some(c), Some(n)) = (
            self.sh.classes.class_fast(req),
            crate::thread::index_if_known(),
        ) {
            let home = n % THREAD_CACHES;
            if let Some(mut g) = self.caches[home].try_lock() {
                if let Some((ptr, size, handle)) = g.alloc_fast(c, req.size) {
                    drop(g);
                    return Ok(self.block(req, ptr, size, handle));
                }
            }
        }
        self.allocate_slow(req)
    }

    #[inline]
    fn deallocate(&self, block: &Block) -> Result<()> {
        self.free_fast(block)
    }

    fn check(&self, block: &Block) -> Result<()> {
        self.release_slow(block, false)
    }

    fn stats(&self) -> Stats {
        let mut s = self.sh.counters.snapshot();
        for cache in self.caches.iter() {
            let h = cache.lock().stats;
            s.live_bytes.merge(&h.live);
            s.allocated_bytes.merge(&h.allocated);
            s.live_blocks.merge(&h.blocks);
            s.allocations += h.allocations;
            s.frees += h.frees;
        }
        s
    }

    fn trim(&self) -> Result<usize> {
        let sh = &self.sh;
        let mut bytes = 0;
        let mut first_err = None;
        for cache in self.caches.iter() {
            let empty = cache.lock().take_empty();
            let mut depot = self.sh.depot.lock();
            for slab in empty {
                match depot.release(slab, sh) {
                    Ok(b) => bytes += b,
                    Err(e) => {
                        first_err.get_or_insert(e);
                    }
                }
            }
        }
        let (b, e) = self.sh.depot.lock().release_all(sh);
        bytes += b;
        match first_err.or(e) {
            Some(e) => Err(e),
            None => Ok(bytes),
        }
    }

    fn describe_cache(&self) -> String {
        let stats = self.detail();
        match stats.iter().max_by_key(|c| c.free_slots) {
            Some(c) if c.free_slots > 0 => format!(
                "slab class {} holds the most free slots: {} ({}) in {} slabs, {} of them empty",
                human_bytes(c.size as u64),
                c.free_slots,
                human_bytes(c.free_slots * c.size as u64),
                c.slabs,
                c.empty_slabs
            ),
            _ => String::new(),
        }
    }
}

impl Drop for SlabPool {
    fn drop(&mut self) {
        let (backend, counters) = (&*self.sh.backend, &self.sh.counters);
        let mut release = |s: crate::slab::Slab| {
            if backend.free_region(s.region, s.region_bytes).is_ok() {
                counters.on_release(s.region_bytes);
            }
        };
        for cache in self.caches.iter_mut() {
            cache.get_mut().drain().for_each(&mut release);
        }
        self.sh.depot.get_mut().drain().for_each(release);
    }
}
