//! The slot bitmap of one slab: one bit per slot (set = free) and a summary bit per
//! 64-slot word (set = the word has a free slot), so the first free slot is found by
//! two `trailing_zeros` in O(1) for slabs of up to 4096 slots (and a short scan of
//! the summary above that).
//!
//! The words are built and checked with `bitvec`; the hot path works on the plain
//! words, since a `BitBox` decodes its span on every access to them.

use bitvec::prelude::*;

/// Free slots of a slab, lowest first.
#[derive(Debug)]
pub(crate) struct SlotBitmap {
    free: Box<[u64]>,
    summary: Box<[u64]>,
    /// No summary word below this one has a set bit.
    hint: usize,
}

/// `len` set bits in whole words; the bits past `len` in the last word are clear.
fn all_set(len: usize) -> Box<[u64]> {
    let mut v = BitVec::<u64, Lsb0>::repeat(true, len);
    v.set_uninitialized(false);
    v.into_vec().into_boxed_slice()
}

impl SlotBitmap {
    /// `slots` slots, all free.
    pub fn all_free(slots: usize) -> Self {
        let free = all_set(slots);
        SlotBitmap {
            summary: all_set(free.len()),
            free,
            hint: 0,
        }
    }

    /// Take the lowest free slot.
    #[inline]
    pub fn take(&mut self) -> Option<usize> {
        let mut si = self.hint;
        let s = loop {
            let s = *self.summary.get(si)?;
            if s != 0 {
                break s;
            }
            si += 1;
        };
        self.hint = si;
        let w = si * 64 + s.trailing_zeros() as usize;
        let word = self.free.get_mut(w)?;
        let bit = word.trailing_zeros() as usize;
        *word &= *word - 1;
        if *word == 0 {
            self.summary[si] &= !(1u64 << (w % 64));
        }
        Some(w * 64 + bit)
    }

    /// Whether `slot` (below the slab's slot count) is free.
    #[inline]
    pub fn is_free(&self, slot: usize) -> bool {
        self.free[slot / 64] & (1 << (slot % 64)) != 0
    }

    /// Mark `slot` (in use) free again.
    #[inline(always)]
    pub fn put(&mut self, slot: usize) {
        let w = slot / 64;
        self.free[w] |= 1 << (slot % 64);
        self.summary[w / 64] |= 1 << (w % 64);
        self.hint = self.hint.min(w / 64);
    }

    /// Free slots, counted bit by bit (for checks).
    pub fn count_free(&self) -> usize {
        self.free.view_bits::<Lsb0>().count_ones()
    }

    /// Whether the summary agrees with the slot bits (for checks).
    pub fn consistent(&self) -> bool {
        let words = self.free.view_bits::<Lsb0>();
        let summary = self.summary.view_bits::<Lsb0>();
        self.free
            .iter()
            .enumerate()
            .all(|(w, &x)| summary[w] == (x != 0))
            && summary.count_ones() <= words.len()
            && summary[..self.hint * 64].not_any()
    }

    /// Host bytes behind the bitmap.
    pub fn heap_bytes(&self) -> usize {
        (self.free.len() + self.summary.len()) * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_lowest_first_and_reuses_freed_slots() {
        for n in [1usize, 63, 64, 65, 4096, 4097, 10_000] {
            let mut b = SlotBitmap::all_free(n);
            assert_eq!(b.count_free(), n);
            let got: Vec<usize> = std::iter::from_fn(|| b.take()).collect();
            assert_eq!(got, (0..n).collect::<Vec<_>>(), "{n} slots");
            assert!((0..n).all(|i| !b.is_free(i)));
            assert!(b.consistent());
            for i in (0..n).rev().step_by(7) {
                b.put(i);
                assert!(b.is_free(i));
            }
            assert!(b.consistent());
            let mut want: Vec<usize> = (0..n).rev().step_by(7).collect();
            want.sort_unstable();
            assert_eq!(b.count_free(), want.len());
            let again: Vec<usize> = std::iter::from_fn(|| b.take()).collect();
            assert_eq!(again, want);
            assert_eq!(b.count_free(), 0);
        }
    }
}
