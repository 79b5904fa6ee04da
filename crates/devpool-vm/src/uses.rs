//! Counting the live blocks on each page.
//!
//! A block touches pages `[p0, p1)`. The pages it covers whole, `[f0, f1)`, no other
//! block can touch: they are used exactly while it lives, so their `used` bits flip
//! a word at a time and they keep no count. Only the pages at its ends, at most two,
//! which it may share with neighbours, count their blocks one by one. Whether a chunk is free (no used page) is
//! read from the bits when it matters (when memory moves or goes back), so blocks
//! cost nothing per chunk.

use crate::layer::{at, Counts, PageLayer, RangeId};
use crate::range::Range;

/// The pages a block touches: `[p0, p1)`, of which it covers `[f0, f1)` whole.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Footprint {
    pub p0: usize,
    pub p1: usize,
    pub f0: usize,
    pub f1: usize,
}

impl Footprint {
    /// The footprint of bytes `[lo, hi)` (non-empty, inside `rg`).
    #[inline]
    pub fn of(rg: &Range, shift: u32, lo: u64, hi: u64) -> Self {
        let (p0, p1) = rg.touched(shift, lo, hi);
        let (f0, f1) = rg.inside(shift, lo, hi);
        Footprint { p0, p1, f0, f1 }
    }

    /// The footprint of bytes `[lo, hi)`, if they are non-empty and inside `rg`: the
    /// check and [`of`](Self::of) in one pass (offsets from the range's base, where
    /// bytes below it wrap to offsets beyond its size).
    #[inline]
    pub fn within(rg: &Range, shift: u32, lo: u64, hi: u64) -> Option<Self> {
        let (a, b) = (lo.wrapping_sub(rg.base), hi.wrapping_sub(rg.base));
        if a >= b || b > rg.size {
            return None;
        }
        let m = (1u64 << shift) - 1;
        let (p0, p1) = ((a >> shift) as usize, ((b + m) >> shift) as usize);
        let f0 = ((a + m) >> shift) as usize;
        let f1 = ((b >> shift) as usize).max(f0);
        Some(Footprint { p0, p1, f0, f1 })
    }

    /// The pages at its ends that it covers only in part: at most two, `p0` when
    /// the block starts inside it, and the page after its whole pages when it ends
    /// inside that one (a block inside one page has the one, counted once).
    #[inline]
    fn edges(self) -> (Option<usize>, Option<usize>) {
        let e = self.f1.max(self.f0);
        (
            (self.p0 < self.f0).then_some(self.p0),
            (e < self.p1).then_some(e),
        )
    }
}

/// Add one use to the pages of `pages` in `rg`; returns how many used pages are not
/// mapped. `n` keeps the layer's counts.
#[inline]
pub(crate) fn add_uses(rg: &mut Range, n: &mut Counts, pages: Footprint) -> u64 {
    let mut missing = 0u64;
    let (f0, f1) = (pages.f0, pages.f1);
    if f0 < f1 {
        rg.used.set(f0, f1, true);
        let k = (f1 - f0) as u64;
        let m = rg.mapped.count(f0, f1) as u64;
        n.used += k;
        n.unused -= m;
        missing += k - m;
    }
    let mut edge = |p: usize| {
        let u = rg.uses[p];
        rg.uses[p] = u + 1;
        if u == 0 {
            rg.used.set_bit(p, true);
            n.used += 1;
            if rg.mapped.get(p) {
                n.unused -= 1;
            } else {
                missing += 1;
            }
        }
    };
    let (a, b) = pages.edges();
    if let Some(p) = a {
        edge(p);
    }
    if let Some(p) = b {
        edge(p);
    }
    missing
}

/// [`add_uses`] for a block whose pages are all mapped (none missing).
#[inline]
pub(crate) fn add_uses_mapped(rg: &mut Range, n: &mut Counts, pages: Footprint) {
    let (f0, f1) = (pages.f0, pages.f1);
    if f0 < f1 {
        rg.used.set(f0, f1, true);
        let k = (f1 - f0) as u64;
        n.used += k;
        n.unused -= k;
    }
    let mut edge = |p: usize| {
        let u = rg.uses[p];
        rg.uses[p] = u + 1;
        if u == 0 {
            rg.used.set_bit(p, true);
            n.used += 1;
            n.unused -= 1;
        }
    };
    let (a, b) = pages.edges();
    if let Some(p) = a {
        edge(p);
    }
    if let Some(p) = b {
        edge(p);
    }
}

/// Take one use off the pages of `pages` in `rg`: those left with none become
/// unused. `n` keeps the layer's counts.
#[inline]
pub(crate) fn take_uses(rg: &mut Range, n: &mut Counts, pages: Footprint) {
    let (f0, f1) = (pages.f0, pages.f1);
    if f0 < f1 {
        rg.used.set(f0, f1, false);
        n.used -= (f1 - f0) as u64;
        n.unused += rg.mapped.count(f0, f1) as u64;
    }
    let mut edge = |p: usize| {
        let u = rg.uses[p] - 1;
        rg.uses[p] = u;
        if u == 0 {
            rg.used.set_bit(p, false);
            n.used -= 1;
            if rg.mapped.get(p) {
                n.unused += 1;
            }
        }
    };
    let (a, b) = pages.edges();
    if let Some(p) = a {
        edge(p);
    }
    if let Some(p) = b {
        edge(p);
    }
}

impl PageLayer {
    /// Add one use to the pages of `pages`; returns how many used pages are not
    /// mapped.
    #[inline]
    pub(crate) fn add_uses(&mut self, r: RangeId, pages: Footprint) -> u64 {
        add_uses(at(&mut self.ranges, r), &mut self.n, pages)
    }

    /// Take one use off the pages of `pages`: those left with none become unused.
    #[inline]
    pub(crate) fn take_uses(&mut self, r: RangeId, pages: Footprint) {
        take_uses(at(&mut self.ranges, r), &mut self.n, pages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn within_is_the_range_check_and_the_footprint() {
        let shift = 21;
        let rg = Range::new(1 << 40, 64 << shift, 64, 16);
        let mut x = 3u64;
        for _ in 0..20000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let span = 70u64 << shift;
            let lo = rg.base - (4 << shift) + (x >> 11) % span;
            let hi = rg.base - (4 << shift) + (x >> 37) % span;
            let want = (lo < hi && rg.holds(lo, hi)).then(|| Footprint::of(&rg, shift, lo, hi));
            let got = Footprint::within(&rg, shift, lo, hi);
            assert_eq!(
                got.map(|f| (f.p0, f.p1, f.f0, f.f1)),
                want.map(|f| (f.p0, f.p1, f.f0, f.f1)),
                "{lo:#x}..{hi:#x}"
            );
        }
    }
}
