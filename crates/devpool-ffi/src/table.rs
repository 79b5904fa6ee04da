//! [`PtrTable`]: the live blocks of one device by address, so that a bare pointer
//! from C can be turned back into the [`Block`] the allocator wants.
//!
//! 64 shards, each a spin lock over an open-addressed table, chosen by a hash of the
//! address: threads freeing different blocks rarely meet on one lock, and taking
//! one costs a single atomic swap (a parking mutex pays a second atomic operation
//! to give it back).
//!
//! The table is on every allocation and free of the C ABI, so its cost must not
//! grow with the number of live blocks:
//!
//! - **One cache line per lookup, usually.** A slot holds the whole block in 40
//!   bytes (address and device in one word, then size, requested size, stream and
//!   handle), found by linear probing at a load of at most one half, so a lookup
//!   reads about 1.5 slots and no separate key or control array.
//! - **No operation pays for a resize.** When a shard's slots are half full it
//!   starts a table twice as large and every later operation moves the entries of
//!   a few old slots into it ([`MOVE_PER_OP`]); lookups read both tables until the
//!   old one is empty. The new slots come zeroed from the system allocator (fresh
//!   pages for large tables), so starting a resize writes nothing.
//! - Removal shifts the following entries of the probe run back (no tombstones) in
//!   the current table; in a table being emptied it leaves a tombstone, since moving
//!   entries there could carry one behind the migration cursor.
//!
//! Blocks the slots cannot hold (an address that is null or not 256-byte aligned,
//! a device ordinal of 256 or more) go to a small map on the side; the allocators
//! never make such blocks.

use crossbeam_utils::CachePadded;
use devpool_core::SpinLock;
use devpool_core::{Block, DeviceId, DevicePtr, StreamId};
use parking_lot::Mutex;
use std::collections::HashMap;

const SHARDS: usize = 64;
/// Old slots whose entries each operation moves into a growing shard's new table.
/// A table doubles when half full and the next doubling comes after as many
/// inserts as it had entries, more than enough operations to empty the old table.
const MOVE_PER_OP: usize = 4;
/// Slots of a shard's first table.
const FIRST_SLOTS: usize = 16;
/// A slot's first word: empty.
const EMPTY: u64 = 0;
/// A slot's first word: an entry was here (only in a table being emptied).
const GONE: u64 = 1;

/// Address (256-byte aligned) with the device ordinal in its low byte, size,
/// requested size, stream, handle.
type Slot = [u64; 5];

#[inline]
fn hash(addr: u64) -> u64 {
    (addr >> 8).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// The first word of a block's slot, or `None` if the block does not fit a slot.
#[inline]
fn key_of(block: &Block) -> Option<u64> {
    let a = block.ptr.0;
    (a != 0 && a & 0xFF == 0 && block.device.0 < 256).then_some(a | block.device.0 as u64)
}

#[inline]
fn pack(key: u64, b: &Block) -> Slot {
    [
        key,
        b.size as u64,
        b.requested as u64,
        b.stream.raw(),
        b.handle,
    ]
}

#[inline]
fn unpack(s: &Slot) -> Block {
    Block {
        ptr: DevicePtr(s[0] & !0xFF),
        size: s[1] as usize,
        requested: s[2] as usize,
        // SAFETY: packed from the block's own stream, a stream of its device.
        stream: unsafe { StreamId::from_raw(s[3]) },
        device: DeviceId((s[0] & 0xFF) as u32),
        handle: s[4],
    }
}

/// One open-addressed table of a shard.
struct Slots {
    slots: Vec<Slot>,
    /// `log2` of the slot count.
    bits: u32,
    /// Live entries.
    live: usize,
}

impl Slots {
    fn new(n: usize) -> Self {
        debug_assert!(n.is_power_of_two() && n >= 2);
        Slots {
            // All-zero words: the allocator hands out zeroed memory without writing it.
            slots: vec![[EMPTY; 5]; n],
            bits: n.trailing_zeros(),
            live: 0,
        }
    }

    #[inline]
    fn home(&self, addr: u64) -> usize {
        // The top six bits of the hash chose the shard: take the ones below.
        ((hash(addr) << 6) >> (64 - self.bits)) as usize
    }

    #[inline]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// The slot holding `addr`, if any.
    #[inline]
    fn find(&self, addr: u64) -> Option<usize> {
        self.find_or_vacant(addr).ok()
    }

    /// The slot holding `addr` (`Ok`), or the empty slot that ends its probe run
    /// (`Err`).
    #[inline]
    fn find_or_vacant(&self, addr: u64) -> Result<usize, usize> {
        let mut i = self.home(addr);
        loop {
            let k = self.slots[i][0];
            if k == EMPTY {
                return Err(i);
            }
            if k & !0xFF == addr && k != GONE {
                return Ok(i);
            }
            i = (i + 1) & self.mask();
        }
    }

    /// Put an entry into the empty slot `i` that [`find_or_vacant`](Self::find_or_vacant)
    /// gave for its address.
    #[inline]
    fn fill(&mut self, i: usize, s: Slot) {
        debug_assert_eq!(self.slots[i][0], EMPTY);
        self.slots[i] = s;
        self.live += 1;
    }

    /// Put an entry whose address is in no slot (the table is below half full).
    #[inline]
    fn put(&mut self, s: Slot) {
        let mut i = self.home(s[0] & !0xFF);
        while self.slots[i][0] != EMPTY {
            i = (i + 1) & self.mask();
        }
        self.slots[i] = s;
        self.live += 1;
    }

    /// Take the entry at `i` out, shifting the rest of its probe run back.
    #[inline]
    fn take(&mut self, mut i: usize) -> Slot {
        let out = self.slots[i];
        self.live -= 1;
        let mask = self.mask();
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let k = self.slots[j][0];
            if k == EMPTY {
                break;
            }
            // Move the entry at `j` into the hole unless its home lies in (i, j].
            let h = self.home(k & !0xFF);
            if (j.wrapping_sub(h) & mask) >= (j.wrapping_sub(i) & mask) {
                self.slots[i] = self.slots[j];
                i = j;
            }
        }
        self.slots[i] = [EMPTY; 5];
        out
    }
}

