//! [`Bits`]: one bit per page, with the word-at-a-time searches the page layer needs
//! (counts, runs upwards and downwards).

/// A fixed-length bitmap.
#[derive(Clone, Debug)]
pub(crate) struct Bits {
    words: Vec<u64>,
}

/// The bits of word `w` that lie in `[lo, hi)`.
#[inline]
pub(crate) fn word_mask(w: usize, lo: usize, hi: usize) -> u64 {
    let start = w * 64;
    let a = lo.saturating_sub(start);
    let b = (hi - start).min(64);
    if a >= b {
        return 0;
    }
    let upper = if b == 64 { u64::MAX } else { (1u64 << b) - 1 };
    upper & (u64::MAX << a)
}

/// The words of non-empty `[lo, hi)`, first and last, and the masks of its bits in
/// them: the first word's from `lo` up, the last word's below `hi`.
#[inline]
fn ends(lo: usize, hi: usize) -> (usize, usize, u64, u64) {
    (
        lo / 64,
        (hi - 1) / 64,
        u64::MAX << (lo % 64),
        u64::MAX >> (63 - (hi - 1) % 64),
    )
}

impl Bits {
    /// `len` bits, all clear.
    pub fn new(len: usize) -> Self {
        Bits {
            words: vec![0; len.div_ceil(64)],
        }
    }

    /// Bits in the map (rounded up to whole words).
    pub fn len(&self) -> usize {
        self.words.len() * 64
    }

    /// Word `w` (bits `64 w` to `64 w + 63`).
    #[inline]
    pub fn word(&self, w: usize) -> u64 {
        self.words[w]
    }

    /// Whether bit `i` is set.
    #[inline]
    pub fn get(&self, i: usize) -> bool {
        self.words[i / 64] >> (i % 64) & 1 == 1
    }

    /// Set (`on`) or clear bit `i`.
    #[inline]
    pub fn set_bit(&mut self, i: usize, on: bool) {
        let m = 1u64 << (i % 64);
        if on {
            self.words[i / 64] |= m;
        } else {
            self.words[i / 64] &= !m;
        }
    }

    /// Set bits in `[lo, hi)`.
    #[inline]
    pub fn count(&self, lo: usize, hi: usize) -> usize {
        if lo >= hi {
            return 0;
        }
        let (a, b, first, last) = ends(lo, hi);
        if a == b {
            // Within one word: most blocks' pages. All set or none is the common
            // answer, and needs no population count (a dozen instructions on a
            // target without one).
            let m = first & last;
            let bits = self.words[a] & m;
            return if bits == m {
                hi - lo
            } else if bits == 0 {
                0
            } else {
                bits.count_ones() as usize
            };
        }
        self.count_words(a, b, first, last)
    }

    /// [`count`](Self::count) over words `a..=b` (`a < b`), the first and last
    /// masked.
    #[inline(never)]
    fn count_words(&self, a: usize, b: usize, first: u64, last: u64) -> usize {
        let w = &self.words[a..=b];
        let n = w.len();
        let mut c = (w[0] & first).count_ones() + (w[n - 1] & last).count_ones();
        for x in &w[1..n - 1] {
            c += x.count_ones();
        }
        c as usize
    }

    /// Whether every bit in `[lo, hi)` is set (true for an empty range).
    #[inline]
    pub fn all(&self, lo: usize, hi: usize) -> bool {
        if lo >= hi {
            return true;
        }
        let (a, b, first, last) = ends(lo, hi);
        if a == b {
            let m = first & last;
            return self.words[a] & m == m;
        }
        self.all_words(a, b, first, last)
    }

    /// [`all`](Self::all) over words `a..=b` (`a < b`), the first and last masked.
    #[inline(never)]
    fn all_words(&self, a: usize, b: usize, first: u64, last: u64) -> bool {
        let w = &self.words[a..=b];
        let n = w.len();
        w[0] & first == first
            && w[n - 1] & last == last
            && w[1..n - 1].iter().all(|&x| x == u64::MAX)
    }

    /// Whether any bit in `[lo, hi)` is set.
    #[inline]
    pub fn any(&self, lo: usize, hi: usize) -> bool {
        if lo >= hi {
            return false;
        }
        let (a, b, first, last) = ends(lo, hi);
        if a == b {
            return self.words[a] & first & last != 0;
        }
        self.any_words(a, b, first, last)
    }

    /// [`any`](Self::any) over words `a..=b` (`a < b`), the first and last masked.
    #[inline(never)]
    fn any_words(&self, a: usize, b: usize, first: u64, last: u64) -> bool {
        let w = &self.words[a..=b];
        let n = w.len();
        w[0] & first != 0 || w[n - 1] & last != 0 || w[1..n - 1].iter().any(|&x| x != 0)
    }

    /// Set (`on`) or clear `[lo, hi)`.
    #[inline]
    pub fn set(&mut self, lo: usize, hi: usize, on: bool) {
        if lo >= hi {
            return;
        }
        let (a, b, first, last) = ends(lo, hi);
        if a == b {
            let m = first & last;
            if on {
                self.words[a] |= m;
            } else {
                self.words[a] &= !m;
            }
            return;
        }
        self.set_words(a, b, first, last, on);
    }

    /// [`set`](Self::set) over words `a..=b` (`a < b`), the first and last masked.
    #[inline(never)]
    fn set_words(&mut self, a: usize, b: usize, first: u64, last: u64, on: bool) {
        let w = &mut self.words[a..=b];
        let n = w.len();
        if on {
            w[0] |= first;
            w[n - 1] |= last;
            w[1..n - 1].fill(u64::MAX);
        } else {
            w[0] &= !first;
            w[n - 1] &= !last;
            w[1..n - 1].fill(0);
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
    #[cfg(test)]
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
            let on = x >> 60 & 1 == 1;
            bits.set_bit(b.min(n - 1), on);
            model[b.min(n - 1)] = on;
        }
    }
}
