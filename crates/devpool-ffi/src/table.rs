//! [`PtrTable`]: the live blocks of one device by address, so that a bare pointer
//! from C can be turned back into the [`Block`] the allocator wants.
//!
//! 64 shards, each a `parking_lot` mutex over a hash map, chosen by a hash of the
//! address: threads freeing different blocks rarely meet on one lock.

use crossbeam_utils::CachePadded;
use devpool_core::Block;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

const SHARDS: usize = 64;

/// A hasher for device addresses: one multiply. Addresses are at least 256-byte
/// aligned, so the low bits are dropped before mixing.
#[derive(Default)]
pub(crate) struct AddrHasher(u64);

impl Hasher for AddrHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.0 = (x >> 8).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type Shard = HashMap<u64, Block, BuildHasherDefault<AddrHasher>>;

/// Live blocks by address, sharded.
pub(crate) struct PtrTable {
    shards: Box<[CachePadded<Mutex<Shard>>]>,
}

impl PtrTable {
    pub(crate) fn new() -> Self {
        PtrTable {
            shards: (0..SHARDS)
                .map(|_| CachePadded::new(Mutex::new(Shard::default())))
                .collect(),
        }
    }

    #[inline]
    fn shard(&self, addr: u64) -> &Mutex<Shard> {
        // The top bits of a multiplicative hash of the address above its alignment.
        let h = (addr >> 8).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58;
        &self.shards[h as usize % SHARDS]
    }

    /// Remember a live block; returns the block that was already there under the
    /// same address, if any (which would be an allocator bug).
    #[inline]
    pub(crate) fn insert(&self, block: Block) -> Option<Block> {
        self.shard(block.ptr.0).lock().insert(block.ptr.0, block)
    }

    /// Forget the block at `addr` and return it.
    #[inline]
    pub(crate) fn remove(&self, addr: u64) -> Option<Block> {
        self.shard(addr).lock().remove(&addr)
    }

    /// A copy of the block at `addr`.
    #[inline]
    pub(crate) fn get(&self, addr: u64) -> Option<Block> {
        self.shard(addr).lock().get(&addr).copied()
    }

    /// Live blocks (a sum over the shards, each read under its lock).
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use devpool_core::{DeviceId, DevicePtr, StreamId};

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
        for &a in &addrs {
            assert_eq!(t.remove(a), Some(block(a)));
            assert_eq!(t.remove(a), None);
        }
        assert_eq!(t.len(), 0);
        assert_eq!(t.get(addrs[0]), None);
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
