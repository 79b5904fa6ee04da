//! Virtual mode: backing blocks with pages, and the unmap policy
//! ([`UnmapPolicy`](crate::UnmapPolicy) documents it).
//!
//! A block of a page or more needs its granted bytes mapped, one page per
//! granule; a smaller block needs the one page it lies in, shared with its
//! neighbours. Pages missing under a new block are mapped in one call per
//! contiguous run. A freed block's pages stay mapped (unused) for the next block.

use crate::arena::Inner;
use crate::pool::BuddyPool;
use devpool_core::{BackendError, DevicePtr, Result};

impl BuddyPool {
    /// The most pages the pool may keep mapped now.
    #[inline]
    fn page_limit(&self, g: &Inner) -> usize {
        let base = if self.r.keep_high_water {
            g.pages.high_water.max(g.pages.used)
        } else {
            g.pages.used
        };
        let slack = ((base as u128 * u128::from(self.r.slack_per_64k)) >> 16) as usize;
        base.saturating_add(slack.max(self.r.slack_min_pages))
    }

    /// Pages to unmap so that `extra` more pages fit under the limit.
    fn excess(&self, g: &Inner, extra: usize) -> usize {
        (g.pages.mapped + extra).saturating_sub(self.page_limit(g))
    }

    /// Unmap unused pages while the pool holds more than its limit.
    #[inline]
    pub(crate) fn enforce_limit(&self, g: &mut Inner) -> Result<usize> {
        if self.r.keep_high_water && g.pages.mapped <= g.pages.high_water {
            return Ok(0); // Under the limit: nothing to look at.
        }
        match self.excess(g, 0) {
            0 => Ok(0),
            want => self.unmap_unused(g, want),
        }
    }

    /// Unmap up to `want` unused pages, longest runs first (the fewest calls), one call
    /// per run; returns the pages unmapped.
    pub(crate) fn unmap_unused(&self, g: &mut Inner, want: usize) -> Result<usize> {
        let mut runs: Vec<(usize, usize, usize)> = Vec::new();
        for (idx, a) in g.arenas.iter().enumerate() {
            if let Some(p) = a.as_ref().and_then(|a| a.pages.as_ref()) {
                runs.extend(p.unused_runs().into_iter().map(|(s, n)| (idx, s, n)));
            }
        }
        runs.sort_by_key(|r| std::cmp::Reverse(r.2));
        let mut done = 0;
        let po = self.r.page_order;
        for (idx, s, len) in runs {
            if done >= want {
                break;
            }
            let Some(a) = g.arenas[idx].as_mut() else {
                continue;
            };
            let Some(pages) = a.pages.as_mut() else {
                continue;
            };
            let take = len.min(want - done);
            let start = s + len - take;
            let at = DevicePtr(a.base).offset(start << po);
            self.backend.unmap(at, take << po)?;
            pages.set_mapped(start, take, false);
            g.pages.mapped -= take;
            g.pages.unused -= take;
            self.counters.on_release(take << po);
            done += take;
        }
        Ok(done)
    }

    /// Map `runs` of arena `arena` (pages already marked in use), first making room
    /// under the limit; on out of memory, unmap every unused page and try once more.
    fn map_runs(&self, g: &mut Inner, arena: u32, runs: &[(usize, usize)]) -> Result<()> {
        let need: usize = runs.iter().map(|r| r.1).sum();
        let excess = self.excess(g, need);
        if excess > 0 {
            // Best effort: a failed unmap leaves more mapped, nothing worse.
            let _ = self.unmap_unused(g, excess);
        }
        let po = self.r.page_order;
        for &(s, len) in runs {
            let at = DevicePtr(g.arena(arena).base).offset(s << po);
            let mut res = self.backend.map(at, len << po);
            if let Err(BackendError::OutOfMemory { .. }) = res {
                if g.pages.unused > 0 {
                    let _ = self.unmap_unused(g, usize::MAX);
                    res = self.backend.map(at, len << po);
                }
            }
            res?;
            if let Some(p) = g.arena_mut(arena).pages.as_mut() {
                p.set_mapped(s, len, true);
            }
            g.pages.mapped += len;
            self.counters.on_reserve(len << po);
        }
        Ok(())
    }

