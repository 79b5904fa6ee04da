//! A thread cache: the slabs one thread allocates from, per class a list of those
//! with free slots, and the statistics of the blocks in them. Everything here is
//! plain data under the cache's lock, which only its thread takes on the hot path.

use crate::depot::Shared;
use crate::handle::{Handle, MAX_LOCAL};
use crate::slab::{Slab, NIL};
use devpool_core::{Block, Error, Gauge, Result};

/// Empty slabs of one class a cache keeps before handing more to the depot.
const KEEP_IN_CACHE: u32 = 1;

/// One class in one cache.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ClassList {
    /// First slab with a free slot.
    head: u32,
    /// Slabs held.
    pub slabs: u64,
    /// Empty slabs held.
    pub empty: u64,
    /// Slots in the slabs held.
    pub capacity: u64,
    /// Requested bytes of the slots in use.
    pub requested: u64,
}

impl Default for ClassList {
    fn default() -> Self {
        ClassList {
            head: NIL,
            slabs: 0,
            empty: 0,
            capacity: 0,
            requested: 0,
        }
    }
}

/// Add `v` to a gauge. The peak is stored only when passed: in a steady state a
/// compare and a branch predicted right, no load-max-store.
#[inline]
fn gauge_add(g: &mut Gauge, v: u64) {
    g.current += v;
    if g.current > g.peak {
        g.peak = g.current;
    }
}

/// The statistics of the blocks a cache's slabs hold.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CacheStats {
    pub live: Gauge,
    pub allocated: Gauge,
    pub blocks: Gauge,
    pub allocations: u64,
    pub frees: u64,
}

impl CacheStats {
    #[inline]
    fn on_alloc(&mut self, requested: u64, size: u64) {
        gauge_add(&mut self.live, requested);
        gauge_add(&mut self.allocated, size);
        gauge_add(&mut self.blocks, 1);
        self.allocations += 1;
    }

    #[inline]
    fn on_free(&mut self, requested: u64, size: u64) {
        // `requested` comes from the caller: never let a forged one wrap a count.
        self.live.current = self.live.current.saturating_sub(requested);
        self.allocated.current -= size;
        self.blocks.current -= 1;
        self.frees += 1;
    }
}

/// What a free did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Freed {
    /// The slot is free again.
    Done,
    /// The slot is free, and its slab is now an empty slab beyond those the cache
    /// keeps: it should go to the depot.
    Extra,
    /// Nothing changed: the block is not a live slot of this cache.
    /// [`refusal`](Heap::refusal) says why.
    Refused,
}

/// A thread cache. It is made empty, with no class lists, and gets them on its
/// first allocation ([`make`](Heap::make)).
#[derive(Debug)]
pub(crate) struct Heap {
    id: u8,
    /// Generation given to the next slab this cache adopts.
    next_gen: u16,
    /// The slabs by local index; a place whose slab left holds [`Slab::vacant`],
    /// which no handle matches, so a lookup needs no `Option` test.
    slabs: Vec<Slab>,
    vacant: Vec<u32>,
    classes: Box<[ClassList]>,
    pub stats: CacheStats,
}

impl Heap {
    /// The cache numbered `id`, with nothing in it.
    pub fn new(id: u8) -> Self {
        Heap {
            id,
            next_gen: 0,
            slabs: Vec::new(),
            vacant: Vec::new(),
            classes: Box::new([]),
            stats: CacheStats::default(),
        }
    }

    /// Whether the cache has its class lists.
    #[inline]
    pub fn is_made(&self) -> bool {
        !self.classes.is_empty()
    }

    /// Give the cache its lists for `classes` classes.
    #[cold]
    pub fn make(&mut self, classes: usize) {
        self.classes = vec![ClassList::default(); classes].into_boxed_slice();
    }

    #[inline]
    fn slab(&mut self, local: u32) -> &mut Slab {
        &mut self.slabs[local as usize]
    }

    /// Allocate a slot of class `c` for `requested` bytes: (address, size, handle).
    /// `None` when no slab of the class has a free slot (or `c` is no class), or
    /// when finding the first slab's lowest free slot needs a scan of its bitmap's
    /// summary: the fast path, which calls nothing. [`alloc`](Self::alloc) serves
    /// both cases, and takes the same slot.
    #[inline]
    pub fn alloc_fast(&mut self, c: usize, requested: usize) -> Option<(u64, usize, u64)> {
        self.alloc_in(c, requested, false)
    }

