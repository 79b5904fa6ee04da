//! Statistics: the core [`Stats`] of a pool, kept per epoch so that a reset drops the
//! live figures at once, and the arena's own [`ArenaDetail`].

use devpool_core::{Counters, Gauge, Stats};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// What an arena has done, beyond the core [`Stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ArenaDetail {
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

impl ArenaDetail {
    devpool_core::merge_sums!(
        ArenaDetail: chunks,
        chunk_bytes,
        epoch_used_bytes,
        epoch_blocks,
        resets,
        rewinds,
        reclaimed_blocks
    );
}

/// A running sum whose peak is taken when it goes down: between two decreases it only
/// grows, so its highest values are the ones just before a decrease (which
/// `fetch_sub` returns exactly) and the one now. Increases cost one atomic add.
#[derive(Debug, Default)]
struct Sum {
    current: AtomicU64,
    peak: AtomicU64,
}

impl Sum {
    #[inline]
    fn add(&self, v: u64) {
        self.current.fetch_add(v, Relaxed);
    }

    #[inline]
    fn sub(&self, v: u64) {
        let before = self.current.fetch_sub(v, Relaxed);
        raise(&self.peak, before);
    }

    fn get(&self) -> Gauge {
        let current = self.current.load(Relaxed);
        Gauge {
            current,
            peak: self.peak.load(Relaxed).max(current),
        }
    }

    fn clear(&self) {
        self.current.store(0, Relaxed);
        self.peak.store(0, Relaxed);
    }
}

/// Raise `peak` to `v` if it is lower.
#[inline]
pub(crate) fn raise(peak: &AtomicU64, v: u64) {
    if v > peak.load(Relaxed) {
        peak.fetch_max(v, Relaxed);
    }
}

/// The live byte figures of one epoch.
#[derive(Debug, Default)]
struct Bank {
    live: Sum,
    allocated: Sum,
}

/// A pool's counters. Live bytes go to the bank of the block's epoch (two banks, used
/// in turn), so that a new epoch starts from zero at once; reserved bytes and backend
/// calls go to a core [`Counters`].
///
/// Block counts are not kept twice: the pool's ledger holds the blocks handed out
/// and freed in the epoch, so allocations are those of the ended epochs, plus those
/// of this one, plus the records given back by stack-order frees (each was an
/// allocation too); frees are what was handed out and is neither live nor reclaimed
/// by a reset.
#[derive(Debug, Default)]
pub(crate) struct PoolStats {
    banks: [Bank; 2],
    peak_live: AtomicU64,
    peak_allocated: AtomicU64,
    pub(crate) peak_blocks: AtomicU64,
    allocs_before: AtomicU64,
    pub(crate) records_reused: AtomicU64,
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

    /// A block of `epoch` was handed out.
    #[inline]
    pub fn on_alloc(&self, epoch: u64, requested: usize, granted: usize) {
        let b = self.bank(epoch);
        b.live.add(requested as u64);
        b.allocated.add(granted as u64);
    }

    /// A block of `epoch` was freed.
    #[inline]
    pub fn on_free(&self, epoch: u64, requested: usize, granted: usize) {
        let b = self.bank(epoch);
        b.live.sub(requested as u64);
        b.allocated.sub(granted as u64);
    }

    /// Epoch `old`, which handed out `handed_out` blocks with `live` still live, ended
    /// and `new` begins: keep `old`'s peaks and counts, empty `new`'s bank.
    pub fn turn(&self, old: u64, new: u64, handed_out: u64, live: u64) {
        let o = self.bank(old);
        raise(&self.peak_live, o.live.get().peak);
        raise(&self.peak_allocated, o.allocated.get().peak);
        raise(&self.peak_blocks, live);
        self.allocs_before.fetch_add(handed_out, Relaxed);
        let n = self.bank(new);
        n.live.clear();
        n.allocated.clear();
    }

    /// A snapshot as the core [`Stats`]: `epoch` is the current one, which handed out
    /// `handed_out` blocks of which `live` are live.
    pub fn snapshot(&self, epoch: u64, handed_out: u64, live: u64) -> Stats {
        let b = self.bank(epoch);
        let gauge = |s: &Sum, peak: &AtomicU64| {
            let g = s.get();
            Gauge {
                current: g.current,
                peak: g.peak.max(peak.load(Relaxed)),
            }
        };
        let base = self.backend.snapshot();
        let allocations =
            self.allocs_before.load(Relaxed) + handed_out + self.records_reused.load(Relaxed);
        Stats {
            live_bytes: gauge(&b.live, &self.peak_live),
            allocated_bytes: gauge(&b.allocated, &self.peak_allocated),
            reserved_bytes: base.reserved_bytes,
            live_blocks: Gauge {
                current: live,
                peak: self.peak_blocks.load(Relaxed).max(live),
            },
            allocations,
            frees: allocations
                .saturating_sub(live)
                .saturating_sub(self.reclaimed.load(Relaxed)),
            backend_calls: base.backend_calls,
            failures: base.failures,
        }
    }
}
