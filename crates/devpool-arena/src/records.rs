//! The host-side record of every block handed out in the current epoch, indexed by the
//! record index in the block's handle, so that a free is checked in O(1).
//!
//! Records live in segments that double in size (256, 512, 1024... records) and are
//! made on first use and kept for later epochs: index `i` never moves, so writers and
//! readers need no lock. A record is three words: the block's address, its requested
//! size and a tag `epoch << 21 | generation << 1 | live`. A record written in an older
//! epoch, or never written, carries another epoch in its tag and matches nothing; a
//! record used again in the same epoch (after the last block was freed in stack
//! order) gets the next generation, so the old block's handle matches nothing either.

use crate::word::GEN_MASK;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

const FIRST_SHIFT: u32 = 8;
const SEGMENTS: usize = 15;

/// The most records the table holds (about 8.4 million).
const CAPACITY: u64 = ((1u64 << SEGMENTS) - 1) << FIRST_SHIFT;
const _: () = assert!(
    CAPACITY > crate::word::MAX_HANDED,
    "every index has a record"
);

/// One block's record.
#[derive(Debug, Default)]
pub struct Record {
    ptr: AtomicU64,
    requested: AtomicU64,
    tag: AtomicU64,
}

const EPOCH_SHIFT: u32 = GEN_MASK.count_ones() + 1;

/// The epoch of a tag.
#[inline]
pub fn tag_epoch(tag: u64) -> u64 {
    tag >> EPOCH_SHIFT
}

/// The generation of a tag.
#[inline]
pub fn tag_gen(tag: u64) -> u64 {
    (tag >> 1) & GEN_MASK
}

/// The tag of a live block of `epoch`, generation `gen`.
#[inline]
pub fn live(epoch: u64, gen: u64) -> u64 {
    epoch << EPOCH_SHIFT | gen << 1 | 1
}

/// The tag of a freed block of `epoch`, generation `gen`.
#[inline]
pub fn dead(epoch: u64, gen: u64) -> u64 {
    epoch << EPOCH_SHIFT | gen << 1
}

impl Record {
    /// Write a live block (the index is this writer's alone in this epoch); returns
    /// its generation.
    #[inline]
    pub fn write(&self, epoch: u64, ptr: u64, requested: u64) -> u64 {
        let old = self.tag.load(Ordering::Acquire);
        let gen = if tag_epoch(old) == epoch {
            ((old >> 1) + 1) & GEN_MASK
        } else {
            0
        };
        self.ptr.store(ptr, Ordering::Relaxed);
        self.requested.store(requested, Ordering::Relaxed);
        self.tag.store(live(epoch, gen), Ordering::Release);
        gen
    }

    /// The tag, then the address and requested size written before it.
    #[inline]
    pub fn read(&self) -> (u64, u64, u64) {
        let tag = self.tag.load(Ordering::Acquire);
        (
            tag,
            self.ptr.load(Ordering::Relaxed),
            self.requested.load(Ordering::Relaxed),
        )
    }

    /// Mark the live block of `epoch`, generation `gen`, freed; false when it was not
    /// live (a racing double free).
    #[inline]
    pub fn kill(&self, epoch: u64, gen: u64) -> bool {
        self.tag
            .compare_exchange(
                live(epoch, gen),
                dead(epoch, gen),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }
}

/// The record table.
#[derive(Debug, Default)]
pub struct Records {
    segments: [OnceLock<Box<[Record]>>; SEGMENTS],
}

#[inline]
fn locate(i: u64) -> Option<(usize, usize)> {
    let j = (i >> FIRST_SHIFT) + 1;
    let k = (63 - j.leading_zeros()) as usize;
    if k >= SEGMENTS {
        return None;
    }
    let start = ((1u64 << k) - 1) << FIRST_SHIFT;
    Some((k, (i - start) as usize))
}

impl Records {
    /// Record `i`, making its segment if needed; `None` past [`CAPACITY`].
    #[inline]
    pub fn slot(&self, i: u64) -> Option<&Record> {
        let (k, off) = locate(i)?;
        let seg = self.segments[k].get_or_init(|| {
            (0..(1usize << (k as u32 + FIRST_SHIFT)))
                .map(|_| Record::default())
                .collect()
        });
        seg.get(off)
    }

    /// Record `i` if its segment exists.
    #[inline]
    pub fn get(&self, i: u64) -> Option<&Record> {
        let (k, off) = locate(i)?;
        self.segments[k].get()?.get(off)
    }

    /// Host bytes held by the records made so far.
    pub fn metadata_bytes(&self) -> usize {
        self.segments
            .iter()
            .filter_map(|s| s.get())
            .map(|s| std::mem::size_of_val(&**s))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_map_to_distinct_places() {
        let mut seen = std::collections::HashSet::new();
        for i in (0..5000u64).chain([CAPACITY - 1]) {
            let (k, off) = locate(i).unwrap();
            assert!(off < 1 << (k as u32 + FIRST_SHIFT), "index {i}");
            assert!(seen.insert((k, off)), "index {i} collides");
        }
        assert!(locate(CAPACITY).is_none());
    }

    #[test]
    fn records_match_only_their_epoch() {
        let r = Records::default();
        assert!(r.get(300).is_none(), "segment not made yet");
        let rec = r.slot(300).unwrap();
        assert_eq!(rec.write(7, 0x1000, 10), 0);
        assert_eq!(r.get(300).unwrap().read(), (live(7, 0), 0x1000, 10));
        assert!(!rec.kill(8, 0), "another epoch");
        assert!(rec.kill(7, 0));
        assert!(!rec.kill(7, 0), "already dead");
        assert_eq!(rec.write(7, 0x1000, 10), 1, "used again: next generation");
        assert!(!rec.kill(7, 0), "the old block is not the new one");
        assert!(rec.kill(7, 1));
        assert_eq!(rec.write(8, 0x2000, 1), 0, "a new epoch starts over");
        assert!(r.metadata_bytes() > 0);
    }
}
