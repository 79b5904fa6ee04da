//! Moving memory: once the pool holds its limit, a block that needs pages takes the
//! memory of unused chunks elsewhere (the longest runs of them first), mapped at
//! its place with [`Backend::alias`](devpool_core::Backend::alias) in one call.
//! Memory held does not change; the old addresses retire in stream order and are
//! unmapped lazily (see [`retire`](crate::retire)).

use crate::layer::{at as at_range, PageLayer, RangeId};
use crate::queue::Queue;
use devpool_core::{BackendError, DevicePtr};

impl PageLayer {
    /// Move unused chunks the layer holds elsewhere (whole, from the longest runs
    /// of them, each no longer than what is left to fill) to pages `[s, e)` of range `r`, all
    /// missing: their memory is mapped here at once, and their old pages retire in
    /// stream order, all in one backend call. Returns the first page not filled.
    /// Memory held does not change.
    pub(crate) fn move_into(&mut self, r: RangeId, s: usize, e: usize) -> usize {
        let donors = self.pick_donors(e - s);
        if donors.is_empty() {
            return s;
        }
        let shift = self.shift;
        let sources: Vec<(DevicePtr, usize)> = donors
            .iter()
            .map(|(x, c, d, _)| {
                (
                    DevicePtr(self.base(*x) + ((*c as u64) << shift)),
                    (d - c) << shift,
                )
            })
            .collect();
        let to = DevicePtr(self.base(r) + ((s as u64) << shift));
        match self.backend.alias(to, &sources) {
            Ok(()) => {}
            Err(BackendError::Unsupported(_)) => {
                self.can_alias = false;
                return s;
            }
            Err(_) => return s,
        }
        self.calls.moves += 1;
        self.epoch += 1;
        let moved_bytes: u64 = sources.iter().map(|(_, len)| *len as u64).sum();
        self.policy.on_move(moved_bytes);
        let mut at = s;
        let mut moved: Vec<(RangeId, usize, usize)> = Vec::new();
        for (x, c, d, lens) in donors {
            // The donor's pages retire, their memory counted at its new place.
            let src = at_range(&mut self.ranges, x);
            src.retiring.set(c, d, true);
            src.moved.set(c, d, true);
            let n = (d - c) as u64;
            self.n.unused -= n;
            self.n.retiring += n;
            self.n.moved += n;
            let mut k = c;
            for &len in &lens {
                moved.push((x, k, k + len));
                k += len;
            }
            // The same chunks, in the same order, here.
            let dst = at_range(&mut self.ranges, r);
            dst.mapped.set(at, at + (d - c), true);
            dst.top = dst.top.max(at + (d - c));
            let mut h = at;
            for len in lens {
                let used = dst.used.count(h, h + len) as u64;
                dst.set_chunk(h, len);
                self.n.unused += len as u64 - used;
                h += len;
            }
            self.n.mapped += n;
            at += d - c;
        }
        self.sync_held();
        if !moved.is_empty() {
            self.queue_retiring(Queue::Moved, moved);
        }
        at
    }

    /// Free chunks to move, about `want` pages in all: whole runs of neighbouring free
    /// chunks, the longest first (the fewest old mappings to unmap later), then the
    /// chunks of a run that fit what is left. Returns runs as (range, start, end,
    /// chunk lengths in order).
    fn pick_donors(&self, want: usize) -> Vec<(RangeId, usize, usize, Vec<usize>)> {
        // Every run of free chunks, as (range, start, end, lengths).
        let mut runs: Vec<(RangeId, usize, usize, Vec<usize>)> = Vec::new();
        for i in (0..self.ranges.len()).rev() {
            let Some(rg) = self.ranges[i].as_ref() else {
                continue;
            };
            let mut top = rg.top;
            while let Some(q) = rg.mapped.prev_only(&rg.used, &rg.retiring, 0, top) {
                let (c, d) = rg.chunk_of(q);
                top = c;
                if !rg.chunk_free(c, d) {
                    continue;
                }
                match runs.last_mut() {
                    Some((x, start, _, lens)) if x.index() == i && *start == d => {
                        *start = c;
                        lens.insert(0, d - c);
                    }
                    _ => runs.push((RangeId(i as u32), c, d, vec![d - c])),
                }
            }
        }
        runs.sort_by_key(|r| std::cmp::Reverse(r.2 - r.1));
        let mut left = want;
        let mut picked = Vec::new();
        for (x, c, d, lens) in runs {
            if left == 0 {
                break;
            }
            if d - c <= left {
                left -= d - c;
                picked.push((x, c, d, lens));
                continue;
            }
            // Part of a longer run: its first chunks that fit.
            let mut end = c;
            let mut take = Vec::new();
            for len in lens {
                if len > left {
                    break;
                }
                left -= len;
                end += len;
                take.push(len);
            }
            if end > c {
                picked.push((x, c, end, take));
            }
        }
        picked
    }
}
