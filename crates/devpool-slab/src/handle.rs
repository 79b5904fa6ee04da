//! A block's handle: where its slot is, so that a free finds it without a search.
//!
//! ```text
//! handle: | 2 bits unused | generation: 16 | cache: 5 | local slab: 20 | slot: 21 |
//! ```
//!
//! A slab moves from one thread cache to another only through the depot, and only
//! when it is empty, so while a block is live its slab stays in the cache that made
//! it, at the same local index. The generation tells that slab from any slab the
//! cache put at that index later: a stale handle (a block freed twice after its slab
//! went away) does not match and is refused.

/// Bits of the slot number: a slab holds at most 2^21 slots (512 MiB of 256 B slots).
pub(crate) const SLOT_BITS: u32 = 21;
/// Bits of the local slab index in a cache.
pub(crate) const LOCAL_BITS: u32 = 20;
/// Bits of the cache number.
pub(crate) const CACHE_BITS: u32 = 5;
/// Slabs one thread cache can hold at once.
pub(crate) const MAX_LOCAL: usize = 1 << LOCAL_BITS;

const LOCAL_SHIFT: u32 = SLOT_BITS;
const CACHE_SHIFT: u32 = LOCAL_SHIFT + LOCAL_BITS;
const GEN_SHIFT: u32 = CACHE_SHIFT + CACHE_BITS;

// Checked when the crate compiles: the handle fills 62 bits (a router keeps the top
// two), and every thread cache has a number.
const _: () = assert!(GEN_SHIFT + 16 == devpool_core::POOL_HANDLE_BITS);
const _: () = assert!(1 << CACHE_BITS >= crate::THREAD_CACHES);

/// Where a block lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Handle {
    /// Generation of the slab at `local` when the block was handed out.
    pub gen: u16,
    /// The thread cache that holds the slab.
    pub cache: usize,
    /// The slab's index in that cache.
    pub local: u32,
    /// The slot in the slab.
    pub slot: usize,
}

impl Handle {
    /// The handle as a block carries it (the top two bits clear).
    #[inline]
    pub fn encode(self) -> u64 {
        ((self.gen as u64) << GEN_SHIFT)
            | ((self.cache as u64) << CACHE_SHIFT)
            | ((self.local as u64) << LOCAL_SHIFT)
            | self.slot as u64
    }

    /// The handle of slot 0 of the slab `h` names: `h` without its slot and the
    /// top two bits. It equals that slab's [`base`](crate::slab::Slab::base) exactly
    /// when the generations match (cache and place match by construction).
    #[inline]
    pub fn base_of(h: u64) -> u64 {
        h & devpool_core::POOL_HANDLE_MASK & !((1 << SLOT_BITS) - 1)
    }

    /// The handle of a block; the top two bits are ignored.
    #[inline]
    pub fn decode(h: u64) -> Handle {
        Handle {
            gen: (h >> GEN_SHIFT) as u16,
            cache: ((h >> CACHE_SHIFT) & ((1 << CACHE_BITS) - 1)) as usize,
            local: ((h >> LOCAL_SHIFT) & ((1 << LOCAL_BITS) - 1)) as u32,
            slot: (h & ((1 << SLOT_BITS) - 1)) as usize,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_round_trip_in_62_bits() {
        for h in [
            Handle {
                gen: 0,
                cache: 0,
                local: 0,
                slot: 0,
            },
            Handle {
                gen: u16::MAX,
                cache: (1 << CACHE_BITS) - 1,
                local: MAX_LOCAL as u32 - 1,
                slot: (1 << SLOT_BITS) - 1,
            },
            Handle {
                gen: 9,
                cache: 17,
                local: 12345,
                slot: 678,
            },
        ] {
            let v = h.encode();
            assert_eq!(v >> 62, 0);
            assert_eq!(Handle::decode(v), h);
            assert_eq!(Handle::decode(v | (3 << 62)), h);
        }
    }
}
