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
    fn page_limit(&self, g: &Inner) -> usize {
        let u = &self.r.unmap;
        let slack = (g.live_bytes as f64 * u.slack_fraction).max(u.slack_min as f64);
        let slack_pages = (slack / self.page as f64).min(usize::MAX as f64 / 2.0) as usize;
        let floor = g.pages.used.saturating_add(slack_pages);
        if u.keep_high_water {
            floor.max(g.pages.high_water)
        } else {
            floor
        }
    }

    /// Unmap unused pages while the pool holds more than its limit.
    pub(crate) fn enforce_limit(&self, g: &mut Inner) -> Result<usize> {
        let limit = self.page_limit(g);
        if g.pages.mapped > limit {
            self.unmap_unused(g, g.pages.mapped - limit)
        } else {
            Ok(0)
        }
    }

    /// Unmap up to `want` unused pages, highest addresses first, one call per run;
    /// returns the pages unmapped.
    pub(crate) fn unmap_unused(&self, g: &mut Inner, want: usize) -> Result<usize> {
        let mut done = 0;
        let po = self.r.page_order;
        for idx in (0..g.arenas.len()).rev() {
            if done >= want || g.pages.unused == 0 {
                break;
            }
            let Some(a) = g.arenas[idx].as_mut() else {
                continue;
            };
            let Some(pages) = a.pages.as_mut() else {
                continue;
            };
            for (s, len) in pages.unused_runs() {
                if done >= want {
                    break;
                }
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
        }
        Ok(done)
    }

    /// Map `runs` of arena `arena` (pages already marked in use), first making room
    /// under the limit; on out of memory, unmap every unused page and try once more.
    fn map_runs(&self, g: &mut Inner, arena: u32, runs: &[(usize, usize)]) -> Result<()> {
        let need: usize = runs.iter().map(|r| r.1).sum();
        let limit = self.page_limit(g);
        if g.pages.mapped + need > limit {
            // Best effort: a failed unmap leaves more mapped, nothing worse.
            let _ = self.unmap_unused(g, g.pages.mapped + need - limit);
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

    /// Back taken block `i`, serving `size` bytes, with mapped pages and mark them in
    /// use. On failure nothing is in use that was not before (pages mapped on the way
    /// stay mapped, unused).
    pub(crate) fn back(&self, g: &mut Inner, i: u32, size: u64) -> Result<()> {
        let order = u32::from(g.tree.node(i).order);
        let (a, p) = g.page_of(i, self.r.page_order);
        let Some(pages) = g.arenas[a as usize].as_mut().and_then(|x| x.pages.as_mut()) else {
            return Ok(());
        };
        let counts = &mut g.pages;
        if order < self.r.page_order {
            if pages.add_sharer(p) == 0 {
                let mapped = pages.is_mapped(p);
                pages.set_used(p, 1, true);
                counts.used += 1;
                if mapped {
                    counts.unused -= 1;
                } else if let Err(e) = self.map_runs(g, a, &[(p, 1)]) {
                    self.release_pages(g, i, 1);
                    return Err(e);
                }
            }
        } else {
            let n = size.div_ceil(self.page as u64) as usize;
            let mapped = pages.count_mapped(p, n);
            pages.set_used(p, n, true);
            counts.used += n;
            counts.unused -= mapped;
            if mapped < n {
                let runs = pages.missing_runs(p, n);
                if let Err(e) = self.map_runs(g, a, &runs) {
                    self.unuse(g, a, p, n);
                    return Err(e);
                }
            }
        }
        g.pages.high_water = g.pages.high_water.max(g.pages.used);
        Ok(())
    }

    /// Mark pages `p..p + n` of arena `a` not in use.
    fn unuse(&self, g: &mut Inner, a: u32, p: usize, n: usize) {
        if let Some(pages) = g.arena_mut(a).pages.as_mut() {
            pages.set_used(p, n, false);
            let mapped = pages.count_mapped(p, n);
            g.pages.used -= n;
            g.pages.unused += mapped;
        }
    }

    /// The pages of live block `i`, granted `granted` bytes, are no longer in use.
    pub(crate) fn release_pages(&self, g: &mut Inner, i: u32, granted: u64) {
        let order = u32::from(g.tree.node(i).order);
        let (a, p) = g.page_of(i, self.r.page_order);
        if order < self.r.page_order {
            let Some(pages) = g.arena_mut(a).pages.as_mut() else {
                return;
            };
            if pages.remove_sharer(p) == 0 {
                self.unuse(g, a, p, 1);
            }
        } else {
            self.unuse(g, a, p, (granted / self.page as u64) as usize);
        }
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
