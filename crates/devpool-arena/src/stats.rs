//! Statistics: the core [`Stats`] of a pool, kept per epoch so that a reset drops the
//! live figures at once, and the arena's own [`ArenaStats`].

use devpool_core::{AtomicGauge, Counters, Gauge, Stats};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// What an arena has done, beyond the core [`Stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ArenaStats {
    /// Chunks held from the backend.
    pub chunks: usize,
    /// Bytes of those chunks (the core stats' reserved bytes).
    pub chunk_bytes: u64,
    /// Bytes bumped in the current epoch: blocks, alignment padding and blocks already
    /// freed (their room comes back at the next reset or rewind).
    pub epoch_used_bytes: u64,
    /// Blocks handed out in the current epoch.
    pub epoch_blocks: u64,
    /// Explicit resets.
    pub resets: u64,
    /// Rewinds: the arena started over by itself after every block was freed (or a
    /// trim found it empty).
    pub rewinds: u64,
    /// Blocks still live when a reset reclaimed them.
    pub reclaimed_blocks: u64,
}

impl ArenaStats {
    /// Add another snapshot into this one.
    pub fn merge(&mut self, o: &ArenaStats) {
        self.chunks += o.chunks;
        self.chunk_bytes += o.chunk_bytes;
        self.epoch_used_bytes += o.epoch_used_bytes;
        self.epoch_blocks += o.epoch_blocks;
        self.resets += o.resets;
        self.rewinds += o.rewinds;
        self.reclaimed_blocks += o.reclaimed_blocks;
    }
}

/// The live byte figures of one epoch.
#[derive(Debug, Default)]
struct Bank {
    live: AtomicGauge,
    allocated: AtomicGauge,
}

/// Fold a finished epoch's peak into the all-time peak.
fn fold(g: &AtomicGauge, peak: &AtomicU64) {
    peak.fetch_max(g.get().peak, Relaxed);
}

/// Empty a gauge for a new epoch.
fn clear(g: &AtomicGauge) {
    g.sub(g.current());
    g.reset_peak();
}

/// A pool's counters. Live bytes go to the bank of the block's epoch (two banks, used
/// in turn), so that a new epoch starts from zero at once; reserved bytes and backend
/// calls go to a core [`Counters`].
///
/// Block counts are not counted twice: the pool's ledger already holds the live blocks
/// of the epoch and its record index the blocks handed out in it, so allocations are
/// those of the ended epochs plus the current index, and frees are what was handed
/// out and is neither live nor reclaimed by a reset.
#[derive(Debug, Default)]
pub(crate) struct PoolStats {
    banks: [Bank; 2],
    peak_live: AtomicU64,
    peak_allocated: AtomicU64,
    peak_blocks: AtomicU64,
    allocs_before: AtomicU64,
    pub(crate) backend: Counters,
    pub(crate) resets: AtomicU64,
    pub(crate) rewinds: AtomicU64,
    pub(crate) reclaimed: AtomicU64,
}

impl PoolStats {
    #[inline]
    fn bank(&self, epoch: u64) -> &Bank {
        &self.banks[(epoch & 1) as usize]
    }

    /// A block of `epoch` was handed out; `live_blocks` are live now, it included.
    #[inline]
    pub fn on_alloc(&self, epoch: u64, requested: usize, granted: usize, live_blocks: u64) {
        let b = self.bank(epoch);
        b.live.add(requested as u64);
        b.allocated.add(granted as u64);
        if live_blocks > self.peak_blocks.load(Relaxed) {
            self.peak_blocks.fetch_max(live_blocks, Relaxed);
        }
    }

    /// A block of `epoch` was freed.
    #[inline]
    pub fn on_free(&self, epoch: u64, requested: usize, granted: usize) {
        let b = self.bank(epoch);
        b.live.sub(requested as u64);
        b.allocated.sub(granted as u64);
    }

    /// Epoch `old`, which handed out `handed_out` blocks, ended and `new` begins: keep
    /// `old`'s peaks and counts, empty `new`'s bank.
    pub fn turn(&self, old: u64, new: u64, handed_out: u64) {
        let o = self.bank(old);
        fold(&o.live, &self.peak_live);
        fold(&o.allocated, &self.peak_allocated);
        self.allocs_before.fetch_add(handed_out, Relaxed);
        let n = self.bank(new);
        clear(&n.live);
        clear(&n.allocated);
    }

    /// A snapshot as the core [`Stats`]: `epoch` is the current one, in which
    /// `live_blocks` are live and `handed_out` were handed out.
    pub fn snapshot(&self, epoch: u64, live_blocks: u64, handed_out: u64) -> Stats {
        let b = self.bank(epoch);
        let gauge = |g: &AtomicGauge, peak: &AtomicU64| {
            let now = g.get();
            Gauge {
                current: now.current,
                peak: now.peak.max(peak.load(Relaxed)),
            }
        };
        let base = self.backend.snapshot();
        let allocations = self.allocs_before.load(Relaxed) + handed_out;
        Stats {
            live_bytes: gauge(&b.live, &self.peak_live),
            allocated_bytes: gauge(&b.allocated, &self.peak_allocated),
            reserved_bytes: base.reserved_bytes,
            live_blocks: Gauge {
                current: live_blocks,
                peak: self.peak_blocks.load(Relaxed).max(live_blocks),
            },
            allocations,
            frees: allocations
                .saturating_sub(live_blocks)
                .saturating_sub(self.reclaimed.load(Relaxed)),
            backend_calls: base.backend_calls,
            failures: base.failures,
        }
    }
}
