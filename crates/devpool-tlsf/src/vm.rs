//! Virtual mode: mapping the pages a new block lands on, and counting the pages a
//! freed block leaves unused.
//!
//! Blocks are packed contiguously, so neighbours share pages. Every page that a live
//! block touches is mapped. A page is unused when it lies wholly inside a free block:
//! since free neighbours always merge, the pages at the ends of a free block are
//! shared with live neighbours and only its whole pages can be unused. Unused pages
//! stay mapped, as a cache, until the policy of [`cache`](crate::cache) unmaps them.

use crate::pool::{Inner, TlsfPool};
use crate::span::{full_pages, touched_pages};
use devpool_core::{BackendError, DevicePtr, Error, Result};

/// Free blocks looked at when the first pick would need mapping.
const PREFER_SCAN: usize = 64;

impl TlsfPool {
    /// Map what block `[b, e)`, about to be carved from free block `[fa, fe)` of span
    /// `span`, is missing: one call per run of missing pages, the last run rounded up
    /// to the map batch where the free block has room. `missing` is how many pages
    /// that is, when known. On error the pool is as it was, but for pages now mapped,
    /// which stay as unused cache.
    pub(crate) fn map_for(
        &self,
        g: &mut Inner,
        span: u32,
        (fa, fe): (u64, u64),
        (b, e): (u64, u64),
        missing: Option<usize>,
    ) -> Result<()> {
        let page = self.page;
        let sid = span as usize;
        let Some(sp) = g.spans[sid].as_ref() else {
            return Err(Error::NotOwned { ptr: DevicePtr(b) });
        };
        let base = sp.base;
        let (f0, f1) = full_pages(base, page, fa, fe);
        let (pb, pe) = touched_pages(base, page, b, e);
        let (w0, w1) = (pb.max(f0), pe.min(f1));
        let Some(pm) = sp.pages.as_ref() else {
            return Ok(());
        };
        // Unused pages the block takes: from here on they are used.
        let span_len = w1.saturating_sub(w0);
        let cached = match missing {
            Some(m) => (span_len - m) as u64,
            None => pm.count(w0, w1) as u64,
        };
        g.unused_pages -= cached;
        if cached as usize == span_len {
            return Ok(());
        }
        // The pool grows: first keep the unused pages within their bound.
        self.note_growth(g, (w1 - w0) as u64 - cached);
        let _ = self.enforce_cache(g, e - b, Some((span, pb, pe)));
        let batch = self.cfg.map_batch_pages;
        let mut mapped_now = 0u64;
        let mut p = w0;
        while p < w1 {
            let Some(pm) = g.spans[sid].as_ref().and_then(|s| s.pages.as_ref()) else {
                break;
            };
            let s = pm.next(p, w1, false);
            if s >= w1 {
                break;
            }
            let t = pm.next(s, w1, true);
            let mut end = t;
            if t == pe && batch > 1 {
                let want = (s + (t - s).div_ceil(batch) * batch).min(f1);
                end = pm.next(pe, want, true).max(t);
            }
            let res = match self.map_pages(g, sid, s, end) {
                Err(Error::Backend(BackendError::OutOfMemory { .. })) => {
                    // Give back the unused pages (not this block's) and map exactly.
                    let _ = self.release_pages(g, u64::MAX, Some((span, pb, pe)));
                    end = t;
                    self.map_pages(g, sid, s, t)
                }
                r => r,
            };
            if let Err(err) = res {
                g.unused_pages += cached + mapped_now;
                return Err(err);
            }
            mapped_now += (end - s) as u64;
            g.unused_pages += (end - t) as u64;
            p = t;
        }
        Ok(())
    }

    /// Pages that block `[b, e)` carved from free block `[fa, fe)` of span `span`
    /// would have to map.
    #[inline]
    pub(crate) fn missing_pages(
        &self,
        g: &Inner,
        span: u32,
        (fa, fe): (u64, u64),
        (b, e): (u64, u64),
    ) -> usize {
        let Some(sp) = g.spans[span as usize].as_ref() else {
            return 0;
        };
        let Some(pm) = sp.pages.as_ref() else {
            return 0;
        };
        let (f0, f1) = full_pages(sp.base, self.page, fa, fe);
        let (pb, pe) = touched_pages(sp.base, self.page, b, e);
        let (w0, w1) = (pb.max(f0), pe.min(f1));
        w1.saturating_sub(w0) - pm.count(w0, w1)
    }

