//! Where a new block goes.
//!
//! Both modes first reuse a block of the same order freed recently (its quick list):
//! no split, no merge, and in virtual mode its pages are most likely still mapped.
//!
//! - Region mode then takes the lowest-addressed free block that fits, in the
//!   lowest span (address-ordered first fit, found in O(orders) by walking down the
//!   tree, each node knowing the largest free block below it), and splits it down to
//!   size. Keeping blocks packed low leaves large free blocks whole at the top, which
//!   on the bundled traces holds far less than taking any free block that fits.
//! - Virtual mode looks for a block that needs no new page: candidates of each order
//!   from the smallest that fits are scored by how many of the pages the block needs
//!   are already mapped (then smaller order, then lower address), a bounded number of
//!   them; each split keeps the half with more mapped pages, and a half with no page
//!   mapped at its start goes to the back of its free list. A free block smaller than
//!   a page lies in a page in use, hence mapped (its buddy, or a block near it, is
//!   live), so it is taken as it comes.
//!   When no candidate is fully mapped, the quick lists are merged first (a block kept
//!   unmerged may hide a mapped range) and the search runs once more.

use crate::pool::BuddyPool;
use crate::span::Inner;
use crate::tree::NIL;

/// Virtual mode: candidates looked at per order, and in all.
const PER_ORDER: usize = 64;
const IN_ALL: usize = 256;

impl BuddyPool {
    /// Pages that a block of `order` handing out `size` bytes needs mapped.
    #[inline]
    fn pages_needed(&self, order: u32, size: u64) -> usize {
        if order < self.r.page_order {
            1
        } else {
            (size.div_ceil(1 << self.r.page_order)).max(1) as usize
        }
    }

    /// A free block of exactly `order` for `size` bytes, taken out of the lists, or
    /// `None` when no free block is large enough.
    pub(crate) fn find(&self, g: &mut Inner, order: u32, size: u64) -> Option<u32> {
        if self.r.virt {
            self.find_mapped(g, order, size)
        } else {
            self.find_lowest(g, order, size)
        }
    }

    /// Region mode: the quick list, then address-ordered first fit.
    fn find_lowest(&self, g: &mut Inner, order: u32, size: u64) -> Option<u32> {
        if let Some(i) = g.tree.pop_quick(order) {
            return Some(i);
        }
        let &a = g.by_base.iter().find(|&&a| g.tree.span_fit(a) >= order)?;
        let root = g.span(a).root;
        let i = g.tree.lowest_fit(root, order)?;
        g.tree.unlink(i);
        Some(self.descend(g, i, order, size))
    }

    /// Virtual mode: the candidate with the most of its pages mapped.
    fn find_mapped(&self, g: &mut Inner, order: u32, size: u64) -> Option<u32> {
        let n = self.pages_needed(order, size);
        // The best so far: more mapped pages, then a smaller order, then a lower address.
        let mut best: Option<((usize, i64, i64), u32)> = None;
        let mut q = g.tree.quick_head(order);
        while q != NIL {
            let w = self.warmth(g, q, n);
            if w == n {
                g.tree.unlink(q);
                return Some(q);
            }
            let key = (w, -i64::from(order), -(g.tree.node(q).addr as i64));
            if best.is_none_or(|b| key > b.0) {
                best = Some((key, q));
            }
            q = g.tree.next_in_list(q);
        }
        let mut mask = g.tree.free_orders_from(order);
        let mut budget = IN_ALL;
        while mask != 0 && budget > 0 {
            let j = mask.trailing_zeros();
            mask &= mask - 1;
            let mut c = g.tree.free_head(j);
            if j < self.r.page_order {
                // Inside a page in use: mapped.
                g.tree.unlink(c);
                return Some(self.descend(g, c, order, size));
            }
            for _ in 0..PER_ORDER.min(budget) {
                if c == NIL {
                    break;
                }
                let w = self.warmth(g, c, n);
                let key = (w, -i64::from(j), -(g.tree.node(c).addr as i64));
                if best.is_none_or(|b| key > b.0) {
                    best = Some((key, c));
                }
                c = g.tree.next_in_list(c);
                budget -= 1;
            }
            if best.is_some_and(|b| b.0 .0 == n) {
                break;
            }
        }
        let (key, pick) = best?;
        if key.0 < n && g.tree.has_quick() {
            g.tree.flush_quick();
            return self.find_mapped(g, order, size);
        }
        g.tree.unlink(pick);
        Some(self.descend(g, pick, order, size))
    }

    /// Split taken block `i` down to `order`, putting the unused halves in the free
    /// lists; returns the taken block of `order`.
    pub(crate) fn descend(&self, g: &mut Inner, i: u32, order: u32, size: u64) -> u32 {
        let n = self.pages_needed(order, size);
        let top = g.tree.node(i).order;
        let mut at = i;
        while u32::from(g.tree.node(at).order) > order {
            let half = u32::from(g.tree.node(at).order) - 1;
            if !(self.r.virt && half >= self.r.page_order) {
                at = g.tree.split_off(at, false, false);
                continue;
            }
            // Keep the half with more of the pages needed mapped; a half with no page
            // mapped at its start goes to the back of its list.
            let l = g.tree.split(at);
            let r = l + 1;
            let wl = self.warmth(g, l, n);
            let right = wl < n && self.warmth(g, r, n) > wl;
            let (keep, other) = if right { (r, l) } else { (l, r) };
            if self.warmth(g, other, 1) == 0 {
                g.tree.put_free_back(other);
            } else {
                g.tree.put_free(other);
            }
            at = keep;
        }
        g.tree.settle(i, top.into());
        at
    }
}
