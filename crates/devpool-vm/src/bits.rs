//! [`Bits`]: one bit per page, with the word-at-a-time searches the page layer needs
//! (counts, runs upwards and downwards).

/// A fixed-length bitmap.
#[derive(Clone, Debug)]
pub(crate) struct Bits {
    words: Vec<u64>,
}

/// The bits of word `w` that lie in `[lo, hi)`.
#[inline]
fn word_mask(w: usize, lo: usize, hi: usize) -> u64 {
    let start = w * 64;
    let a = lo.saturating_sub(start);
    let b = (hi - start).min(64);
    if a >= b {
        return 0;
    }
    let upper = if b == 64 { u64::MAX } else { (1u64 << b) - 1 };
    upper & (u64::MAX << a)
}

impl Bits {
    /// `len` bits, all clear.
    pub fn new(len: usize) -> Self {
        Bits {
            words: vec![0; len.div_ceil(64)],
        }
    }

    /// Whether bit `i` is set.
    #[inline]
    pub fn get(&self, i: usize) -> bool {
        self.words[i / 64] >> (i % 64) & 1 == 1
    }

    /// Set bits in `[lo, hi)`.
    #[inline]
    pub fn count(&self, lo: usize, hi: usize) -> usize {
        if lo >= hi {
            return 0;
        }
        if lo / 64 == (hi - 1) / 64 {
            // Within one word: most blocks' pages. All set or none is the common
            // answer, and needs no population count (a dozen instructions on a
            // target without one).
            let w = lo / 64;
            let m = word_mask(w, lo, hi);
            let bits = self.words[w] & m;
            return if bits == m {
                hi - lo
            } else if bits == 0 {
                0
            } else {
                bits.count_ones() as usize
            };
        }
        (lo / 64..hi.div_ceil(64))
            .map(|w| (self.words[w] & word_mask(w, lo, hi)).count_ones() as usize)
            .sum()
    }

    /// Whether every bit in `[lo, hi)` is set (true for an empty range).
    #[inline]
    pub fn all(&self, lo: usize, hi: usize) -> bool {
        let mut w = lo / 64;
        while w * 64 < hi {
            let m = word_mask(w, lo, hi);
            if self.words[w] & m != m {
                return false;
            }
            w += 1;
        }
        true
    }

    /// Whether any bit in `[lo, hi)` is set.
    #[inline]
    pub fn any(&self, lo: usize, hi: usize) -> bool {
        let mut w = lo / 64;
        while w * 64 < hi {
            if self.words[w] & word_mask(w, lo, hi) != 0 {
                return true;
            }
            w += 1;
        }
        false
    }

    /// Set (`on`) or clear `[lo, hi)`.
    #[inline]
    pub fn set(&mut self, lo: usize, hi: usize, on: bool) {
        if hi == lo + 1 {
            let (w, m) = (lo / 64, 1u64 << (lo % 64));
            if on {
                self.words[w] |= m;
            } else {
                self.words[w] &= !m;
            }
            return;
        }
        if lo >= hi {
            return;
        }
        for w in lo / 64..hi.div_ceil(64) {
            let m = word_mask(w, lo, hi);
            if on {
                self.words[w] |= m;
            } else {
                self.words[w] &= !m;
            }
        }
    }

    /// The first bit in `[lo, hi)` that is `on`, or `hi`.
    #[inline]
    pub fn next(&self, lo: usize, hi: usize, on: bool) -> usize {
        let mut p = lo;
        while p < hi {
            let w = p / 64;
            let word = if on { self.words[w] } else { !self.words[w] };
            let bits = word & word_mask(w, p, hi);
            if bits != 0 {
                return w * 64 + bits.trailing_zeros() as usize;
            }
            p = (w + 1) * 64;
        }
        hi
    }

    /// The last bit in `[lo, hi)` that is `on`.
    #[inline]
    pub fn prev(&self, lo: usize, hi: usize, on: bool) -> Option<usize> {
        let mut p = hi;
        while p > lo {
            let w = (p - 1) / 64;
            let word = if on { self.words[w] } else { !self.words[w] };
            let bits = word & word_mask(w, lo, p);
            if bits != 0 {
                return Some(w * 64 + 63 - bits.leading_zeros() as usize);
            }
            p = w * 64;
        }
        None
    }

    /// The first bit in `[lo, hi)` set in `self` and clear in both `a` and `b`
    /// (`on`), or the first where that is not so (`!on`); `hi` if none.
    #[inline]
    pub fn next_only(&self, a: &Bits, b: &Bits, lo: usize, hi: usize, on: bool) -> usize {
        let mut p = lo;
        while p < hi {
            let w = p / 64;
            let word = self.words[w] & !a.words[w] & !b.words[w];
            let word = if on { word } else { !word };
            let bits = word & word_mask(w, p, hi);
            if bits != 0 {
                return w * 64 + bits.trailing_zeros() as usize;
            }
            p = (w + 1) * 64;
        }
        hi
    }

    /// The last bit in `[lo, hi)` set in `self` and clear in both `a` and `b`.
    #[inline]
    pub fn prev_only(&self, a: &Bits, b: &Bits, lo: usize, hi: usize) -> Option<usize> {
        let mut p = hi;
        while p > lo {
            let w = (p - 1) / 64;
            let word = self.words[w] & !a.words[w] & !b.words[w];
            let bits = word & word_mask(w, lo, p);
            if bits != 0 {
                return Some(w * 64 + 63 - bits.leading_zeros() as usize);
            }
            p = w * 64;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_and_counts_match_a_plain_vector() {
        let n = 300;
        let mut bits = Bits::new(n);
        let mut other = Bits::new(n);
        let none = Bits::new(n);
        let mut model = vec![false; n];
        let mut omodel = vec![false; n];
        let mut x = 12345u64;
        for round in 0..300 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let lo = (x >> 33) as usize % n;
            let hi = (lo + (x >> 20) as usize % 90).min(n);
            let on = x & 1 == 0;
            if round % 3 == 0 {
                other.set(lo, hi, on);
                omodel[lo..hi].iter_mut().for_each(|b| *b = on);
            } else {
                bits.set(lo, hi, on);
                model[lo..hi].iter_mut().for_each(|b| *b = on);
            }
            let (a, b) = ((x >> 7) as usize % n, (x >> 13) as usize % n);
            let (a, b) = (a.min(b), a.max(b));
            assert_eq!(bits.count(a, b), model[a..b].iter().filter(|&&v| v).count());
            assert_eq!(bits.all(a, b), model[a..b].iter().all(|&v| v));
            assert_eq!(bits.any(a, b), model[a..b].iter().any(|&v| v));
            for on in [true, false] {
                let want = (a..b).find(|&p| model[p] == on).unwrap_or(b);
                assert_eq!(bits.next(a, b, on), want);
                let want = (a..b).rev().find(|&p| model[p] == on);
                assert_eq!(bits.prev(a, b, on), want);
            }
            let want = (a..b).rev().find(|&p| model[p] && !omodel[p]);
            assert_eq!(bits.prev_only(&other, &none, a, b), want);
            for on in [true, false] {
                let want = (a..b)
                    .find(|&p| (model[p] && !omodel[p]) == on)
                    .unwrap_or(b);
                assert_eq!(bits.next_only(&other, &none, a, b, on), want);
            }
            assert_eq!(bits.get(a), model[a]);
        }
    }
}