    /// [`alloc_fast`](Self::alloc_fast), scanning the bitmap's summary if `scan`.
    #[inline(always)]
    fn alloc_in(&mut self, c: usize, requested: usize, scan: bool) -> Option<(u64, usize, u64)> {
        let cl = self.classes.get_mut(c)?;
        let local = cl.head;
        let slab = self.slabs.get_mut(local as usize)?;
        let slot = if scan {
            slab.bits.take()?
        } else {
            slab.bits.take_hinted()?
        };
        let was_empty = slab.free == slab.slots;
        slab.free -= 1;
        let full = slab.free == 0;
        let size = slab.size;
        let ptr = slab.slot_ptr(slot);
        let handle = slab.base | slot as u64;
        cl.requested += requested as u64;
        // A branch, not arithmetic on a flag: a slab rarely leaves or turns empty.
        if was_empty {
            cl.empty -= 1;
        }
        if full {
            self.unlink(c, local);
        }
        self.stats.on_alloc(requested as u64, size as u64);
        Some((ptr, size, handle))
    }

    /// [`alloc_fast`](Self::alloc_fast), taking a slab from the depot first when the
    /// class has none with a free slot.
    pub fn alloc(&mut self, c: usize, requested: usize, sh: &Shared) -> Result<(u64, usize, u64)> {
        if let Some(r) = self.alloc_in(c, requested, true) {
            return Ok(r);
        }
        self.refill(c, sh)?;
        Ok(self
            .alloc_in(c, requested, true)
            .expect("a refilled class has a free slot"))
    }

    #[cold]
    fn refill(&mut self, c: usize, sh: &Shared) -> Result<u32> {
        if self.vacant.is_empty() && self.slabs.len() >= MAX_LOCAL {
            return Err(Error::Limit(format!(
                "a slab pool's thread cache holds at most {MAX_LOCAL} slabs"
            )));
        }
        let slab = sh.depot.lock().take(c, sh)?;
        Ok(self.adopt(slab))
    }

    /// Take an empty slab into this cache (which has room for it), with a new
    /// generation.
    fn adopt(&mut self, mut slab: Slab) -> u32 {
        let c = slab.class as usize;
        let slots = slab.slots as u64;
        let gen = self.next_gen;
        self.next_gen = self.next_gen.wrapping_add(1);
        let local = match self.vacant.pop() {
            Some(l) => l,
            None => {
                self.slabs.push(Slab::vacant());
                (self.slabs.len() - 1) as u32
            }
        };
        slab.base = Handle {
            gen,
            cache: self.id as usize,
            local,
            slot: 0,
        }
        .encode();
        self.slabs[local as usize] = slab;
        let cl = &mut self.classes[c];
        cl.slabs += 1;
        cl.empty += 1;
        cl.capacity += slots;
        self.link(c, local);
        local
    }

    /// Remove a slab (linked or not) from this cache.
    fn evict(&mut self, local: u32) -> Slab {
        let c = self.slab(local).class as usize;
        if self.slab(local).linked {
            self.unlink(c, local);
        }
        let slab = std::mem::replace(&mut self.slabs[local as usize], Slab::vacant());
        self.vacant.push(local);
        let cl = &mut self.classes[c];
        cl.slabs -= 1;
        cl.empty -= slab.is_empty() as u64;
        cl.capacity -= slab.slots as u64;
        slab
    }

    #[inline]
    fn link(&mut self, c: usize, local: u32) {
        let head = self.classes[c].head;
        if head != NIL {
            self.slab(head).prev = local;
        }
        let s = self.slab(local);
        s.prev = NIL;
        s.next = head;
        s.linked = true;
        self.classes[c].head = local;
    }

    #[inline]
    fn unlink(&mut self, c: usize, local: u32) {
        let s = self.slab(local);
        let (prev, next) = (s.prev, s.next);
        s.linked = false;
        s.prev = NIL;
        s.next = NIL;
        if prev == NIL {
            self.classes[c].head = next;
        } else {
            self.slab(prev).next = next;
        }
        if next != NIL {
            self.slab(next).prev = prev;
        }
    }

