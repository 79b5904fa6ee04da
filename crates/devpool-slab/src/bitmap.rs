//! The slot bitmap of one slab: one bit per slot (set = free) and a summary bit per
//! 64-slot word (set = the word has a free slot), so the first free slot is found by
//! two `trailing_zeros` in O(1) for slabs of up to 4096 slots (and a short scan of
//! the summary above that).

use bitvec::prelude::*;

/// Free slots of a slab, lowest first.
#[derive(Debug)]
pub(crate) struct SlotBitmap {
    free: BitBox<u64, Lsb0>,
    summary: BitBox<u64, Lsb0>,
    /// No summary word below this one has a set bit.
    hint: usize,
}

fn all_set(len: usize) -> BitBox<u64, Lsb0> {
    let mut v = BitVec::<u64, Lsb0>::repeat(true, len);
    // The bits past `len` in the last word must read as "not free".
    v.set_uninitialized(false);
    v.into_boxed_bitslice()
}

impl SlotBitmap {
    /// `slots` slots, all free.
    pub fn all_free(slots: usize) -> Self {
        let free = all_set(slots);
        let words = free.as_raw_slice().len();
        SlotBitmap {
            free,
            summary: all_set(words),
            hint: 0,
        }
    }

    /// Take the lowest free slot.
    #[inline]
    pub fn take(&mut self) -> Option<usize> {
        let summary = self.summary.as_raw_mut_slice();
        let (si, s) = summary
            .iter()
            .enumerate()
            .skip(self.hint)
            .find(|(_, &s)| s != 0)
            .map(|(i, &s)| (i, s))?;
        self.hint = si;
        let w = si * 64 + s.trailing_zeros() as usize;
        let word = &mut self.free.as_raw_mut_slice()[w];
        let bit = word.trailing_zeros() as usize;
        *word &= *word - 1;
        if *word == 0 {
            summary[si] &= !(1u64 << (w % 64));
        }
        Some(w * 64 + bit)
    }

    /// Whether `slot` is free.
    #[inline]
    pub fn is_free(&self, slot: usize) -> bool {
        self.free[slot]
    }

    /// Mark `slot` (in use) free again.
    #[inline]
    pub fn put(&mut self, slot: usize) {
        self.free.set(slot, true);
        let w = slot / 64;
        self.summary.set(w, true);
        self.hint = self.hint.min(w / 64);
    }

    /// Host bytes behind the bitmap.
    pub fn heap_bytes(&self) -> usize {
        (self.free.as_raw_slice().len() + self.summary.as_raw_slice().len()) * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_lowest_first_and_reuses_freed_slots() {
        for n in [1usize, 63, 64, 65, 4096, 4097, 10_000] {
            let mut b = SlotBitmap::all_free(n);
            let got: Vec<usize> = std::iter::from_fn(|| b.take()).collect();
            assert_eq!(got, (0..n).collect::<Vec<_>>(), "{n} slots");
            assert!((0..n).all(|i| !b.is_free(i)));
            for i in (0..n).rev().step_by(7) {
                b.put(i);
                assert!(b.is_free(i));
            }
            let mut want: Vec<usize> = (0..n).rev().step_by(7).collect();
            want.sort_unstable();
            let again: Vec<usize> = std::iter::from_fn(|| b.take()).collect();
            assert_eq!(again, want);
        }
    }
}