/// One shard: its table, and while it grows the old table being emptied.
struct Shard {
    cur: Slots,
    old: Option<(Slots, usize)>,
}

impl Default for Shard {
    fn default() -> Self {
        Shard {
            cur: Slots::new(FIRST_SLOTS),
            old: None,
        }
    }
}

impl Shard {
    /// Move the entries of the next few old slots into the current table, if a
    /// table is being emptied (rarely: the check is all most operations pay).
    #[inline]
    fn migrate(&mut self) {
        if self.old.is_some() {
            self.migrate_some();
        }
    }

    #[cold]
    fn migrate_some(&mut self) {
        let Some((old, at)) = &mut self.old else {
            return;
        };
        let end = (*at + MOVE_PER_OP).min(old.slots.len());
        for i in *at..end {
            let s = old.slots[i];
            if s[0] > GONE {
                old.slots[i][0] = GONE;
                old.live -= 1;
                self.cur.put(s);
            }
        }
        *at = end;
        if end == old.slots.len() {
            debug_assert_eq!(old.live, 0);
            self.old = None;
        }
    }

    fn get(&self, addr: u64) -> Option<Block> {
        if let Some(i) = self.cur.find(addr) {
            return Some(unpack(&self.cur.slots[i]));
        }
        let (old, _) = self.old.as_ref()?;
        old.find(addr).map(|i| unpack(&old.slots[i]))
    }

    #[inline]
    fn remove(&mut self, addr: u64) -> Option<Block> {
        self.migrate();
        self.take(addr)
    }

    /// Take the entry of `addr` out of whichever table holds it.
    #[inline]
    fn take(&mut self, addr: u64) -> Option<Block> {
        if let Some(i) = self.cur.find(addr) {
            return Some(unpack(&self.cur.take(i)));
        }
        self.take_old(addr)
    }

    /// [`take`](Self::take) from the table being emptied.
    #[cold]
    fn take_old(&mut self, addr: u64) -> Option<Block> {
        let (old, _) = self.old.as_mut()?;
        let i = old.find(addr)?;
        let s = old.slots[i];
        old.slots[i][0] = GONE;
        old.live -= 1;
        Some(unpack(&s))
    }

    #[inline]
    fn insert(&mut self, key: u64, block: &Block) -> Option<Block> {
        self.migrate();
        let addr = key & !0xFF;
        // One probe finds the address (an allocator bug) or the empty slot to fill.
        let vacant = match self.cur.find_or_vacant(addr) {
            Ok(i) => return self.replace(i, key, block),
            Err(i) => i,
        };
        let prev = match self.old {
            Some(_) => self.take(addr),
            None => None,
        };
        if (self.cur.live + 1) * 2 <= self.cur.slots.len() {
            self.cur.fill(vacant, pack(key, block));
            return prev;
        }
        self.grow_and_put(key, block);
        prev
    }

    /// The slot at `i` of the current table holds `key`'s address already: put the
    /// new block there and return the old one.
    #[cold]
    fn replace(&mut self, i: usize, key: u64, block: &Block) -> Option<Block> {
        let prev = unpack(&self.cur.slots[i]);
        self.cur.slots[i] = pack(key, block);
        Some(prev)
    }