    /// Check that `block` is the slot its handle `h` names (live or not): its slab.
    #[inline]
    fn slab_of(&mut self, h: Handle, block: &Block) -> Result<&mut Slab> {
        self.slab_if(h, block)
            .ok_or(Error::NotOwned { ptr: block.ptr })
    }

    /// [`slab_of`](Self::slab_of) without the error: `None` if `block` is not the
    /// slot `h` names.
    #[inline(always)]
    fn slab_if(&mut self, h: Handle, block: &Block) -> Option<&mut Slab> {
        let slab = self.slabs.get_mut(h.local as usize)?;
        // A vacant place has no slots: the slot check refuses it.
        let slot = h.slot;
        if slab.base != Handle::base_of(block.handle)
            || slot >= slab.slots as usize
            || slab.slot_ptr(slot) != block.ptr.0
            || block.size != slab.size
            || block.requested > slab.size
        {
            return None;
        }
        Some(slab)
    }

    /// Check, without freeing it, that `block` is the live slot its handle names.
    pub fn check_live(&mut self, h: Handle, block: &Block) -> Result<()> {
        if self.slab_of(h, block)?.bits.is_free(h.slot) {
            return Err(Error::DoubleFree { ptr: block.ptr });
        }
        Ok(())
    }

    /// Free `block`, the slot its handle `h` names, after checking it as
    /// [`check_live`](Self::check_live) does. The fast path, which calls nothing and
    /// builds no error: a block it refuses changes nothing, and
    /// [`refusal`](Self::refusal), under the same lock, says why. When the free
    /// leaves the class with more empty slabs than the cache keeps, it says so, and
    /// the caller hands that slab on with [`give_away`](Self::give_away).
    #[inline]
    pub fn free_fast(&mut self, h: Handle, block: &Block) -> Freed {
        let local = h.local;
        let Some(slab) = self.slab_if(h, block) else {
            return Freed::Refused;
        };
        if !slab.bits.put(h.slot) {
            return Freed::Refused;
        }
        slab.free += 1;
        let (c, size) = (slab.class as usize, slab.size as u64);
        let (relink, empty) = (!slab.linked, slab.free == slab.slots);
        if relink {
            self.link(c, local);
        }
        let cl = &mut self.classes[c];
        // `requested` comes from the caller: never let a forged one wrap a count.
        cl.requested = cl.requested.saturating_sub(block.requested as u64);
        let mut extra = false;
        if empty {
            cl.empty += 1;
            extra = cl.empty > KEEP_IN_CACHE as u64;
        }
        self.stats.on_free(block.requested as u64, size);
        if extra {
            Freed::Extra
        } else {
            Freed::Done
        }
    }

    /// Why [`free_fast`](Self::free_fast) refused `block`: not a slot of this
    /// cache, or a slot already free.
    #[cold]
    #[inline(never)]
    pub fn refusal(&mut self, block: &Block) -> Error {
        let h = Handle::decode(block.handle);
        match self.check_live(h, block) {
            Err(e) => e,
            // Not reached: free_fast refuses only what check_live refuses.
            Ok(()) => Error::DoubleFree { ptr: block.ptr },
        }
    }

    /// [`free_fast`](Self::free_fast), handing an extra empty slab to the depot.
    pub fn free(&mut self, h: Handle, block: &Block, sh: &Shared) -> Result<()> {
        match self.free_fast(h, block) {
            Freed::Done => Ok(()),
            Freed::Extra => {
                self.give_away(h.local, sh);
                Ok(())
            }
            Freed::Refused => Err(self.refusal(block)),
        }
    }

    /// Whether the slab at `local` is of generation `gen`, empty, and one more empty
    /// slab of its class than the cache keeps.
    pub fn is_extra_empty(&self, local: u32, gen: u16) -> bool {
        match self.slabs.get(local as usize) {
            Some(s) if !s.is_vacant() => {
                s.gen() == gen
                    && s.is_empty()
                    && self.classes[s.class as usize].empty > KEEP_IN_CACHE as u64
            }
            _ => false,
        }
    }

