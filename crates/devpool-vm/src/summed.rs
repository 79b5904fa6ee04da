//! [`SummedBits`]: a bitmap with a second level, one bit per word of the first that
//! has any bit set, so that a search over a sparse map skips 64 empty words at a
//! time instead of reading each.
//!
//! The page layer keeps which pages are mapped this way: a range's free room can
//! span thousands of pages of reserved address space of which a few are mapped,
//! and a placement looking for mapped pages no block uses searches it (see
//! [`PageLayer::unused_run`](crate::PageLayer::unused_run)).

use crate::bits::Bits;
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

    /// The first bit in `[lo, hi)` set here and clear in both `a` and `b`, or
    /// `hi`: [`Bits::next_only`] that skips the words with no bit set here.
    #[inline]
    pub fn next_set_only(&self, a: &Bits, b: &Bits, lo: usize, hi: usize) -> usize {
        let mut p = lo;
        let words = hi.div_ceil(64);
        while p < hi {
            let w = p / 64;
            if self.bits.word(w) == 0 {
                let next = self.nonzero.next(w + 1, words, true);
                p = next * 64;
                continue;
            }
            let found = self.bits.next_only(a, b, p, hi.min((w + 1) * 64), true);
            if found < hi.min((w + 1) * 64) {
                return found;
            }
            p = (w + 1) * 64;
        }
        hi
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
    /// skipping search finds what the plain one finds.
    #[test]
    fn skipping_search_matches_the_plain_one() {
        let n = 64 * 40 + 17;
        let mut summed = SummedBits::new(n);
        let mut plain = Bits::new(n);
        let mut used = Bits::new(n);
        let none = Bits::new(n);
        let mut x = 99u64;
        let mut skipped_any = false;
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
            let want = plain.next_only(&used, &none, a, b, true);
            assert_eq!(summed.next_set_only(&used, &none, a, b), want, "[{a}, {b})");
            skipped_any |= (a / 64..b.div_ceil(64)).any(|w| plain.word(w) == 0);
        }
        assert_eq!(summed.count(0, n), plain.count(0, n));
        assert!(skipped_any, "some search crossed an empty word");
    }
}
