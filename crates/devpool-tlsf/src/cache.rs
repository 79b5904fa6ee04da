//! The cache policy: how much memory the pool keeps mapped (or, in region mode, in
//! wholly free regions) without a live block on it.
//!
//! The bound is `floor + fraction × peak + (peak − allocated)`, where `peak` is the
//! highest allocated byte count of the current or the previous window of
//! allocations and frees. Memory freed since the recent peak thus stays for reuse (a
//! training step frees its activations and allocates them again in the next step,
//! with no mapping), while on top of the peak at most the floor and the fraction
//! stay unused. When the workload shrinks for two windows, the peak falls and the
//! extra memory is given back.
//!
//! The bound is enforced when the pool is about to map more pages (so the memory
//! held at a new peak is the live blocks plus at most the bound) and at the end of
//! each window; never on the plain allocate and free path. Unused pages are unmapped
//! from the highest addresses down, far from the low end where the allocator packs
//! live blocks, one call per run of pages.

use crate::index::{State, NIL};
use crate::pool::{Inner, TlsfPool};
use crate::span::full_pages;
use devpool_core::{DevicePtr, Result};

/// Unmap calls of the policy per 1000 operations above which unmapping counts as
/// churn.
pub(crate) const CHURN_CALLS: u64 = 8;

impl TlsfPool {
    /// Unused bytes allowed once `incoming` more bytes are allocated.
    pub(crate) fn cache_bound(&self, g: &Inner, incoming: u64) -> u64 {
        let allocated = g.allocated + incoming;
        let peak = g.peak_now.max(g.peak_before).max(allocated);
        let extra = (peak as f64 * self.cfg.cache_fraction) as u64;
        (self.cfg.cache_floor as u64)
            .saturating_add(extra)
            .saturating_add(g.slack)
            .saturating_add(peak - allocated)
    }

    /// The pool maps `pages` pages to grow. When the policy has been unmapping often
    /// in this window (more than [`CHURN_CALLS`] calls per 1000 allocations and
    /// frees), the pages it unmapped were given back too early: a working set larger
    /// than the bound cycles through them. The bound then widens by as much, up to a
    /// quarter of the peak. The widening halves at every window.
    pub(crate) fn note_growth(&self, g: &mut Inner, pages: u64) {
        let churn = pages.min(g.policy_unmapped);
        if churn == 0 || g.policy_unmap_calls * 1000 <= g.ops.max(1024) * CHURN_CALLS {
            return;
        }
        g.policy_unmapped -= churn;
        let cap = g.peak_now.max(g.peak_before) / 4;
        g.slack = (g.slack + 2 * churn * self.page).min(cap);
    }

    /// Bring the unused memory within [`cache_bound`](Self::cache_bound) of
    /// `incoming` more allocated bytes, leaving the pages `exclude` = (span, first,
    /// end) alone.
    pub(crate) fn enforce_cache(
        &self,
        g: &mut Inner,
        incoming: u64,
        exclude: Option<(u32, usize, usize)>,
    ) -> Result<()> {
        let bound = self.cache_bound(g, incoming);
        if self.is_virtual {
            let bound_pages = bound / self.page;
            if g.unused_pages > bound_pages {
                let want = g.unused_pages - bound_pages;
                let done = self.release_pages(g, want, exclude);
                if let Ok(n) = done {
                    g.policy_unmapped += n;
                    g.policy_unmap_calls += 1;
                }
                done?;
            }
        } else {
            let cached = self
                .counters
                .reserved()
                .saturating_sub(g.allocated + incoming);
            if cached > bound {
                self.release_free_spans(g, (cached - bound) as usize, false)?;
            }
        }
        Ok(())
    }

    /// Unmap up to `want` unused pages, highest addresses first, leaving `exclude`
    /// alone; returns the pages unmapped.
    pub(crate) fn release_pages(
        &self,
        g: &mut Inner,
        want: u64,
        exclude: Option<(u32, usize, usize)>,
    ) -> Result<u64> {
        let mut done = 0u64;
        for sid in (0..g.spans.len()).rev() {
            let Some(base) = g.spans[sid]
                .as_ref()
                .filter(|s| s.pages.is_some())
                .map(|s| s.base)
            else {
                continue;
            };
            let mut i = g.index.last(sid as u32);
            while i != NIL && done < want && g.unused_pages > 0 {
                let n = *g.index.node(i);
                if n.state == State::Free {
                    let (f0, f1) = full_pages(base, self.page, n.addr, n.addr + n.size);
                    let mut segs = [(f0, f1), (f1, f1)];
                    if let Some((es, e0, e1)) = exclude {
                        if es as usize == sid && e0 < f1 && e1 > f0 {
                            segs = [(e1.max(f0), f1), (f0, e0.min(f1))];
                        }
                    }
                    for (lo, hi) in segs {
                        done += self.unmap_down(g, sid, lo, hi, want - done)?;
                    }
                }
                i = n.prev_phys;
            }
        }
        Ok(done)
    }

    /// Unmap up to `want` mapped pages of `[lo, hi)` in span `sid`, from the top.
    fn unmap_down(
        &self,
        g: &mut Inner,
        sid: usize,
        lo: usize,
        hi: usize,
        want: u64,
    ) -> Result<u64> {
        let mut top = hi;
        let mut done = 0u64;
        while done < want && top > lo {
            let Some(pm) = g.spans[sid].as_ref().and_then(|s| s.pages.as_ref()) else {
                break;
            };
            let Some(q) = pm.prev(lo, top, true) else {
                break;
            };
            let run = pm.prev(lo, q, false).map_or(lo, |c| c + 1);
            let left = usize::try_from(want - done).unwrap_or(usize::MAX);
            let s = run.max((q + 1).saturating_sub(left));
            self.unmap_pages(g, sid, s, q + 1)?;
            done += (q + 1 - s) as u64;
            top = s;
        }
        Ok(done)
    }

    /// Give back spans with no live block and no mapped page: regions until `want`
    /// bytes are released, and, when `unreserve`, reserved ranges but one (address
    /// space costs no memory, and keeping one range saves reserving it again).
    /// Returns the device bytes released (reserved ranges hold none).
    pub(crate) fn release_free_spans(
        &self,
        g: &mut Inner,
        want: usize,
        unreserve: bool,
    ) -> Result<usize> {
        let mut released = 0;
        let mut ranges = g
            .spans
            .iter()
            .flatten()
            .filter(|s| s.pages.is_some())
            .count();
        for id in (0..g.spans.len()).rev() {
            if released >= want {
                break;
            }
            let Some(sp) = &g.spans[id] else { continue };
            if g.index.whole_free(id as u32).is_none() {
                continue;
            }
            let (base, size) = (DevicePtr(sp.base), sp.size as usize);
            match &sp.pages {
                Some(pm) => {
                    if !unreserve || ranges <= 1 || pm.count(0, pm.len()) > 0 {
                        continue;
                    }
                    ranges -= 1;
                    self.backend.unreserve(base, size)?;
                    self.counters.on_backend_call();
                }
                None => {
                    self.backend.free_region(base, size)?;
                    self.counters.on_release(size);
                    released += size;
                }
            }
            g.index.remove_span(id as u32);
            g.spans[id] = None;
        }
        Ok(released)
    }
}
