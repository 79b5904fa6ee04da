//! Page state of one virtual arena: which pages are mapped, which are in use, and how
//! many live blocks smaller than a page share each page.
//!
//! A block of a page or more owns its pages alone (buddy blocks are aligned to their
//! size), so it only sets or clears bits, a word at a time. Blocks smaller than a page
//! share it: the page is in use while its count of such blocks is above zero.

/// Page bitmaps and sharer counts of one arena.
pub(crate) struct Pages {
    mapped: Vec<u64>,
    used: Vec<u64>,
    sharers: Vec<u32>,
}

/// Apply `f(word, mask)` to each word of bits `start..start + n`.
#[inline]
fn for_words(start: usize, n: usize, mut f: impl FnMut(usize, u64)) {
    let end = start + n;
    let mut at = start;
    while at < end {
        let w = at / 64;
        let lo = at % 64;
        let hi = (end - w * 64).min(64);
        let mask = if hi - lo == 64 {
            u64::MAX
        } else {
            ((1u64 << (hi - lo)) - 1) << lo
        };
        f(w, mask);
        at = w * 64 + hi;
    }
}
/// Set (or clear) bits `start..start + n` of `bits`.
#[inline]
fn set_bits(bits: &mut [u64], start: usize, n: usize, on: bool) {
    for_words(
        start,
        n,
        |w, m| {
            if on {
                bits[w] |= m
            } else {
                bits[w] &= !m
            }
        },
    );
}

impl Pages {
    /// State for `count` pages, none mapped.
    pub fn new(count: usize) -> Self {
        let words = count.div_ceil(64);
        Pages {
            mapped: vec![0; words],
            used: vec![0; words],
            sharers: vec![0; count],
        }
    }

    /// Pages in the arena.
    pub fn count(&self) -> usize {
        self.sharers.len()
    }

    /// Mapped pages among `start..start + n`.
    #[inline]
    pub fn count_mapped(&self, start: usize, n: usize) -> usize {
        let mut c = 0;
        for_words(start, n, |w, m| {
            c += (self.mapped[w] & m).count_ones() as usize
        });
        c
    }

    /// Whether page `p` is mapped.
    #[inline]
    pub fn is_mapped(&self, p: usize) -> bool {
        self.mapped[p / 64] >> (p % 64) & 1 == 1
    }

    /// Whether page `p` is in use.
    #[inline]
    pub fn is_used(&self, p: usize) -> bool {
        self.used[p / 64] >> (p % 64) & 1 == 1
    }

    /// Mark `start..start + n` mapped (or not).
    pub fn set_mapped(&mut self, start: usize, n: usize, on: bool) {
        set_bits(&mut self.mapped, start, n, on);
    }

    /// Mark `start..start + n` in use (or not).
    #[inline]
    pub fn set_used(&mut self, start: usize, n: usize, on: bool) {
        set_bits(&mut self.used, start, n, on);
    }

    /// Add a sharer to page `p`; returns the count before.
    #[inline]
    pub fn add_sharer(&mut self, p: usize) -> u32 {
        let c = self.sharers[p];
        self.sharers[p] = c + 1;
        c
    }

    /// Remove a sharer from page `p`; returns the count after.
    #[inline]
    pub fn remove_sharer(&mut self, p: usize) -> u32 {
        let c = self.sharers[p] - 1;
        self.sharers[p] = c;
        c
    }

    /// Sharers of page `p`.
    pub fn sharers(&self, p: usize) -> u32 {
        self.sharers[p]
    }

    /// Runs `(start, len)` of unmapped pages in `start..start + n`, lowest first.
    pub fn missing_runs(&self, start: usize, n: usize) -> Vec<(usize, usize)> {
        runs(start, start + n, |p| !self.is_mapped(p))
    }

    /// Runs `(start, len)` of pages mapped but not in use, highest first.
    pub fn unused_runs(&self) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for w in (0..self.mapped.len()).rev() {
            let mut bits = self.mapped[w] & !self.used[w];
            while bits != 0 {
                let hi = 63 - bits.leading_zeros() as usize;
                // The run ends at `hi` and goes down while bits stay set.
                let ones = (!(bits << (63 - hi))).leading_zeros() as usize;
                let lo = hi + 1 - ones;
                let p_lo = w * 64 + lo;
                let p_end = w * 64 + hi + 1;
                match out.last_mut() {
                    Some((s, len)) if *s == p_end => {
                        *s = p_lo;
                        *len += p_end - p_lo;
                    }
                    _ => out.push((p_lo, p_end - p_lo)),
                }
                bits &= if lo == 0 { 0 } else { (1u64 << lo) - 1 };
            }
        }
        out
    }

    /// Runs `(start, len)` of mapped pages, lowest first.
    pub fn mapped_runs(&self) -> Vec<(usize, usize)> {
        runs(0, self.count(), |p| self.is_mapped(p))
    }

    /// Mapped pages, pages in use, and pages in use but not mapped (which must be 0).
    pub fn tally(&self) -> (usize, usize, usize) {
        let mut t = (0, 0, 0);
        for (m, u) in self.mapped.iter().zip(&self.used) {
            t.0 += m.count_ones() as usize;
            t.1 += u.count_ones() as usize;
            t.2 += (u & !m).count_ones() as usize;
        }
        t
    }
}

/// Runs `(start, len)` of pages in `start..end` where `pred` holds, lowest first.
fn runs(start: usize, end: usize, pred: impl Fn(usize) -> bool) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    let mut p = start;
    while p < end {
        if pred(p) {
            let s = p;
            while p < end && pred(p) {
                p += 1;
            }
            out.push((s, p - s));
        } else {
            p += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_ranges_across_words() {
        let mut p = Pages::new(200);
        p.set_mapped(60, 80, true);
        assert_eq!(p.count_mapped(0, 200), 80);
        assert_eq!(p.count_mapped(59, 3), 2);
        assert_eq!(p.count_mapped(139, 5), 1);
        assert_eq!(p.missing_runs(50, 100), vec![(50, 10), (140, 10)]);
        p.set_used(64, 64, true);
        assert_eq!(p.unused_runs(), vec![(128, 12), (60, 4)]);
        p.set_used(64, 64, false);
        assert_eq!(p.unused_runs(), vec![(60, 80)]);
        assert_eq!(p.tally(), (80, 0, 0));
        p.set_mapped(0, 200, false);
        assert_eq!(p.mapped_runs(), vec![]);
    }

    #[test]
    fn unused_runs_merge_across_word_edges() {
        let mut p = Pages::new(256);
        p.set_mapped(0, 256, true);
        p.set_used(10, 1, true);
        p.set_used(200, 1, true);
        assert_eq!(p.unused_runs(), vec![(201, 55), (11, 189), (0, 10)]);
        assert_eq!(p.tally(), (256, 2, 0));
    }

    #[test]
    fn sharers_count() {
        let mut p = Pages::new(4);
        assert_eq!(p.add_sharer(2), 0);
        assert_eq!(p.add_sharer(2), 1);
        assert_eq!(p.remove_sharer(2), 1);
        assert_eq!(p.sharers(2), 1);
    }
}