    /// Hand an empty slab to the depot. The free that emptied it has succeeded: if
    /// the backend refuses the region back, the depot keeps the slab and the next
    /// trim reports the error.
    #[cold]
    pub fn give_away(&mut self, local: u32, sh: &Shared) {
        let slab = self.evict(local);
        let _ = sh.depot.lock().put(slab, sh);
    }

    /// Remove every empty slab from this cache.
    pub fn take_empty(&mut self) -> Vec<Slab> {
        let empty: Vec<u32> = (0..self.slabs.len() as u32)
            .filter(|&l| {
                let s = &self.slabs[l as usize];
                !s.is_vacant() && s.is_empty()
            })
            .collect();
        empty.into_iter().map(|l| self.evict(l)).collect()
    }

    /// Every slab, for the pool's drop.
    pub fn drain(&mut self) -> impl Iterator<Item = Slab> + '_ {
        self.slabs.drain(..).filter(|s| !s.is_vacant())
    }

    /// Check that every slab's bitmap, free count and list link agree, and that the
    /// class totals match the slabs.
    pub fn check(&self) -> std::result::Result<(), String> {
        let n = self.classes.len();
        let (mut slabs, mut empty, mut cap, mut live) =
            (vec![0u64; n], vec![0u64; n], vec![0u64; n], vec![0u64; n]);
        for (local, s) in self.slabs.iter().enumerate() {
            if s.is_vacant() {
                continue;
            }
            let at = format!("slab {local} of cache {} at {:#x}", self.id, s.start);
            if s.bits.count_free() != s.free as usize || !s.bits.consistent() {
                return Err(format!(
                    "{at}: bitmap disagrees with its free count {}",
                    s.free
                ));
            }
            if s.linked != (s.free > 0) {
                return Err(format!(
                    "{at}: listed {} with {} free slots",
                    s.linked, s.free
                ));
            }
            let c = s.class as usize;
            slabs[c] += 1;
            empty[c] += s.is_empty() as u64;
            cap[c] += s.slots as u64;
            live[c] += (s.slots - s.free) as u64;
        }
        for (c, cl) in self.classes.iter().enumerate() {
            if (cl.slabs, cl.empty, cl.capacity) != (slabs[c], empty[c], cap[c]) {
                return Err(format!("class {c}: counts {cl:?} disagree with its slabs"));
            }
            let (mut at, mut listed) = (cl.head, 0u64);
            while at != NIL && listed <= slabs[c] {
                let s = &self.slabs[at as usize];
                if s.is_vacant() {
                    return Err(format!("class {c}: list reaches vacant place {at}"));
                }
                if s.class as usize != c || !s.linked {
                    return Err(format!("class {c}: list holds slab {at} wrongly"));
                }
                listed += 1;
                at = s.next;
            }
            let with_free = self
                .slabs
                .iter()
                .filter(|s| !s.is_vacant() && s.class as usize == c && s.free > 0)
                .count();
            if listed != with_free as u64 {
                return Err(format!(
                    "class {c}: list has {listed} slabs, {with_free} have free slots"
                ));
            }
        }
        let blocks: u64 = live.iter().sum();
        if self.stats.blocks.current != blocks {
            return Err(format!(
                "{} live blocks counted, {blocks} in the slabs",
                self.stats.blocks.current
            ));
        }
        Ok(())
    }

    /// Slots in use per class, counted from the slabs (the hot path keeps no
    /// per-class count of them; the cache's block gauge has the total).
    pub fn live_slots(&self) -> Vec<u64> {
        let mut live = vec![0u64; self.classes.len()];
        for s in self.slabs.iter().filter(|s| !s.is_vacant()) {
            live[s.class as usize] += (s.slots - s.free) as u64;
        }
        live
    }

    /// The per-class lists.
    pub fn classes(&self) -> &[ClassList] {
        &self.classes
    }

    /// Host bytes this cache's metadata holds on the heap (the cache itself sits in
    /// the pool's array of caches and is counted there).
    pub fn metadata_bytes(&self) -> usize {
        self.classes.len() * std::mem::size_of::<ClassList>()
            + self.vacant.capacity() * 4
            + self.slabs.capacity() * std::mem::size_of::<Slab>()
            + self
                .slabs
                .iter()
                .map(|s| s.bits.heap_bytes())
                .sum::<usize>()
    }
}
