//! The slot bitmap of one slab: one bit per slot (set = free) and a summary bit per
//! 64-slot word (set = the word has a free slot), so the first free slot is found by
//! two `trailing_zeros` in O(1) for slabs of up to 4096 slots; above that, from a hint
//! past the summary words known to be empty, a scan of at most 512 words (the largest
//! slab holds 2^21 slots). A slab of up to 64 slots keeps its two words inline, in
//! its record.
//!
//! The words are built and checked with `bitvec`; the hot path works on the plain
//! words, since a `BitBox` decodes its span on every access to them.

use bitvec::prelude::*;

/// Free slots of a slab, lowest first.
///
/// One allocation holds both levels, the summary words first: finding a free slot
/// follows one pointer, not two. A slab of up to 64 slots keeps its two words (the
/// summary word, then the slot word) inline, with no allocation: the bitmap then
/// sits in its slab's record, and a free reads no other line.
#[derive(Debug)]
#[repr(C)]
pub(crate) struct SlotBitmap {
    /// The summary word and the slot word of a slab of up to 64 slots (`sum` 0).
    small: [u64; 2],
    /// Summary words, or 0 for the inline form.
    sum: u16,
    /// No summary word below this one has a set bit.
    hint: u16,
    /// `sum` summary words, then the slot words (empty in the inline form).
    words: Box<[u64]>,
}

/// `len` set bits in whole words; the bits past `len` in the last word are clear.
fn all_set(len: usize) -> Vec<u64> {
    let mut v = BitVec::<u64, Lsb0>::repeat(true, len);
    v.set_uninitialized(false);
    v.into_vec()
}

impl SlotBitmap {
    /// The leading bytes of the bitmap that a free or an allocation in a slab of up
    /// to 64 slots reads: the inline words, the summary count and the hint.
    #[cfg(test)]
    pub(crate) const HOT_BYTES: usize = std::mem::offset_of!(SlotBitmap, hint) + 2;

    /// `slots` slots, all free.
    pub fn all_free(slots: usize) -> Self {
        let free = all_set(slots);
        if slots <= 64 {
            let word = free.first().copied().unwrap_or(0);
            return SlotBitmap {
                small: [u64::from(word != 0), word],
                sum: 0,
                hint: 0,
                words: Box::new([]),
            };
        }
        let mut words = all_set(free.len());
        // At most 2^21 slots: 512 summary words.
        let sum = words.len() as u16;
        words.extend(free);
        SlotBitmap {
            small: [0; 2],
            sum,
            hint: 0,
            words: words.into_boxed_slice(),
        }
    }

    /// No slot at all (a vacant place in a cache; nothing allocated).
    pub fn none() -> Self {
        SlotBitmap {
            small: [0; 2],
            sum: 0,
            hint: 0,
            words: Box::new([]),
        }
    }

    /// The summary words (their count) and all the words, summary words first.
    #[inline(always)]
    fn view(&self) -> (usize, &[u64]) {
        if self.sum == 0 {
            (1, &self.small)
        } else {
            (self.sum as usize, &self.words)
        }
    }

    /// [`view`](Self::view), to change the words.
    #[inline(always)]
    fn view_mut(&mut self) -> (usize, &mut [u64]) {
        if self.sum == 0 {
            (1, &mut self.small)
        } else {
            (self.sum as usize, &mut self.words)
        }
    }

    /// Take the lowest free slot.
    #[inline]
    pub fn take(&mut self) -> Option<usize> {
        match self.take_hinted() {
            Some(slot) => Some(slot),
            None => self.take_scan(),
        }
    }

    /// Take the lowest free slot if the hint's summary word has one (the common
    /// case, and always so in slabs of up to 4096 slots with a free slot); `None`
    /// otherwise, when [`take`](Self::take) would look further. Calls nothing.
    #[inline]
    pub fn take_hinted(&mut self) -> Option<usize> {
        let si = self.hint as usize;
        let (sum, words) = self.view_mut();
        let (sums, slots) = words.split_at_mut(sum);
        let s = match sums.get(si) {
            Some(&s) if s != 0 => s,
            _ => return None,
        };
        let w = si * 64 + s.trailing_zeros() as usize;
        let word = slots.get_mut(w)?;
        let bit = word.trailing_zeros() as usize;
        *word &= *word - 1;
        if *word == 0 {
            sums[si] &= !(1u64 << (w % 64));
        }
        Some(w * 64 + bit)
    }

    /// [`take`](Self::take) when the hint's summary word is empty: move the hint
    /// past the empty summary words first.
    #[cold]
    fn take_scan(&mut self) -> Option<usize> {
        let (sum, words) = self.view();
        let si = (self.hint as usize..sum).find(|&i| words[i] != 0)?;
        self.hint = si as u16;
        self.take_hinted()
    }

    /// Whether `slot` (below the slab's slot count) is free.
    #[inline]
    pub fn is_free(&self, slot: usize) -> bool {
        let (sum, words) = self.view();
        words[sum + slot / 64] & (1 << (slot % 64)) != 0
    }

    /// Mark `slot` (below the slab's slot count) free again; `false`, changing
    /// nothing, when it is free already.
    #[inline(always)]
    pub fn put(&mut self, slot: usize) -> bool {
        let w = slot / 64;
        let bit = 1u64 << (slot % 64);
        let (sum, words) = self.view_mut();
        let Some(word) = words.get_mut(sum + w) else {
            return false;
        };
        if *word & bit != 0 {
            return false;
        }
        *word |= bit;
        words[w / 64] |= 1 << (w % 64);
        self.hint = self.hint.min((w / 64) as u16);
        true
    }

    fn free_words(&self) -> &[u64] {
        let (sum, words) = self.view();
        &words[sum..]
    }

    /// Free slots, counted bit by bit (for checks).
    pub fn count_free(&self) -> usize {
        self.free_words().view_bits::<Lsb0>().count_ones()
    }

    /// Whether the summary agrees with the slot bits (for checks).
    pub fn consistent(&self) -> bool {
        let free = self.free_words();
        let (sum, words) = self.view();
        let summary = words[..sum].view_bits::<Lsb0>();
        free.iter()
            .enumerate()
            .all(|(w, &x)| summary[w] == (x != 0))
            && summary.count_ones() <= free.len()
            && summary[..self.hint as usize * 64].not_any()
    }

    /// Host bytes behind the bitmap.
    pub fn heap_bytes(&self) -> usize {
        self.words.len() * 8 // nothing for the inline form
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
            // Up to 64 slots the words are inline: nothing allocated.
            assert_eq!(b.heap_bytes() == 0, n <= 64, "{n} slots");
            let got: Vec<usize> = std::iter::from_fn(|| b.take()).collect();
            assert_eq!(got, (0..n).collect::<Vec<_>>(), "{n} slots");
            assert!((0..n).all(|i| !b.is_free(i)));
            assert!(b.consistent());
            for i in (0..n).rev().step_by(7) {
                assert!(b.put(i));
                assert!(b.is_free(i));
                assert!(!b.put(i), "a free slot is not freed twice");
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
