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
        if !self.can_alias {
            // The pool grows and cannot move its cache: first bring the unused pages
            // within their bound, so the peak stays low.
            let _ = self.enforce(incoming, 0);
        }
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
        let ahead = self.burst_ahead(missing);
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
                let mut want = s + (t - s).div_ceil(batch) * batch;
                if self.cfg.batch_cap > 0 {
                    // Never more ahead than `batch_cap` times what the block needs.
                    want = want.min(t + (t - s) * self.cfg.batch_cap);
                }
                // In a small pool that moves memory (a floor under half a batch),
                // nor more ahead than the floor of unused memory the pool keeps
                // anyway (at least an eighth of a batch): the batch would otherwise
                // be held at its peak (a 225 MiB job held 24 MiB unused). A pool that
                // cannot move keeps its batches whole: on the bundled traces it held
                // more with them cut (docs/BENCHMARKS.md).
                let floor = (self.policy.floor_for(incoming) >> shift) as usize;
                if floor < batch / 2 && self.can_alias {
                    want = want.min(t + floor.max(batch / 8));
                }
                let want = want.max(t + ahead).min(room_end);
                if want > t {
                    end = rg.mapped.next(t, want, true);
                }
            }
            // New memory up to the limit raises no peak; past it, unused memory the
            // pool holds elsewhere moves here first, and only the rest is new.
            let held = self.n.mapped - self.n.moved;
            let limit = self.policy.limit(incoming) >> shift;
            let fresh = limit.saturating_sub(held) as usize;
            let a = if self.can_alias && self.n.unused > 0 && end - s > fresh {
                self.move_into(r, s, end - fresh)
            } else {
                s
            };
            if a < end {
                match self.map_run(r, a, end, &cuts) {
                    Ok(()) => {}
                    Err(Error::Backend(BackendError::OutOfMemory { .. })) if a < t => {
                        // Give back every unused page, waiting for the streams that
                        // used them, and map exactly what the block needs.
                        let _ = self.sweep_moved(true);
                        let _ = self.retire_unused(u64::MAX);
                        let _ = self.poll(true);
                        self.map_run(r, a, t, &cuts)?;
                    }
                    Err(Error::Backend(BackendError::OutOfMemory { .. })) => {}
                    Err(e) => return Err(e),
                }
            }
            p = t;
        }
        Ok(())
    }

    /// Map pages `[s, e)` of range `r`, all missing, in one backend call: cut at
    /// `cuts`, and each piece into chunks of about a divisor-th of it (at least a
    /// page, at most the chunk size).
    pub(crate) fn map_run(&mut self, r: RangeId, s: usize, e: usize, cuts: &[usize]) -> Result<()> {
        let shift = self.shift;
        let (m, div, min) = (
            self.cfg.chunk_pages,
            self.cfg.chunk_divisor,
            self.cfg.chunk_min_pages,
        );
        let mut sizes = Vec::with_capacity((e - s).div_ceil(m) + 1 + cuts.len());
        // Segments between the cuts, each cut into chunks.
        let mut a = s;
        while a < e {
            let seg_end = cuts
                .iter()
                .copied()
                .filter(|&c| c > a && c < e)
                .min()
                .unwrap_or(e);
            let len = ((seg_end - a) / div).clamp(min, m);
            while a < seg_end {
                let b = (a + len).min(seg_end);
                sizes.push((b - a) << shift);
                a = b;
            }
        }
        self.map_sizes(r, s, &sizes)
    }

    /// Map chunks of `sizes` bytes (whole pages each, all missing) one after the
    /// other from page `s` of range `r`, in one backend call, as unused pages unless
    /// a block already counts them as used.
    pub(crate) fn map_sizes(&mut self, r: RangeId, s: usize, sizes: &[usize]) -> Result<()> {
        let shift = self.shift;
        let e = s + sizes.iter().map(|&b| b >> shift).sum::<usize>();
        let base = self.range(r)?.base;
        self.backend
            .map_chunks(DevicePtr(base + ((s as u64) << shift)), sizes)?;
        self.calls.maps += 1;
        self.calls.chunks += sizes.len() as u64;
        self.epoch += 1;
        let rg = at(&mut self.ranges, r);
        rg.mapped.set(s, e, true);
        rg.top = rg.top.max(e);
        let mut a = s;
        for &len in sizes {
            let b = a + (len >> shift);
            rg.set_chunk(a, b - a);
            a = b;
        }
        let used = rg.used.count(s, e) as u64;
        let n = (e - s) as u64;
        self.n.mapped += n;
        self.n.unused += n - used;
        self.sync_held();
        Ok(())
    }
}

impl PageLayer {
    /// Pages to map ahead of a growth of `missing` pages ([`VmConfig::burst_ops`]):
    /// only past the most the pool has held, within `burst_ops` operations of the
    /// previous such growth, and while the bytes freed since then are at most
    /// `burst_free_ratio` of those allocated; then twice what the previous one
    /// mapped ahead, at least a map batch, at most `1 / burst_divisor` of what the
    /// pool holds. Every growth past the peak starts the next count.
    ///
    /// [`VmConfig::burst_ops`]: crate::VmConfig::burst_ops
    pub(crate) fn burst_ahead(&mut self, missing: u64) -> usize {
        let cfg = &self.cfg;
        if cfg.burst_ops == 0 {
            return 0;
        }
        let held = self.n.mapped - self.n.moved;
        if held + missing <= self.held.peak >> self.shift {
            return 0;
        }
        let ops = self.policy.ops_total();
        let freed = self.policy.freed_total();
        let allocated = self.policy.allocated() + freed;
        let last = self.burst;
        let one_way = (freed - last.freed) as f64
            <= cfg.burst_free_ratio * (allocated - last.allocated) as f64;
        let ahead = if ops - last.op <= cfg.burst_ops && one_way {
            let cap = (held / cfg.burst_divisor as u64) as usize;
            (last.ahead * 2).max(cfg.map_batch_pages).min(cap)
        } else {
            0
        };
        self.burst = Burst {
            op: ops,
            freed,
            allocated,
            ahead,
        };
        ahead
    }
}

/// The last growth past the most the pool had held, for growth in bursts.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Burst {
    /// The operation it came at.
    pub op: u64,
    /// Bytes freed and allocated so far then.
    pub freed: u64,
    pub allocated: u64,
    /// Pages it mapped ahead.
    pub ahead: usize,
}
