//! The slab table: for each slab number, who holds the slab now (a thread cache or
//! the depot) and its generation. Lock-free to read; written only by whoever holds
//! the slab's current owner's lock. It grows in segments that never move, so a
//! reader needs no lock to find an entry.
//!
//! A block's handle carries its slab number, slot and the slab's generation:
//!
//! ```text
//! handle: | 2 bits unused | generation: 16 | slab: 23 | slot: 23 |
//! entry:  | present: 1 | 15 unused | owner: 8 | local index: 24 | generation: 16 |
//! ```

use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Bits of the slot number in a handle.
pub(crate) const SLOT_BITS: u32 = 23;
/// Bits of the slab number in a handle.
pub(crate) const SLAB_BITS: u32 = 23;
/// How many slabs one pool can hold at once.
pub(crate) const MAX_SLABS: usize = 1 << SLAB_BITS;
const GEN_BITS: u32 = 16;
const FIRST_SEGMENT: usize = 64;
const SEGMENTS: usize = 1 + (SLAB_BITS - FIRST_SEGMENT.trailing_zeros()) as usize;

/// The owner field of a slab held by the depot.
pub(crate) const DEPOT: u8 = u8::MAX;

const PRESENT: u64 = 1 << 63;

/// A block's handle.
#[inline]
pub(crate) fn encode_handle(slab: u32, slot: usize, gen: u16) -> u64 {
    ((gen as u64) << (SLAB_BITS + SLOT_BITS)) | ((slab as u64) << SLOT_BITS) | slot as u64
}

/// (slab, slot, generation) of a handle; the top two bits are ignored.
#[inline]
pub(crate) fn decode_handle(h: u64) -> (u32, usize, u16) {
    let slot = (h & ((1 << SLOT_BITS) - 1)) as usize;
    let slab = ((h >> SLOT_BITS) & ((1 << SLAB_BITS) - 1)) as u32;
    let gen = ((h >> (SLAB_BITS + SLOT_BITS)) & ((1 << GEN_BITS) - 1)) as u16;
    (slab, slot, gen)
}

/// A decoded table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub present: bool,
    pub owner: u8,
    pub local: u32,
    pub gen: u16,
}

impl Entry {
    /// The entry stored in a cell.
    #[inline]
    pub fn decode(v: u64) -> Entry {
        Entry {
            present: v & PRESENT != 0,
            owner: (v >> 40) as u8,
            local: ((v >> 16) & 0xFF_FFFF) as u32,
            gen: v as u16,
        }
    }

    #[inline]
    fn encode(self) -> u64 {
        (if self.present { PRESENT } else { 0 })
            | ((self.owner as u64) << 40)
            | (((self.local & 0xFF_FFFF) as u64) << 16)
            | self.gen as u64
    }
}

/// Cells per chunk: one chunk fills one padded 128-byte line pair.
const CHUNK: usize = 16;

/// A segment: chunks of cells, each chunk alone in its cache lines. Every thread
/// reads the table; the padding keeps it from sharing a line with whatever the
/// thread that made the segment writes next to it.
type Segment = Box<[CachePadded<[AtomicU64; CHUNK]>]>;

/// Slab number to [`Entry`].
#[derive(Debug, Default)]
pub(crate) struct SlabTable {
    segments: [OnceLock<Segment>; SEGMENTS],
}

#[inline]
fn place(slab: usize) -> (usize, usize) {
    if slab < FIRST_SEGMENT {
        return (0, slab);
    }
    let k = (usize::BITS - 1 - (slab / FIRST_SEGMENT).leading_zeros()) as usize;
    (k + 1, slab - (FIRST_SEGMENT << k))
}

fn segment_len(seg: usize) -> usize {
    if seg == 0 {
        FIRST_SEGMENT
    } else {
        FIRST_SEGMENT << (seg - 1)
    }
}

impl SlabTable {
    /// The cell of `slab`, if its segment exists.
    #[inline]
    pub fn cell(&self, slab: u32) -> Option<&AtomicU64> {
        let (seg, off) = place(slab as usize);
        self.segments
            .get(seg)?
            .get()?
            .get(off / CHUNK)
            .map(|c| &c[off % CHUNK])
    }

    /// The entry of `slab`, if its segment exists.
    #[inline]
    pub fn get(&self, slab: u32) -> Option<Entry> {
        self.cell(slab)
            .map(|c| Entry::decode(c.load(Ordering::Acquire)))
    }

    /// Make sure `slab` has a cell (its entry reads as absent, generation 0).
    pub fn ensure(&self, slab: u32) {
        let (seg, _) = place(slab as usize);
        if let Some(s) = self.segments.get(seg) {
            s.get_or_init(|| {
                (0..segment_len(seg) / CHUNK)
                    .map(|_| CachePadded::new(std::array::from_fn(|_| AtomicU64::new(0))))
                    .collect()
            });
        }
    }

    /// Set the entry of `slab` (whose cell exists).
    #[inline]
    pub fn set(&self, slab: u32, e: Entry) {
        if let Some(c) = self.cell(slab) {
            c.store(e.encode(), Ordering::Release);
        }
    }

    /// Host bytes of the segments made so far.
    pub fn heap_bytes(&self) -> usize {
        (0..SEGMENTS)
            .filter(|&s| self.segments[s].get().is_some())
            .map(|s| {
                segment_len(s) / CHUNK * std::mem::size_of::<CachePadded<[AtomicU64; CHUNK]>>()
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_round_trip_in_62_bits() {
        for (slab, slot, gen) in [
            (0u32, 0usize, 0u16),
            (MAX_SLABS as u32 - 1, (1 << SLOT_BITS) - 1, u16::MAX),
            (12345, 678, 9),
        ] {
            let h = encode_handle(slab, slot, gen);
            assert_eq!(h >> 62, 0);
            assert_eq!(decode_handle(h), (slab, slot, gen));
            assert_eq!(decode_handle(h | (3 << 62)), (slab, slot, gen));
        }
    }

    #[test]
    fn segments_cover_every_slab_once() {
        let mut next = 0usize;
        for seg in 0..SEGMENTS {
            for off in 0..segment_len(seg) {
                assert_eq!(place(next), (seg, off));
                next += 1;
            }
        }
        assert_eq!(next, MAX_SLABS);
        let t = SlabTable::default();
        assert_eq!(t.get(5000), None);
        t.ensure(5000);
        let e = Entry {
            present: true,
            owner: DEPOT,
            local: 0xAB_CDEF,
            gen: 77,
        };
        t.set(5000, e);
        assert_eq!(t.get(5000), Some(e));
        assert_eq!(t.get(5001).map(|e| e.present), Some(false));
    }
}