    /// The pages under the first `len` bytes of block `i`: its arena, its first page,
    /// how many pages it covers whole, and the page it covers in part, if any (the
    /// next one, or the first for a block inside one page).
    fn footprint(&self, g: &Inner, i: u32, len: u64) -> (u32, usize, usize, Option<usize>) {
        let po = self.r.page_order;
        let (a, first) = g.page_of(i, po);
        let mask = (1u64 << po) - 1;
        if g.tree.node(i).addr & mask != 0 {
            return (a, first, 0, Some(first));
        }
        let full = (len >> po) as usize;
        (a, first, full, (len & mask != 0).then_some(first + full))
    }

    /// Back taken block `i`, of which `len` bytes are handed out, with mapped pages and
    /// mark them in use. On failure nothing is in use that was not before (pages mapped
    /// on the way stay mapped, unused).
    pub(crate) fn back(&self, g: &mut Inner, i: u32, len: u64) -> Result<()> {
        let (a, first, full, part) = self.footprint(g, i, len);
        let Some(pages) = g.arenas[a as usize].as_mut().and_then(|x| x.pages.as_mut()) else {
            return Ok(());
        };
        // A page covered in part is in use from its first sharer on.
        let new_part = part.is_some_and(|q| pages.add_sharer(q) == 0);
        let n = full + usize::from(new_part);
        let mapped = pages.count_mapped(first, n);
        pages.set_used(first, n, true);
        g.pages.used += n;
        g.pages.unused -= mapped;
        if mapped < n {
            let runs = pages.missing_runs(first, n);
            if let Err(e) = self.map_runs(g, a, &runs) {
                self.unuse(g, a, first, n);
                if let Some(q) = part {
                    if let Some(p) = g.arena_mut(a).pages.as_mut() {
                        p.remove_sharer(q);
                    }
                }
                return Err(e);
            }
        }
        g.pages.high_water = g.pages.high_water.max(g.pages.used);
        Ok(())
    }

    /// Mark pages `p..p + n` of arena `a` not in use.
    fn unuse(&self, g: &mut Inner, a: u32, p: usize, n: usize) {
        if let Some(pages) = g.arenas[a as usize].as_mut().and_then(|x| x.pages.as_mut()) {
            pages.set_used(p, n, false);
            let mapped = pages.count_mapped(p, n);
            g.pages.used -= n;
            g.pages.unused += mapped;
        }
    }

    /// The pages under the first `len` bytes of live block `i` are no longer in use by
    /// it.
    pub(crate) fn release_pages(&self, g: &mut Inner, i: u32, len: u64) {
        let (a, first, full, part) = self.footprint(g, i, len);
        let Some(pages) = g.arenas[a as usize].as_mut().and_then(|x| x.pages.as_mut()) else {
            return;
        };
        let last_out = part.is_some_and(|q| pages.remove_sharer(q) == 0);
        self.unuse(g, a, first, full + usize::from(last_out));
    }

    /// Check the page bitmaps against the counts and the live blocks.
    pub(crate) fn validate_pages(&self, g: &Inner) -> std::result::Result<(), String> {
        let (mut mapped, mut used, mut bad) = (0, 0, 0);
        for a in g.arenas.iter().flatten() {
            if let Some(p) = &a.pages {
                let t = p.tally();
                mapped += t.0;
                used += t.1;
                bad += t.2;
                for page in 0..p.count() {
                    if p.sharers(page) > 0 && !p.is_used(page) {
                        return Err(format!("page {page} has sharers but is not in use"));
                    }
                }
            }
        }
        let c = &g.pages;
        if bad > 0 {
            return Err(format!("{bad} pages in use are not mapped"));
        }
        if (mapped, used, mapped - used) != (c.mapped, c.used, c.unused) {
            return Err(format!(
                "bitmaps: {mapped} mapped, {used} in use; counts: {c:?}"
            ));
        }
        Ok(())
    }
}
