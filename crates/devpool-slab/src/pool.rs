//! [`SlabPool`]: the single-stream slab pool.

use crate::classes::Classes;
use crate::depot::{Ctx, Depot};
use crate::heap::Heap;
use crate::lock::{SpinGuard, SpinLock};
use crate::stats::ClassStats;
use crate::table::{decode_handle, SlabTable, DEPOT};
use crate::SlabConfig;
use crossbeam_utils::CachePadded;
use devpool_core::{
    human_bytes, Backend, Block, IntoBackend, Counters, DeviceId, DevicePtr, Error, Pool, Request, Result,
    Stats,
};
use parking_lot::Mutex;
use std::sync::Arc;

/// Thread caches per pool. Threads are spread over them by the order in which they
/// first allocate, so up to this many threads each get their own.
pub const THREAD_CACHES: usize = 32;

type Cache = CachePadded<SpinLock<Option<Box<Heap>>>>;

/// A single-stream pool of size-classed slabs. Use it through
/// [`slab`](crate::slab) or [`fixed`](crate::fixed), which give each stream its own.
///
/// - **Classes.** A request goes to the smallest class that fits it and whose slots
///   are aligned as asked; larger than the largest class is [`Error::TooLarge`].
/// - **Slabs.** Each slab is one backend region serving one class, its slots
///   tracked in a bitmap; allocation takes the lowest free slot of the first slab
///   with one, and a free finds its slab from the block's handle (slab number, slot
///   and generation, checked against the pointer and size): both O(1).
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
/// use devpool_core::{MockBackend, Pool, Request};
/// use devpool_slab::{SlabConfig, SlabPool};
/// let pool = SlabPool::new(MockBackend::shared(), SlabConfig::default());
/// let b = pool.allocate(&Request::new(1000)).unwrap();
/// assert_eq!(b.size, 1024);
/// assert_eq!(pool.class_stats()[3].live_slots, 1);
/// pool.deallocate(&b).unwrap();
/// assert!(pool.deallocate(&b).is_err());
/// ```
pub struct SlabPool {
    backend: Arc<dyn Backend>,
    device: DeviceId,
    classes: Arc<Classes>,
    caches: Box<[Cache]>,
    depot: Mutex<Depot>,
    table: SlabTable,
    counters: Counters,
}

impl SlabPool {
    /// A pool over `backend` (an `Arc` of any backend) with the classes of `cfg`.
    pub fn new(backend: impl IntoBackend, cfg: SlabConfig) -> Self {
        let backend = backend.into_backend();
        let classes = Arc::new(Classes::new(&cfg, backend.granularity()));
        Self::with_classes(backend, classes)
    }

    pub(crate) fn with_classes(backend: Arc<dyn Backend>, classes: Arc<Classes>) -> Self {
        SlabPool {
            device: backend.device(),
            depot: Mutex::new(Depot::new(classes.info.len())),
            caches: (0..THREAD_CACHES).map(|_| Cache::default()).collect(),
            table: SlabTable::default(),
            counters: Counters::default(),
            backend,
            classes,
        }
    }