    /// Start a table twice as large and put the block there.
    #[cold]
    fn grow_and_put(&mut self, key: u64, block: &Block) {
        // The old table empties long before the new one is half full.
        debug_assert!(self.old.is_none());
        while self.old.is_some() {
            self.migrate();
        }
        let bigger = Slots::new(self.cur.slots.len() * 2);
        self.old = Some((std::mem::replace(&mut self.cur, bigger), 0));
        self.migrate();
        self.cur.put(pack(key, block));
    }

    fn len(&self) -> usize {
        self.cur.live + self.old.as_ref().map_or(0, |(o, _)| o.live)
    }
}

/// Live blocks by address, sharded.
pub(crate) struct PtrTable {
    shards: Box<[CachePadded<SpinLock<Shard>>]>,
    /// Blocks that do not fit a slot (none from devpool's allocators).
    odd: Mutex<HashMap<u64, Block>>,
}

impl PtrTable {
    pub(crate) fn new() -> Self {
        PtrTable {
            shards: (0..SHARDS)
                .map(|_| CachePadded::new(SpinLock::new(Shard::default())))
                .collect(),
            odd: Mutex::new(HashMap::new()),
        }
    }

    #[inline]
    fn shard(&self, addr: u64) -> &SpinLock<Shard> {
        &self.shards[(hash(addr) >> 58) as usize % SHARDS]
    }

    /// Whether `addr` could be in a slot (else it can only be on the side).
    #[inline]
    fn fits(addr: u64) -> bool {
        addr != 0 && addr & 0xFF == 0
    }

    /// Remember a live block; returns the block that was already there under the
    /// same address, if any (which would be an allocator bug).
    #[inline]
    pub(crate) fn insert(&self, block: Block) -> Option<Block> {
        match key_of(&block) {
            Some(key) => self.shard(block.ptr.0).lock().insert(key, &block),
            None => self.odd.lock().insert(block.ptr.0, block),
        }
    }

    /// Forget the block at `addr` and return it.
    #[inline]
    pub(crate) fn remove(&self, addr: u64) -> Option<Block> {
        if Self::fits(addr) {
            if let Some(b) = self.shard(addr).lock().remove(addr) {
                return Some(b);
            }
        }
        self.remove_odd(addr)
    }

    #[cold]
    fn remove_odd(&self, addr: u64) -> Option<Block> {
        self.odd.lock().remove(&addr)
    }

    /// A copy of the block at `addr`.
    #[inline]
    pub(crate) fn get(&self, addr: u64) -> Option<Block> {
        if Self::fits(addr) {
            if let Some(b) = self.shard(addr).lock().get(addr) {
                return Some(b);
            }
        }
        self.odd.lock().get(&addr).copied()
    }

    /// Live blocks (a sum over the shards, each read under its lock).
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum::<usize>() + self.odd.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(addr: u64) -> Block {
        Block {
            ptr: DevicePtr(addr),
            size: 256,
            requested: 100,
            stream: StreamId::DEFAULT,
            device: DeviceId(0),
            handle: addr >> 8,
        }
    }

    #[test]
    fn insert_get_remove() {
        let t = PtrTable::new();
        let addrs: Vec<u64> = (0..1000u64).map(|i| 0x7f00_0000_0000 + i * 256).collect();
        for &a in &addrs {
            assert_eq!(t.insert(block(a)), None);
        }
        assert_eq!(t.len(), addrs.len());
        assert_eq!(t.get(addrs[7]), Some(block(addrs[7])));
        assert_eq!(t.insert(block(addrs[7])), Some(block(addrs[7])));
        assert_eq!(t.len(), addrs.len());
        for &a in &addrs {
            assert_eq!(t.remove(a), Some(block(a)));
            assert_eq!(t.remove(a), None);
        }
        assert_eq!(t.len(), 0);
        assert_eq!(t.get(addrs[0]), None);
    }

    #[test]
    fn every_field_round_trips_and_odd_blocks_are_kept_too() {
        let t = PtrTable::new();
        let full = Block {
            ptr: DevicePtr(0x7f12_3456_7800),
            size: usize::MAX,
            requested: usize::MAX - 1,
            // SAFETY: a value the table stores and gives back; nothing uses it as a
            // stream.
            stream: unsafe { StreamId::from_raw(u64::MAX - 3) },
            device: DeviceId(255),
            handle: u64::MAX,
        };
        let odd = [
            Block {
                ptr: DevicePtr(0x7f00_0000_0010),
                ..full
            },
            Block {
                ptr: DevicePtr(0),
                ..full
            },
            Block {
                device: DeviceId(256),
                ptr: DevicePtr(0x7f00_0000_1000),
                ..full
            },
        ];
        for b in std::iter::once(&full).chain(&odd) {
            assert_eq!(t.insert(*b), None);
        }
        assert_eq!(t.len(), 4);
        for b in std::iter::once(&full).chain(&odd) {
            assert_eq!(t.get(b.ptr.0), Some(*b));
            assert_eq!(t.remove(b.ptr.0), Some(*b));
        }
        assert_eq!(t.len(), 0);
    }

