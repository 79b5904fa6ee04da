//! Mapping: the runs of missing pages under a new block, rounded up to the map
//! batch, cut into physical chunks, one backend call per run.

use crate::layer::{at, PageLayer, RangeId};
use crate::uses::Footprint;
use devpool_core::{BackendError, DevicePtr, Error, Result};

impl PageLayer {
    /// Map the pages of `[p0, p1)` (a new block's, already counted as used) that are
    /// missing, `missing` of them, for a block of `incoming` bytes carved from free
    /// room `room`. First keeps the cache within its bound.
    pub(crate) fn grow(
        &mut self,
        r: RangeId,
        pages: Footprint,
        room: (u64, u64),
        missing: u64,
        incoming: u64,
    ) -> Result<()> {
        self.policy.on_growth(missing << self.shift);
        // The pool grows: first bring the unused pages within their bound, and unmap
        // what the streams have already passed, so the peak stays low.
        let _ = self.enforce(incoming);
        if !self.retire.is_empty() {
            let _ = self.poll(false);
        }
        let shift = self.shift;
        let batch = self.cfg.map_batch_pages;
        let (p0, p1) = (pages.p0, pages.p1);
        // Chunks end where the block's whole pages do: the pages at its ends, which
        // neighbours may share, and the pages mapped ahead of it are chunks of their
        // own, so that the block's chunks are free to go once it is.
        let cuts = [pages.f0, pages.f1.max(pages.f0), p1];
        let rg = self.range(r)?;
        let (lo, hi) = (room.0.max(rg.base), room.1.min(rg.base + rg.size));
        let room_end = if lo < hi {
            rg.inside(shift, lo, hi).1
        } else {
            p1
        };
        let mut p = p0;
        while p < p1 {
            let rg = self.range(r)?;
            let s = rg.mapped.next(p, p1, false);
            if s >= p1 {
                break;
            }
            let t = rg.mapped.next(s, p1, true);
            let mut end = t;
            if t == p1 && batch > 1 {
                let want = (s + (t - s).div_ceil(batch) * batch).min(room_end);
                if want > t {
                    end = rg.mapped.next(t, want, true);
                }
            }
            match self.map_run(r, s, end, &cuts) {
                Ok(()) => {}
                Err(Error::Backend(BackendError::OutOfMemory { .. })) => {
                    // Give back every unused page, waiting for the streams that used
                    // them, and map exactly what the block needs.
                    let _ = self.retire_unused(u64::MAX);
                    let _ = self.poll(true);
                    self.map_run(r, s, t, &cuts)?;
                }
                Err(e) => return Err(e),
            }
            p = t;
        }
        Ok(())
    }

    /// Map pages `[s, e)` of range `r`, all missing, in one backend call: chunks of
    /// at most the chunk size, cut at multiples of it and at `cuts`.
    pub(crate) fn map_run(&mut self, r: RangeId, s: usize, e: usize, cuts: &[usize]) -> Result<()> {
        let shift = self.shift;
        let m = self.cfg.chunk_pages;
        let mut sizes = Vec::with_capacity((e - s).div_ceil(m) + 1 + cuts.len());
        let mut a = s;
        while a < e {
            let mut b = ((a / m + 1) * m).min(e);
            for &c in cuts {
                if c > a && c < b {
                    b = c;
                }
            }
            sizes.push((b - a) << shift);
            a = b;
        }
        let base = self.range(r)?.base;
        self.backend
            .map_chunks(DevicePtr(base + ((s as u64) << shift)), &sizes)?;
        self.calls.maps += 1;
        self.calls.chunks += sizes.len() as u64;
        let rg = at(&mut self.ranges, r);
        rg.mapped.set(s, e, true);
        rg.top = rg.top.max(e);
        let mut a = s;
        for &len in &sizes {
            let b = a + (len >> shift);
            rg.head.set(a, a + 1, true);
            if rg.used.count(a, b) == 0 {
                self.n.free += (b - a) as u64;
            }
            a = b;
        }
        let used = rg.used.count(s, e) as u64;
        let n = (e - s) as u64;
        self.n.mapped += n;
        self.n.unused += n - used;
        self.held.current += n << shift;
        self.held.peak = self.held.peak.max(self.held.current);
        Ok(())
    }
}
