//! [`LiveCounters`]: what the C ABI itself has handed out on one device, counted at
//! its own boundary, independently of the strategy's statistics.
//!
//! Frameworks want figures the strategies do not keep: peaks that can be reset
//! (PyTorch's `reset_peak_memory_stats`) and cumulative byte totals (PyTorch's
//! `allocated_bytes.all.allocated`). The C ABI sees every block that crosses it with
//! its requested and granted size, so it counts them here: two gauges and a few
//! counters, all relaxed atomics.

use devpool_core::AtomicGauge;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// One figure as PyTorch's `Stat` keeps it: now, peak since the last reset, and the
/// cumulative amounts added and taken away.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[repr(C)]
pub struct Counter {
    /// The value now.
    pub current: u64,
    /// The highest value since the peaks were last reset.
    pub peak: u64,
    /// Everything ever added.
    pub allocated: u64,
    /// Everything ever taken away.
    pub freed: u64,
}

/// Live blocks of one device, as the C ABI handed them out.
#[derive(Debug, Default)]
pub(crate) struct LiveCounters {
    requested: AtomicGauge,
    granted: AtomicGauge,
    blocks: AtomicGauge,
    allocations: AtomicU64,
    frees: AtomicU64,
    requested_total: AtomicU64,
    granted_total: AtomicU64,
    failures: AtomicU64,
}

/// A snapshot of [`LiveCounters`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub(crate) struct LiveSnapshot {
    pub(crate) requested_bytes: Counter,
    pub(crate) allocated_bytes: Counter,
    pub(crate) blocks: Counter,
    pub(crate) failures: u64,
}

impl LiveCounters {
    /// A block of `requested` bytes was handed out with `granted` bytes.
    #[inline]
    pub(crate) fn on_alloc(&self, requested: usize, granted: usize) {
        self.requested.add(requested as u64);
        self.granted.add(granted as u64);
        self.blocks.add(1);
        self.allocations.fetch_add(1, Relaxed);
        self.requested_total.fetch_add(requested as u64, Relaxed);
        self.granted_total.fetch_add(granted as u64, Relaxed);
    }

    /// A block handed out with these sizes came back.
    #[inline]
    pub(crate) fn on_free(&self, requested: usize, granted: usize) {
        self.requested.sub(requested as u64);
        self.granted.sub(granted as u64);
        self.blocks.sub(1);
        self.frees.fetch_add(1, Relaxed);
    }

    /// An allocation failed.
    #[cold]
    pub(crate) fn on_failure(&self) {
        self.failures.fetch_add(1, Relaxed);
    }

    /// Set every peak back to its current value.
    pub(crate) fn reset_peaks(&self) {
        self.requested.reset_peak();
        self.granted.reset_peak();
        self.blocks.reset_peak();
    }

    /// A snapshot. The byte totals freed are derived: total added minus current.
    pub(crate) fn snapshot(&self) -> LiveSnapshot {
        let counter = |g: &AtomicGauge, total: u64| {
            let now = g.get();
            Counter {
                current: now.current,
                peak: now.peak,
                allocated: total,
                freed: total.saturating_sub(now.current),
            }
        };
        let allocations = self.allocations.load(Relaxed);
        LiveSnapshot {
            requested_bytes: counter(&self.requested, self.requested_total.load(Relaxed)),
            allocated_bytes: counter(&self.granted, self.granted_total.load(Relaxed)),
            blocks: counter(&self.blocks, allocations),
            failures: self.failures.load(Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_peaks_and_totals() {
        let c = LiveCounters::default();
        c.on_alloc(100, 256);
        c.on_alloc(1000, 1024);
        c.on_free(100, 256);
        let s = c.snapshot();
        assert_eq!(
            s.requested_bytes,
            Counter {
                current: 1000,
                peak: 1100,
                allocated: 1100,
                freed: 100
            }
        );
        assert_eq!(s.allocated_bytes.peak, 1280);
        assert_eq!(s.blocks.current, 1);
        assert_eq!(s.blocks.allocated, 2);
        c.reset_peaks();
        assert_eq!(c.snapshot().allocated_bytes.peak, 1024);
        c.on_failure();
        assert_eq!(c.snapshot().failures, 1);
    }
}