    /// Against a `HashMap`, through many resizes, with entries removed and added
    /// while shards migrate: every lookup agrees, and `len` with the model's.
    #[test]
    fn agrees_with_a_map_through_growth_and_removal() {
        let t = PtrTable::new();
        let mut model: HashMap<u64, Block> = HashMap::new();
        let mut x = 0x1234_5678u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut live: Vec<u64> = Vec::new();
        for step in 0..60_000u64 {
            let r = next();
            if live.is_empty() || r % 3 != 0 {
                // Addresses in a few dense runs, as allocators make them.
                let a = 0x7f00_0000_0000 + (r >> 40 & 3) * (1 << 36) + (r >> 8 & 0xF_FFFF) * 256;
                let mut b = block(a);
                b.handle = step;
                let was = model.insert(a, b);
                assert_eq!(t.insert(b), was, "insert {a:#x}");
                if was.is_none() {
                    live.push(a);
                }
            } else {
                let a = live.swap_remove((r >> 20) as usize % live.len());
                assert_eq!(t.remove(a), model.remove(&a), "remove {a:#x}");
                assert_eq!(t.get(a), None);
            }
            if step % 1000 == 0 {
                assert_eq!(t.len(), model.len());
                for a in live.iter().take(50) {
                    assert_eq!(t.get(*a), model.get(a).copied());
                }
            }
        }
        assert_eq!(t.len(), model.len());
        for (a, b) in &model {
            assert_eq!(t.remove(*a), Some(*b));
        }
        assert_eq!(t.len(), 0);
    }

    /// A shard in the middle of a resize: entries still in the old table are found,
    /// removed (left as tombstones) and replaced, and the old table empties.
    #[test]
    fn a_growing_shard_serves_both_tables() {
        let mut sh = Shard::default();
        let a = |i: u64| 0x7f00_0000_0000 + i * 256;
        let n = FIRST_SLOTS as u64 / 2;
        for i in 0..n {
            assert_eq!(sh.insert(a(i), &block(a(i))), None);
        }
        assert!(sh.old.is_none(), "half full: not grown yet");
        assert_eq!(sh.insert(a(n), &block(a(n))), None);
        // Where an entry waits in the old table, and where the move has got to.
        let pos = |sh: &Shard, i: u64| sh.old.as_ref().and_then(|(o, _)| o.find(a(i)));
        let cursor = |sh: &Shard| sh.old.as_ref().map_or(usize::MAX, |(_, at)| *at);
        let in_old = |sh: &Shard, i: u64| pos(sh, i).is_some();
        assert!(sh.old.is_some(), "grew");
        let mut waiting: Vec<u64> = (0..n).filter(|&i| in_old(&sh, i)).collect();
        waiting.sort_by_key(|&i| pos(&sh, i));
        assert!(
            waiting.len() >= 2,
            "some entries wait in the old table: {waiting:?}"
        );
        let (x, y) = (waiting[waiting.len() - 1], waiting[waiting.len() - 2]);
        // The next operation moves MOVE_PER_OP slots: `x` stays in the old table.
        assert!(pos(&sh, x).unwrap() >= cursor(&sh) + MOVE_PER_OP);
        assert_eq!(sh.get(a(x)), Some(block(a(x))));
        assert_eq!(sh.remove(a(x)), Some(block(a(x))));
        assert_eq!(sh.get(a(x)), None);
        let mut again = block(a(y));
        again.handle = 7;
        if in_old(&sh, y) {
            assert_eq!(sh.insert(a(y), &again), Some(block(a(y))));
        }
        for _ in 0..FIRST_SLOTS {
            sh.remove(1 << 60);
        }
        assert!(sh.old.is_none(), "the old table emptied");
        assert_eq!(sh.len(), n as usize);
        for i in (0..=n).filter(|&i| i != x) {
            let got = sh.remove(a(i)).unwrap();
            assert_eq!(got.ptr.0, a(i));
        }
        assert_eq!(sh.len(), 0);
    }

    #[test]
    fn consecutive_addresses_spread_over_shards() {
        let t = PtrTable::new();
        let mut used = std::collections::HashSet::new();
        for i in 0..256u64 {
            used.insert(t.shard(0x7f00_0000_0000 + i * 256) as *const _ as usize);
        }
        // 256 consecutive blocks must not all land on a handful of locks.
        assert!(used.len() > SHARDS / 2, "{} shards used", used.len());
    }
}
