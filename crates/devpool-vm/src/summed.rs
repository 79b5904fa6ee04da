//! [`SummedBits`]: a bitmap with a second level, one bit per word of the first that
//! has any bit set, so that a search over a sparse map skips 64 empty words at a
//! time instead of reading each.
//!
//! The page layer keeps which pages are mapped this way: a range's free room can
//! span thousands of pages of reserved address space of which a few are mapped,
//! and a placement looking for a run of mapped pages no block uses searches it
//! (see [`PageLayer::unused_run`](crate::PageLayer::unused_run)).

use crate::bits::{word_mask, Bits};
use std::ops::Deref;

/// A bitmap whose words that have any bit set are marked in a summary. Reads go
/// to the bitmap (through `Deref`); every write goes through [`set`](Self::set),
/// which keeps the summary right.
#[derive(Clone, Debug)]
pub(crate) struct SummedBits {
    bits: Bits,
    /// Bit `w` set iff word `w` of `bits` is not zero.
    nonzero: Bits,
}

impl SummedBits {
    /// `len` bits, all clear.
    pub fn new(len: usize) -> Self {
        SummedBits {
            bits: Bits::new(len),
            nonzero: Bits::new(len.div_ceil(64)),
        }
    }

    /// Set (`on`) or clear bits `[lo, hi)`, and mark the words touched.
    pub fn set(&mut self, lo: usize, hi: usize, on: bool) {
        if lo >= hi {
            return;
        }
        self.bits.set(lo, hi, on);
        let (a, b) = (lo / 64, (hi - 1) / 64);
        if on {
            self.nonzero.set(a, b + 1, true);
        } else {
            // Only the end words can keep bits outside `[lo, hi)`.
            self.nonzero.set(a, b + 1, false);
            for w in [a, b] {
                if self.bits.word(w) != 0 {
                    self.nonzero.set_bit(w, true);
                }
            }
        }
    }

    /// The first `p` in `[lo, hi)` where `need` bits in a row, `p` to `p + need - 1`,
    /// all lie in `[lo, hi)`, are set here and are clear in both `a` and `b`; `None`
    /// if there is none. A word at a time: words with no bit set here are skipped
    /// through the summary, a run inside one word is found with shifts, and a run
    /// across words is carried from one word's top bits to the next's low ones.
    pub fn first_run_only(
        &self,
        a: &Bits,
        b: &Bits,
        lo: usize,
        hi: usize,
        need: usize,
    ) -> Option<usize> {
        if need == 0 || hi < lo + need {
            return None;
        }
        let words = hi.div_ceil(64);
        // The run of good bits that ends at the top of the last word looked at.
        let (mut run, mut start) = (0usize, 0usize);
        let mut w = lo / 64;
        while w < words {
            if self.bits.word(w) == 0 {
                run = 0;
                w = self.nonzero.next(w + 1, words, true);
                continue;
            }
            let good = self.bits.word(w) & !a.word(w) & !b.word(w) & word_mask(w, lo, hi);
            if good == u64::MAX {
                if run == 0 {
                    start = w * 64;
                }
                run += 64;
                if run >= need {
                    return Some(start);
                }
                w += 1;
                continue;
            }
            // The carried run goes on through this word's lowest bits.
            let low = good.trailing_ones() as usize;
            if run > 0 && run + low >= need {
                return Some(start);
            }
            // A run wholly inside the word: bit `i` of `inside` says bits `i` to
            // `i + need - 1` are all good.
            if need <= 64 {
                let mut inside = good;
                let mut k = 1;
                while k < need && inside != 0 {
                    let s = k.min(need - k);
                    inside &= inside >> s;
                    k += s;
                }
                if need < 64 {
                    inside &= u64::MAX >> (need - 1);
                }
                if inside != 0 {
                    return Some(w * 64 + inside.trailing_zeros() as usize);
                }
            }
            // A run that reaches the word's top carries on into the next.
            run = good.leading_ones() as usize;
            start = w * 64 + 64 - run;
            w += 1;
        }
        None
    }

    /// Whether the summary agrees with the bitmap (a debug check).
    pub fn summary_agrees(&self) -> bool {
        (0..self.bits.len() / 64).all(|w| self.nonzero.get(w) == (self.bits.word(w) != 0))
    }
}

impl Deref for SummedBits {
    type Target = Bits;
    fn deref(&self) -> &Bits {
        &self.bits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random writes against a plain bitmap: same bits, a right summary, and the
    /// run search finds what a bit-by-bit search finds.
    #[test]
    fn run_search_matches_a_bit_by_bit_one() {
        let n = 64 * 40 + 17;
        let mut summed = SummedBits::new(n);
        let mut plain = Bits::new(n);
        let mut used = Bits::new(n);
        let none = Bits::new(n);
        let mut x = 99u64;
        let mut skipped_any = false;
        let mut found_runs = 0;
        let mut found_long = 0;
        for round in 0..2000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let lo = (x >> 33) as usize % n;
            // Mostly short writes, so that most words stay empty.
            let len = if round % 17 == 0 {
                (x >> 20) as usize % 300
            } else {
                (x >> 20) as usize % 9
            };
            let hi = (lo + len).min(n);
            let on = !(x >> 7).is_multiple_of(3) || round % 5 == 0;
            if round % 4 == 0 {
                used.set(lo, hi, (x >> 9) & 1 == 0);
            } else {
                summed.set(lo, hi, on);
                plain.set(lo, hi, on);
            }
            assert!(summed.summary_agrees(), "summary wrong after round {round}");
            let (a, b) = ((x >> 11) as usize % n, (x >> 27) as usize % n);
            let (a, b) = (a.min(b), a.max(b));
            for need in [1, 2, 5, 15, 63, 64, 65, 130] {
                let good = |p: usize| plain.get(p) && !used.get(p);
                let model = (a..b.saturating_sub(need - 1).max(a))
                    .find(|&p| p + need <= b && (p..p + need).all(good));
                assert_eq!(
                    summed.first_run_only(&used, &none, a, b, need),
                    model,
                    "run of {need} in [{a}, {b})"
                );
                found_runs += usize::from(model.is_some());
                found_long += usize::from(model.is_some() && need > 64);
            }
            skipped_any |= (a / 64..b.div_ceil(64)).any(|w| plain.word(w) == 0);
        }
        assert_eq!(summed.count(0, n), plain.count(0, n));
        assert!(skipped_any, "some search crossed an empty word");
        assert!(found_runs > 500, "runs found: {found_runs}");
        assert!(found_long > 20, "runs across words found: {found_long}");
    }
}
