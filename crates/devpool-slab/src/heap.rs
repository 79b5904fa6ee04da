//! A thread cache: the slabs one thread allocates from, per class a list of those
//! with free slots, and the statistics of the blocks in them. Everything here is
//! plain data under the cache's lock, which only its thread takes on the hot path.

use crate::depot::Shared;
use crate::slab::{Slab, NIL};
use crate::table::{encode_handle, Entry};
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
    /// Slots in use.
    pub live: u64,
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
            live: 0,
            requested: 0,
        }
    }
}

#[inline]
fn gauge_add(g: &mut Gauge, v: u64) {
    g.current += v;
    g.peak = g.peak.max(g.current);
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

/// A thread cache.
#[derive(Debug)]
pub(crate) struct Heap {
    id: u8,
    slabs: Vec<Option<Slab>>,
    vacant: Vec<u32>,
    classes: Box<[ClassList]>,
    pub stats: CacheStats,
}

impl Heap {
    pub fn new(id: u8, classes: usize) -> Self {
        Heap {
            id,
            slabs: Vec::new(),
            vacant: Vec::new(),
            classes: vec![ClassList::default(); classes].into_boxed_slice(),
            stats: CacheStats::default(),
        }
    }

    #[inline]
    fn slab(&mut self, local: u32) -> &mut Slab {
        self.slabs[local as usize]
            .as_mut()
            .expect("a listed slab exists")
    }

    /// Allocate a slot of class `c` for `requested` bytes: (address, size, handle).
    #[inline]
    pub fn alloc(&mut self, c: usize, requested: usize, sh: &Shared) -> Result<(u64, usize, u64)> {
        let mut local = self.classes[c].head;
        if local == NIL {
            local = self.refill(c, sh)?;
        }
        let slab = self.slab(local);
        let was_empty = slab.is_empty();
        let slot = slab.bits.take().expect("a listed slab has a free slot");
        slab.free -= 1;
        let full = slab.free == 0;
        let (ptr, size) = (slab.slot_ptr(slot), slab.size);
        let handle = encode_handle(slab.idx, slot, slab.gen);
        if full {
            self.unlink(c, local);
        }
        let cl = &mut self.classes[c];
        cl.live += 1;
        cl.requested += requested as u64;
        cl.empty -= was_empty as u64;
        let st = &mut self.stats;
        gauge_add(&mut st.live, requested as u64);
        gauge_add(&mut st.allocated, size as u64);
        gauge_add(&mut st.blocks, 1);
        st.allocations += 1;
        Ok((ptr, size, handle))
    }

    #[cold]
    fn refill(&mut self, c: usize, sh: &Shared) -> Result<u32> {
        let slab = sh.depot.lock().take(c, sh)?;
        Ok(self.adopt(slab, sh))
    }

    /// Take an empty slab into this cache.
    fn adopt(&mut self, slab: Slab, sh: &Shared) -> u32 {
        let c = slab.class as usize;
        let (idx, gen, slots) = (slab.idx, slab.gen, slab.slots as u64);
        let local = match self.vacant.pop() {
            Some(l) => {
                self.slabs[l as usize] = Some(slab);
                l
            }
            None => {
                self.slabs.push(Some(slab));
                (self.slabs.len() - 1) as u32
            }
        };
        sh.table.set(
            idx,
            Entry {
                present: true,
                owner: self.id,
                local,
                gen,
            },
        );
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
        let slab = self.slabs[local as usize]
            .take()
            .expect("evicted slab exists");
        self.vacant.push(local);
        let cl = &mut self.classes[c];
        cl.slabs -= 1;
        cl.empty -= slab.is_empty() as u64;
        cl.capacity -= slab.slots as u64;
        slab
    }

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

    /// Check that `block` is slot `slot` of the slab at `local`, live; free it too
    /// when `free` is set.
    #[inline]
    pub fn free(
        &mut self,
        local: u32,
        slot: usize,
        block: &Block,
        free: bool,
        sh: &Shared,
    ) -> Result<()> {
        let Some(slab) = self.slabs.get_mut(local as usize).and_then(Option::as_mut) else {
            return Err(Error::NotOwned { ptr: block.ptr });
        };
        if slot >= slab.slots as usize
            || slab.slot_ptr(slot) != block.ptr.0
            || block.size != slab.size
            || block.requested > slab.size
        {
            return Err(Error::NotOwned { ptr: block.ptr });
        }
        if slab.bits.is_free(slot) {
            return Err(Error::DoubleFree { ptr: block.ptr });
        }
        if !free {
            return Ok(());
        }
        slab.bits.put(slot);
        slab.free += 1;
        let (c, size) = (slab.class as usize, slab.size as u64);
        let (relink, empty) = (!slab.linked, slab.is_empty());
        if relink {
            self.link(c, local);
        }
        let cl = &mut self.classes[c];
        cl.live -= 1;
        // `requested` comes from the caller: never let a forged one wrap a count.
        cl.requested = cl.requested.saturating_sub(block.requested as u64);
        cl.empty += empty as u64;
        let give_away = empty && cl.empty > KEEP_IN_CACHE as u64;
        let st = &mut self.stats;
        st.live.current = st.live.current.saturating_sub(block.requested as u64);
        st.allocated.current -= size;
        st.blocks.current -= 1;
        st.frees += 1;
        if give_away {
            self.give_away(local, sh);
        }
        Ok(())
    }

    /// Hand an empty slab to the depot. The free that emptied it has succeeded: if
    /// the backend refuses the region back, the depot keeps the slab and the next
    /// trim reports the error.
    #[cold]
    fn give_away(&mut self, local: u32, sh: &Shared) {
        let slab = self.evict(local);
        let _ = sh.depot.lock().put(slab, sh);
    }

    /// Remove every empty slab from this cache.
    pub fn take_empty(&mut self) -> Vec<Slab> {
        let empty: Vec<u32> = (0..self.slabs.len() as u32)
            .filter(|&l| self.slabs[l as usize].as_ref().is_some_and(Slab::is_empty))
            .collect();
        empty.into_iter().map(|l| self.evict(l)).collect()
    }

    /// Every slab, for the pool's drop.
    pub fn drain(&mut self) -> impl Iterator<Item = Slab> + '_ {
        self.slabs.drain(..).flatten()
    }

    /// Check that every slab's bitmap, free count, list link and table entry agree,
    /// and that the class totals match the slabs.
    pub fn check(&self, sh: &Shared) -> std::result::Result<(), String> {
        let n = self.classes.len();
        let (mut slabs, mut empty, mut cap, mut live) =
            (vec![0u64; n], vec![0u64; n], vec![0u64; n], vec![0u64; n]);
        for (local, slab) in self.slabs.iter().enumerate() {
            let Some(s) = slab else { continue };
            let at = format!("slab {} at {:#x}", s.idx, s.start);
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
            let want = Entry {
                present: true,
                owner: self.id,
                local: local as u32,
                gen: s.gen,
            };
            if sh.table.get(s.idx) != Some(want) {
                return Err(format!(
                    "{at}: table entry {:?}, want {want:?}",
                    sh.table.get(s.idx)
                ));
            }
            let c = s.class as usize;
            slabs[c] += 1;
            empty[c] += s.is_empty() as u64;
            cap[c] += s.slots as u64;
            live[c] += (s.slots - s.free) as u64;
        }
        for (c, cl) in self.classes.iter().enumerate() {
            if (cl.slabs, cl.empty, cl.capacity, cl.live) != (slabs[c], empty[c], cap[c], live[c]) {
                return Err(format!("class {c}: counts {cl:?} disagree with its slabs"));
            }
            let (mut at, mut listed) = (cl.head, 0u64);
            while at != NIL && listed <= slabs[c] {
                let s = self.slabs[at as usize]
                    .as_ref()
                    .ok_or("list reaches a vacant slot")?;
                if s.class as usize != c || !s.linked {
                    return Err(format!("class {c}: list holds slab {} wrongly", s.idx));
                }
                listed += 1;
                at = s.next;
            }
            let with_free = self
                .slabs
                .iter()
                .flatten()
                .filter(|s| s.class as usize == c && s.free > 0)
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

    /// The per-class lists.
    pub fn classes(&self) -> &[ClassList] {
        &self.classes
    }

    /// Host bytes of this cache's metadata.
    pub fn metadata_bytes(&self) -> usize {
        std::mem::size_of::<Heap>()
            + self.classes.len() * std::mem::size_of::<ClassList>()
            + self.vacant.capacity() * 4
            + self.slabs.capacity() * std::mem::size_of::<Option<Slab>>()
            + self
                .slabs
                .iter()
                .flatten()
                .map(|s| s.bits.heap_bytes())
                .sum::<usize>()
    }
}
