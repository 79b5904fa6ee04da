//! A fast hash for device addresses, the keys of every map a replay keeps.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Multiply-rotate hash of one `u64`: addresses differ in their middle bits, which a
/// multiplication spreads into the high half; the rotation brings them down to the
/// bits a table indexes by.
#[derive(Default, Clone, Copy)]
pub(crate) struct AddrHasher(u64);

impl Hasher for AddrHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }

    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0.rotate_left(32)
    }
}

/// A map keyed by addresses.
pub(crate) type AddrMap<V> = HashMap<u64, V, BuildHasherDefault<AddrHasher>>;

/// An empty map with room for `n` entries.
pub(crate) fn addr_map<V>(n: usize) -> AddrMap<V> {
    AddrMap::with_capacity_and_hasher(n, Default::default())
}
