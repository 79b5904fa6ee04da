//! Counting the live blocks on each page.
//!
//! A block touches pages `[p0, p1)`. The pages it covers whole, `[f0, f1)`, no other
//! block can touch: they are used exactly while it lives, so their `used` bits flip
//! a word at a time and they keep no count. Only the pages at its ends, at most two,
//! which it may share with neighbours, count their blocks one by one. Whether a chunk is free (no used page) is
//! read from the bits when it matters (when memory moves or goes back), so blocks
//! cost nothing per chunk.

use crate::layer::{at, PageLayer, RangeId};
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

    /// The pages at its ends that it covers only in part (at most two).
    #[inline]
    fn edges(self) -> impl Iterator<Item = usize> {
        (self.p0..self.f0).chain(self.f1.max(self.f0)..self.p1)
    }
}

impl PageLayer {
    /// Add one use to the pages of `pages`; returns how many used pages are not
    /// mapped.
    pub(crate) fn add_uses(&mut self, r: RangeId, pages: Footprint) -> u64 {
        let rg = at(&mut self.ranges, r);
        let mut missing = 0u64;
        let (f0, f1) = (pages.f0, pages.f1);
        if f0 < f1 {
            rg.used.set(f0, f1, true);
            let n = (f1 - f0) as u64;
            let m = rg.mapped.count(f0, f1) as u64;
            self.n.used += n;
            self.n.unused -= m;
            missing += n - m;
        }
        for p in pages.edges() {
            let u = rg.uses[p];
            rg.uses[p] = u + 1;
            if u > 0 {
                continue;
            }
            rg.used.set(p, p + 1, true);
            self.n.used += 1;
            if rg.mapped.get(p) {
                self.n.unused -= 1;
            } else {
                missing += 1;
            }
        }
        missing
    }

    /// Take one use off the pages of `pages`: those left with none become unused.
    pub(crate) fn take_uses(&mut self, r: RangeId, pages: Footprint) {
        let rg = at(&mut self.ranges, r);
        let (f0, f1) = (pages.f0, pages.f1);
        if f0 < f1 {
            rg.used.set(f0, f1, false);
            self.n.used -= (f1 - f0) as u64;
            self.n.unused += rg.mapped.count(f0, f1) as u64;
        }
        for p in pages.edges() {
            let u = rg.uses[p] - 1;
            rg.uses[p] = u;
            if u > 0 {
                continue;
            }
            rg.used.set(p, p + 1, false);
            self.n.used -= 1;
            if rg.mapped.get(p) {
                self.n.unused += 1;
            }
        }
    }
}
