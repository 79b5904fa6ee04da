//! Where a new block goes.
//!
//! - A block of the same order freed recently (the quick list) is reused first: no
//!   split, no merge, and in virtual mode its pages are most likely still mapped.
//! - Otherwise the smallest free block that fits is split down to size.
//! - In virtual mode a block that needs no new page wins: a few candidates of each
//!   order are scored by how many of the pages the block needs are already mapped,
//!   and each split keeps the half with more of them. Free blocks smaller than a page
//!   always lie in a page in use, hence mapped, so they are taken as they come.

use crate::arena::Inner;
use crate::pool::BuddyPool;
use crate::tree::NIL;

/// Candidates looked at per order, and in all.
const PER_ORDER: usize = 4;
const IN_ALL: usize = 24;

impl BuddyPool {
    /// Pages that a block of `order` serving `size` bytes needs mapped.
    #[inline]
    fn pages_needed(&self, order: u32, size: u64) -> usize {
        if order < self.r.page_order {
            1
        } else {
            size.div_ceil(self.page as u64) as usize
        }
    }

    /// Mapped pages among the first `n` pages of block `i`.
    #[inline]
    fn warmth(&self, g: &Inner, i: u32, n: usize) -> usize {
        let (a, p) = g.page_of(i, self.r.page_order);
        match &g.arena(a).pages {
            Some(pages) => pages.count_mapped(p, n),
            None => n,
        }
    }

    /// A free block of exactly `order` for `size` bytes, taken out of the lists, or
    /// `None` when no free block is large enough.
    pub(crate) fn find(&self, g: &mut Inner, order: u32, size: u64) -> Option<u32> {
        if !self.r.virt {
            if let Some(i) = g.tree.pop_quick(order) {
                return Some(i);
            }
            let mask = g.tree.free_orders_from(order);
            if mask == 0 {
                return None;
            }
            let i = g.tree.free_head(mask.trailing_zeros());
            g.tree.unlink(i);
            return Some(self.descend(g, i, order, size));
        }
        let n = self.pages_needed(order, size);
        let mut best = (NIL, 0usize);
        let q = g.tree.quick_head(order);
        if q != NIL {
            let w = self.warmth(g, q, n);
            if w == n {
                g.tree.unlink(q);
                return Some(q);
            }
            best = (q, w);
        }
        let mut mask = g.tree.free_orders_from(order);
        let mut budget = IN_ALL;
        let mut smallest = NIL;
        while mask != 0 && budget > 0 {
            let j = mask.trailing_zeros();
            mask &= mask - 1;
            let mut c = g.tree.free_head(j);
            if smallest == NIL {
                smallest = c;
            }
            if j < self.r.page_order {
                // Inside a page in use: mapped.
                g.tree.unlink(c);
                return Some(self.descend(g, c, order, size));
            }
            let mut k = 0;
            while c != NIL && k < PER_ORDER && budget > 0 {
                let w = self.warmth(g, c, n);
                if w == n {
                    g.tree.unlink(c);
                    return Some(self.descend(g, c, order, size));
                }
                if w > best.1 {
                    best = (c, w);
                }
                c = g.tree.next_in_list(c);
                k += 1;
                budget -= 1;
            }
        }
        let pick = if best.1 > 0 || (best.0 != NIL && q == best.0) {
            best.0
        } else {
            smallest
        };
        if pick == NIL {
            return None;
        }
        g.tree.unlink(pick);
        Some(self.descend(g, pick, order, size))
    }

    /// Split taken block `i` down to `order`, putting the unused halves in the free
    /// lists; returns the taken block of `order`.
    pub(crate) fn descend(&self, g: &mut Inner, mut i: u32, order: u32, size: u64) -> u32 {
        let n = self.pages_needed(order, size);
        while u32::from(g.tree.node(i).order) > order {
            let l = g.tree.split(i);
            let r = l + 1;
            let half = u32::from(g.tree.node(l).order);
            let right = self.r.virt && half >= self.r.page_order && {
                let wl = self.warmth(g, l, n);
                wl < n && self.warmth(g, r, n) > wl
            };
            let (keep, other) = if right { (r, l) } else { (l, r) };
            g.tree.put_free(other);
            i = keep;
        }
        i
    }
}
