//! Counting the live blocks on each page.
//!
//! A block touches pages `[p0, p1)`. The pages it covers whole, `[f0, f1)`, no other
//! block can touch: they are used exactly while it lives, so their `used` bits flip
//! a word at a time and they keep no count. Only the pages at its ends, at most two,
//! which it may share with neighbours, count their blocks one by one.
//!
//! The free pages (mapped, unused, in chunks no live block touches) are counted as
//! the `used` bits flip: the chunks wholly inside the flipped pages change state all
//! together (a count of mapped bits), and only the two chunks at its ends are looked
//! at one by one. Every operation thus costs a few words per 64 pages and a bounded
//! amount besides, whatever the block's size, the chunk size or the number of live
//! blocks.

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

    /// The first page, if the block covers it only in part.
    #[inline]
    fn low_edge(self) -> Option<usize> {
        (self.p0 < self.f0).then_some(self.p0)
    }

    /// The last page, if the block covers it only in part (never the first page
    /// too: a block that covers its first page in part covers no later page whole).
    #[inline]
    fn high_edge(self) -> Option<usize> {
        (self.f1.max(self.f0) < self.p1).then_some(self.p1 - 1)
    }
}

/// The pages whose `used` bit flips: the pages covered whole, and the edges whose
/// count goes from 0 to 1 (or back), `lo` and `hi` saying which. Contiguous.
#[inline]
fn flipped(pages: Footprint, lo: Option<usize>, hi: Option<usize>) -> (usize, usize) {
    let (mut a, mut b) = (pages.f0, pages.f1.max(pages.f0));
    if let Some(p) = hi {
        if a == b {
            a = p;
        }
        b = p + 1;
    }
    if let Some(p) = lo {
        if a == b {
            b = p + 1;
        }
        a = p;
    }
    (a, b)
}

/// The free pages among the chunks that hold mapped pages of `[a, b)`, all unused:
/// the chunk of the first and of the last such page, looked at whole, and the
/// mapped pages between them, whose chunks lie inside `[a, b)` and so are free.
#[inline]
fn free_around(rg: &Range, a: usize, b: usize) -> u64 {
    if b == a + 1 && rg.grid == 1 {
        // One page, a chunk of its own: free when mapped, unused and not retiring.
        let free = rg.mapped.get(a) && !rg.used.get(a) && !rg.retiring.get(a);
        return u64::from(free);
    }
    let q1 = rg.mapped.next(a, b, true);
    if q1 >= b {
        return 0;
    }
    let q2 = rg.mapped.prev(a, b, true).unwrap_or(q1);
    let free = |c: usize, e: usize| {
        if rg.used.count(c, e) == 0 && !rg.retiring.get(c) {
            (e - c) as u64
        } else {
            0
        }
    };
    let (c1, e1) = rg.chunk_of(q1);
    let mut n = free(c1, e1);
    if q2 >= e1 {
        let (c2, e2) = rg.chunk_of(q2);
        n += free(c2, e2);
        if e1 < c2 {
            n += rg.mapped.count(e1, c2) as u64;
        }
    }
    n
}

/// Count pages `[a, b)` of `rg` used (`on`) or unused: the bits, and the used,
/// unused and free counts. Returns how many of them are not mapped.
fn flip(rg: &mut Range, n: &mut Counts, a: usize, b: usize, on: bool) -> u64 {
    if a >= b {
        return 0;
    }
    // Turning on: the pages were unused, and the free pages of their chunks stop
    // being free, since each of those chunks now holds a used page. Turning off:
    // the chunks held a used page, and those now without one become free.
    let m = if b == a + 1 {
        u64::from(rg.mapped.get(a))
    } else {
        rg.mapped.count(a, b) as u64
    };
    let k = (b - a) as u64;
    if on {
        n.free -= free_around(rg, a, b);
        rg.used.set(a, b, true);
        n.used += k;
        n.unused -= m;
    } else {
        rg.used.set(a, b, false);
        n.free += free_around(rg, a, b);
        n.used -= k;
        n.unused += m;
    }
    k - m
}

impl PageLayer {
    /// Add one use to the pages of `pages`; returns how many used pages are not
    /// mapped.
    pub(crate) fn add_uses(&mut self, r: RangeId, pages: Footprint) -> u64 {
        let rg = at(&mut self.ranges, r);
        let bump = |rg: &mut Range, p: Option<usize>| {
            let p = p?;
            rg.uses[p] += 1;
            (rg.uses[p] == 1).then_some(p)
        };
        let lo = bump(rg, pages.low_edge());
        let hi = bump(rg, pages.high_edge());
        let (a, b) = flipped(pages, lo, hi);
        flip(rg, &mut self.n, a, b, true)
    }

    /// Take one use off the pages of `pages`: those left with none become unused.
    pub(crate) fn take_uses(&mut self, r: RangeId, pages: Footprint) {
        let rg = at(&mut self.ranges, r);
        let drop = |rg: &mut Range, p: Option<usize>| {
            let p = p?;
            rg.uses[p] -= 1;
            (rg.uses[p] == 0).then_some(p)
        };
        let lo = drop(rg, pages.low_edge());
        let hi = drop(rg, pages.high_edge());
        let (a, b) = flipped(pages, lo, hi);
        flip(rg, &mut self.n, a, b, false);
    }
}