    #[inline]
    fn ctx(&self) -> Ctx<'_> {
        Ctx {
            backend: &*self.backend,
            classes: &self.classes,
            table: &self.table,
            counters: &self.counters,
        }
    }

    /// The calling thread's cache, or another idle one that exists if it is busy.
    #[inline]
    fn my_cache(&self) -> (usize, SpinGuard<'_, Option<Box<Heap>>>) {
        let home = crate::thread::index() % THREAD_CACHES;
        match self.caches[home].try_lock() {
            Some(g) => (home, g),
            None => self.busy_cache(home),
        }
    }

    #[cold]
    fn busy_cache(&self, home: usize) -> (usize, SpinGuard<'_, Option<Box<Heap>>>) {
        for i in 1..THREAD_CACHES {
            let at = (home + i) % THREAD_CACHES;
            if let Some(g) = self.caches[at].try_lock() {
                if g.is_some() {
                    return (at, g);
                }
            }
        }
        (home, self.caches[home].lock())
    }

    /// Check `block` and, when `free` is set, free it.
    fn release(&self, block: &Block, free: bool) -> Result<()> {
        let (idx, slot, gen) = decode_handle(block.handle);
        let not_owned = Error::NotOwned { ptr: block.ptr };
        loop {
            let e = self.table.get(idx).ok_or(not_owned.clone())?;
            if !e.present || e.gen != gen {
                return Err(not_owned);
            }
            if e.owner == DEPOT {
                // The depot holds only empty slabs: this block is not live.
                let d = self.depot.lock();
                if self.table.get(idx) != Some(e) {
                    continue;
                }
                return Err(d.refuse(idx, slot, block));
            }
            let mut g = self.caches[e.owner as usize].lock();
            // The entry changes only under its owner's lock: check it did not move.
            if self.table.get(idx) != Some(e) {
                continue;
            }
            let Some(heap) = g.as_mut() else {
                return Err(not_owned);
            };
            return heap.free(e.local, slot, block, free, &self.depot, &self.ctx());
        }
    }

    /// Statistics per class, smallest class first.
    pub fn class_stats(&self) -> Vec<ClassStats> {
        let mut out: Vec<ClassStats> = self
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
            if let Some(heap) = cache.lock().as_ref() {
                for (o, cl) in out.iter_mut().zip(heap.classes()) {
                    o.slabs += cl.slabs;
                    o.empty_slabs += cl.empty;
                    o.live_slots += cl.live;
                    o.free_slots += cl.capacity - cl.live;
                    o.requested_bytes += cl.requested;
                }
            }
        }
        for (o, (slabs, slots)) in out.iter_mut().zip(self.depot.lock().kept()) {
            o.slabs += slabs as u64;
            o.empty_slabs += slabs as u64;
            o.free_slots += slots;
        }
        for o in &mut out {
            o.waste_bytes = (o.live_slots * o.size as u64).saturating_sub(o.requested_bytes);
        }
        out
    }

    /// Host bytes of this pool's metadata: caches, slabs, bitmaps and table.
    pub fn host_metadata_bytes(&self) -> usize {
        let mut bytes = std::mem::size_of::<SlabPool>()
            + self.caches.len() * std::mem::size_of::<Cache>()
            + self.table.heap_bytes()
            + self.depot.lock().metadata_bytes();
        for cache in self.caches.iter() {
            if let Some(heap) = cache.lock().as_ref() {
                bytes += heap.metadata_bytes();
            }
        }
        bytes
    }

    /// The slot sizes of the classes, smallest first.
    pub fn class_sizes(&self) -> Vec<usize> {
        self.classes.info.iter().map(|c| c.size).collect()
    }

    /// The slot size a request would get, or the error it would get.
    pub fn granted_size(&self, req: &Request) -> Result<usize> {
        Ok(self.classes.info[self.classes.class_for(req)?].size)
    }
}

impl Pool for SlabPool {
    #[inline]
    fn allocate(&self, req: &Request) -> Result<Block> {
        let c = self.classes.class_for(req)?;
        let (at, mut g) = self.my_cache();
        let heap = match g.as_mut() {
            Some(h) => h,
            None => g.insert(Box::new(Heap::new(at as u8, self.classes.info.len()))),
        };
        let (ptr, handle) = heap.alloc(c, req.size, &self.depot, &self.ctx())?;
        drop(g);
        Ok(Block {
            ptr: DevicePtr(ptr),
            size: self.classes.info[c].size,
            requested: req.size,
            stream: req.stream,
            device: self.device,
            handle,
        })
    }

    #[inline]
    fn deallocate(&self, block: &Block) -> Result<()> {
        self.release(block, true)
    }

    fn check(&self, block: &Block) -> Result<()> {
        self.release(block, false)
    }

    fn stats(&self) -> Stats {
        let mut s = self.counters.snapshot();
        for cache in self.caches.iter() {
            if let Some(heap) = cache.lock().as_ref() {
                let h = &heap.stats;
                for (a, b) in [
                    (&mut s.live_bytes, &h.live),
                    (&mut s.allocated_bytes, &h.allocated),
                    (&mut s.live_blocks, &h.blocks),
                ] {
                    a.current += b.current;
                    a.peak += b.peak;
                }
                s.allocations += h.allocations;
                s.frees += h.frees;
            }
        }
        s
    }

    fn trim(&self) -> Result<usize> {
        let ctx = self.ctx();
        let mut bytes = 0;
        let mut first_err = None;
        for cache in self.caches.iter() {
            let mut g = cache.lock();
            if let Some(heap) = g.as_mut() {
                let empty = heap.take_empty();
                let mut depot = self.depot.lock();
                for slab in empty {
                    match depot.release(slab, &ctx) {
                        Ok(b) => bytes += b,
                        Err(e) => {
                            first_err.get_or_insert(e);
                        }
                    }
                }
            }
        }
        let (b, e) = self.depot.lock().release_all(&ctx);
        bytes += b;
        match first_err.or(e) {
            Some(e) => Err(e),
            None => Ok(bytes),
        }
    }

    fn describe_cache(&self) -> String {
        let stats = self.class_stats();
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
        let backend = &*self.backend;
        let mut release = |s: crate::slab::Slab| {
            if backend.free_region(s.region, s.region_bytes).is_ok() {
                self.counters.on_release(s.region_bytes);
            }
        };
        for cache in self.caches.iter_mut() {
            if let Some(heap) = cache.get_mut() {
                heap.drain().for_each(&mut release);
            }
        }
        self.depot.get_mut().drain().for_each(release);
    }
}