    /// The free block to carve `size` bytes at `align` from: `first`, the index's
    /// pick, unless it lands on unmapped pages and another fitting block needs fewer
    /// (fewest first, then lowest address). Mapping is dear, so this wider search
    /// runs only when the pool would otherwise grow. Returns the block and the pages
    /// it would have to map.
    pub(crate) fn prefer_mapped(
        &self,
        g: &Inner,
        first: u32,
        need: u64,
        size: u64,
        align: u64,
    ) -> (u32, usize) {
        let place = |n: &crate::index::Node| {
            let b = (n.addr + align - 1) & !(align - 1);
            ((n.addr, n.addr + n.size), (b, b + size))
        };
        let n = g.index.node(first);
        let (f, blk) = place(n);
        let mut best = (self.missing_pages(g, n.span, f, blk), n.addr, first);
        if best.0 == 0 {
            return (first, 0);
        }
        g.index.candidates(need, PREFER_SCAN, |i, n| {
            let (f, blk) = place(n);
            let key = (self.missing_pages(g, n.span, f, blk), n.addr, i);
            if key < best {
                best = key;
            }
            best.0 > 0
        });
        (best.2, best.0)
    }

    /// Map pages `[s, e)` of span `sid`.
    pub(crate) fn map_pages(&self, g: &mut Inner, sid: usize, s: usize, e: usize) -> Result<()> {
        let page = self.page;
        let Some(sp) = g.spans[sid].as_mut() else {
            return Ok(());
        };
        let bytes = (e - s) * page as usize;
        self.backend
            .map(DevicePtr(sp.base + s as u64 * page), bytes)?;
        if let Some(pm) = sp.pages.as_mut() {
            pm.set(s, e, true);
        }
        g.mapped_pages += (e - s) as u64;
        g.map_calls += 1;
        self.counters.on_reserve(bytes);
        Ok(())
    }

    /// Unmap pages `[s, e)` of span `sid`, all mapped and unused.
    pub(crate) fn unmap_pages(&self, g: &mut Inner, sid: usize, s: usize, e: usize) -> Result<()> {
        let page = self.page;
        let Some(sp) = g.spans[sid].as_mut() else {
            return Ok(());
        };
        let bytes = (e - s) * page as usize;
        self.backend
            .unmap(DevicePtr(sp.base + s as u64 * page), bytes)?;
        if let Some(pm) = sp.pages.as_mut() {
            pm.set(s, e, false);
        }
        g.mapped_pages -= (e - s) as u64;
        g.unused_pages -= (e - s) as u64;
        g.unmap_calls += 1;
        self.counters.on_release(bytes);
        Ok(())
    }

    /// Block `[b, e)` of span `span` was freed and merged into free block `[fa, fe)`:
    /// count the pages it leaves unused.
    #[inline]
    pub(crate) fn unmapped_by_free(
        &self,
        g: &mut Inner,
        span: u32,
        (fa, fe): (u64, u64),
        (b, e): (u64, u64),
    ) {
        let Some(sp) = g.spans[span as usize].as_ref() else {
            return;
        };
        let (f0, f1) = full_pages(sp.base, self.page, fa, fe);
        let (pb, pe) = touched_pages(sp.base, self.page, b, e);
        g.unused_pages += pe.min(f1).saturating_sub(pb.max(f0)) as u64;
    }

    /// Check the page bookkeeping against the blocks: every page of a live block is
    /// mapped, and the counts of mapped and unused pages are right.
    pub(crate) fn verify_pages(&self, g: &Inner) -> std::result::Result<(), String> {
        use crate::index::{State, NIL};
        let (mut mapped, mut unused, mut regions) = (0u64, 0u64, 0u64);
        for (sid, sp) in g.spans.iter().enumerate() {
            let Some(sp) = sp else { continue };
            let Some(pm) = &sp.pages else {
                regions += sp.size;
                continue;
            };
            mapped += pm.count(0, pm.len()) as u64;
            let mut i = g.index.last(sid as u32);
            while i != NIL {
                let n = g.index.node(i);
                let end = n.addr + n.size;
                if n.state == State::Used {
                    let (a, z) = touched_pages(sp.base, self.page, n.addr, end);
                    if pm.count(a, z) != z - a {
                        return Err(format!("live block at {:#x} has unmapped pages", n.addr));
                    }
                } else {
                    let (a, z) = full_pages(sp.base, self.page, n.addr, end);
                    unused += pm.count(a, z) as u64;
                }
                i = n.prev_phys;
            }
        }
        if (mapped, unused) != (g.mapped_pages, g.unused_pages) {
            return Err(format!(
                "mapped/unused pages {:?} but the bitmaps say {:?}",
                (g.mapped_pages, g.unused_pages),
                (mapped, unused)
            ));
        }
        let reserved = mapped * self.page + regions;
        if reserved != self.counters.reserved() {
            return Err(format!(
                "stats say {} reserved bytes, spans hold {reserved}",
                self.counters.reserved()
            ));
        }
        Ok(())
    }
}
