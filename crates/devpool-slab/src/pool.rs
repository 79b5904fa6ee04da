//! [`SlabPool`]: the single-stream slab pool.

use crate::classes::Classes;
use crate::depot::{Depot, Shared, SharedClasses};
use crate::heap::Heap;
use crate::lock::{SpinGuard, SpinLock};
use crate::stats::ClassStats;
use crate::table::{decode_handle, Entry, SlabTable, DEPOT};
use crate::SlabConfig;
use crossbeam_utils::CachePadded;
use devpool_core::{
    human_bytes, Backend, Block, DeviceId, DevicePtr, Error, IntoBackend, Pool, Request, Result,
    Stats,
};
use parking_lot::Mutex;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Thread caches per pool. Each running thread holds the lowest number no other
/// running thread holds and uses that cache, so up to this many threads each get
/// their own; a new thread takes over the cache (and slabs) of one that exited.
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
    caches: Box<[Cache]>,
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
            caches: (0..THREAD_CACHES).map(|_| Cache::default()).collect(),
            device: backend.device(),
            sh: Shared {
                depot: CachePadded::new(Mutex::new(Depot::new(classes.info.len()))),
                table: SlabTable::default(),
                counters: CachePadded::default(),
                backend,
                classes,
            },
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

    #[cold]
    fn new_cache<'a>(&self, slot: &'a mut Option<Box<Heap>>, at: usize) -> &'a mut Heap {
        slot.insert(Box::new(Heap::new(at as u8, self.sh.classes.info.len())))
    }

    /// Check `block` and, when `free` is set, free it.
    #[inline]
    fn release(&self, block: &Block, free: bool) -> Result<()> {
        let (idx, slot, gen) = decode_handle(block.handle);
        if let Some(cell) = self.sh.table.cell(idx) {
            let raw = cell.load(Ordering::Acquire);
            let e = Entry::decode(raw);
            if e.present && e.gen == gen {
                if let Some(cache) = self.caches.get(e.owner as usize) {
                    let mut g = cache.lock();
                    // The entry changes only under its owner's lock: check it stayed.
                    if cell.load(Ordering::Relaxed) == raw {
                        if let Some(heap) = g.as_mut() {
                            return heap.free(e.local, slot, block, free, &self.sh);
                        }
                    }
                }
            }
        }
        self.release_slow(block, free)
    }

    /// [`release`](Self::release) when the slab moved meanwhile, sits in the depot,
    /// or the block is not one of ours.
    #[cold]
    fn release_slow(&self, block: &Block, free: bool) -> Result<()> {
        let (idx, slot, gen) = decode_handle(block.handle);
        loop {
            let e = match self.sh.table.get(idx) {
                Some(e) if e.present && e.gen == gen => e,
                _ => return Err(Error::NotOwned { ptr: block.ptr }),
            };
            if e.owner == DEPOT {
                // The depot holds only empty slabs: this block is not live.
                let d = self.sh.depot.lock();
                if self.sh.table.get(idx) != Some(e) {
                    continue;
                }
                return Err(d.refuse(idx, slot, block));
            }
            let Some(cache) = self.caches.get(e.owner as usize) else {
                return Err(Error::NotOwned { ptr: block.ptr });
            };
            let mut g = cache.lock();
            if self.sh.table.get(idx) != Some(e) {
                continue;
            }
            return match g.as_mut() {
                Some(heap) => heap.free(e.local, slot, block, free, &self.sh),
                None => Err(Error::NotOwned { ptr: block.ptr }),
            };
        }
    }

    /// Statistics per class, smallest class first.
    pub fn class_stats(&self) -> Vec<ClassStats> {
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

    /// Host bytes of this pool's metadata: caches, slabs, bitmaps and table.
    pub fn host_metadata_bytes(&self) -> usize {
        let mut bytes = std::mem::size_of::<SlabPool>()
            + self.caches.len() * std::mem::size_of::<Cache>()
            + self.sh.table.heap_bytes()
            + self.sh.depot.lock().metadata_bytes();
        for cache in self.caches.iter() {
            if let Some(heap) = cache.lock().as_ref() {
                bytes += heap.metadata_bytes();
            }
        }
        bytes
    }

    /// A debug check: walk every slab and check that its bitmap, free count, list
    /// and table entry agree with each other and with the class and block counts.
    /// It locks each thread cache in turn; run it when no operation is in flight.
    /// Returns [`Error::Corrupted`] naming the first disagreement.
    pub fn check_consistency(&self) -> Result<()> {
        let corrupted = |detail: String| Error::Corrupted {
            ptr: DevicePtr::NULL,
            detail,
        };
        for cache in self.caches.iter() {
            if let Some(heap) = cache.lock().as_ref() {
                heap.check(&self.sh).map_err(corrupted)?;
            }
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
    #[inline]
    fn allocate(&self, req: &Request) -> Result<Block> {
        let c = self.sh.classes.class_for(req)?;
        let (at, mut g) = self.my_cache();
        let heap = match g.as_mut() {
            Some(h) => h,
            None => self.new_cache(&mut g, at),
        };
        let (ptr, size, handle) = heap.alloc(c, req.size, &self.sh)?;
        drop(g);
        Ok(Block {
            ptr: DevicePtr(ptr),
            size,
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
        let mut s = self.sh.counters.snapshot();
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
        let sh = &self.sh;
        let mut bytes = 0;
        let mut first_err = None;
        for cache in self.caches.iter() {
            let mut g = cache.lock();
            if let Some(heap) = g.as_mut() {
                let empty = heap.take_empty();
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
        }
        let (b, e) = self.sh.depot.lock().release_all(sh);
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
        let (backend, counters) = (&*self.sh.backend, &self.sh.counters);
        let mut release = |s: crate::slab::Slab| {
            if backend.free_region(s.region, s.region_bytes).is_ok() {
                counters.on_release(s.region_bytes);
            }
        };
        for cache in self.caches.iter_mut() {
            if let Some(heap) = cache.get_mut() {
                heap.drain().for_each(&mut release);
            }
        }
        self.sh.depot.get_mut().drain().for_each(release);
    }
}
