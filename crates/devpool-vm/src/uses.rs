//! Counting the live blocks on each page.
//!
//! A block touches pages `[p0, p1)`. The pages it covers whole, `[f0, f1)`, no other
//! block can touch, so they go from no use to one (and back) in bulk, a word of
//! bits at a time and a chunk at a time. Only the two pages at its ends, which it
//! may share with neighbours, are counted one by one.

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
            debug_assert!(rg.uses[f0..f1].iter().all(|&u| u == 0));
            rg.uses[f0..f1].fill(1);
            rg.used.set(f0, f1, true);
            let n = (f1 - f0) as u64;
            let m = rg.mapped.count(f0, f1) as u64;
            self.n.used += n;
            self.n.unused -= m;
            missing += n - m;
            if m > 0 {
                let mut q = rg.mapped.next(f0, f1, true);
                while q < f1 {
                    let (c, e) = rg.chunk_of(q);
                    let end = e.min(f1);
                    if rg.chunk_used[c] == 0 {
                        self.n.free -= (e - c) as u64;
                    }
                    rg.chunk_used[c] += (end - q) as u32;
                    q = rg.mapped.next(end, f1, true);
                }
            }
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
                let (c, e) = rg.chunk_of(p);
                if rg.chunk_used[c] == 0 {
                    self.n.free -= (e - c) as u64;
                }
                rg.chunk_used[c] += 1;
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
            rg.uses[f0..f1].fill(0);
            rg.used.set(f0, f1, false);
            let n = (f1 - f0) as u64;
            let m = rg.mapped.count(f0, f1) as u64;
            self.n.used -= n;
            self.n.unused += m;
            if m > 0 {
                let mut q = rg.mapped.next(f0, f1, true);
                while q < f1 {
                    let (c, e) = rg.chunk_of(q);
                    let end = e.min(f1);
                    rg.chunk_used[c] -= (end - q) as u32;
                    if rg.chunk_used[c] == 0 {
                        self.n.free += (e - c) as u64;
                    }
                    q = rg.mapped.next(end, f1, true);
                }
            }
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
                let (c, e) = rg.chunk_of(p);
                rg.chunk_used[c] -= 1;
                if rg.chunk_used[c] == 0 {
                    self.n.free += (e - c) as u64;
                }
            }
        }
    }
}
