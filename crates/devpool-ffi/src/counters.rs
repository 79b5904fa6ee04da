//! [`LiveSnapshot`]: what the C ABI itself has handed out on one device, counted at
//! its own boundary by a [`Statistics`](devpool_adaptors::Statistics) adaptor in
//! front of the strategy, independently of the strategy's own statistics.
//!
//! Frameworks want figures the strategies do not keep: peaks that can be reset
//! (PyTorch's `reset_peak_memory_stats`) and cumulative byte totals (PyTorch's
//! `allocated_bytes.all.allocated`). Every block that crosses the C ABI passes the
//! adaptor with its requested and granted size: two gauges and a few counters, all
//! relaxed atomics.

use devpool_adaptors::StatisticsSnapshot;

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

/// The C ABI's own count of one device, as `devpool_stats_json` (`c_abi`) and
/// `devpool_device_stats` show it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub(crate) struct LiveSnapshot {
    pub(crate) requested_bytes: Counter,
    pub(crate) allocated_bytes: Counter,
    pub(crate) blocks: Counter,
    pub(crate) failures: u64,
}

impl LiveSnapshot {
    /// The figures of the [`Statistics`] adaptor in front of a device's allocator.
    /// The byte totals freed are derived: total added minus current.
    pub(crate) fn of(s: &StatisticsSnapshot) -> Self {
        let counter = |c: &devpool_adaptors::Counter| Counter {
            current: c.current,
            peak: c.peak,
            allocated: c.total,
            freed: c.total.saturating_sub(c.current),
        };
        LiveSnapshot {
            requested_bytes: counter(&s.requested_bytes),
            allocated_bytes: counter(&s.granted_bytes),
            blocks: counter(&s.blocks),
            failures: s.failures,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use devpool_adaptors::Statistics;
    use devpool_core::{direct, Allocator};
    use devpool_testing::MockBackend;

    #[test]
    fn counts_peaks_and_totals() {
        let a = Statistics::new(direct(MockBackend::shared()));
        let small = a.alloc(100).unwrap();
        let large = a.alloc(1000).unwrap();
        a.free(small).unwrap();
        let s = LiveSnapshot::of(&a.snapshot());
        assert_eq!(
            s.requested_bytes,
            Counter {
                current: 1000,
                peak: 1100,
                allocated: 1100,
                freed: 100
            }
        );
        let granted = (small.size + large.size) as u64;
        assert_eq!(s.allocated_bytes.peak, granted);
        assert_eq!(s.allocated_bytes.freed, small.size as u64);
        assert_eq!((s.blocks.current, s.blocks.allocated), (1, 2));
        a.reset_peaks();
        assert_eq!(
            LiveSnapshot::of(&a.snapshot()).allocated_bytes.peak,
            large.size as u64
        );
        a.free(large).unwrap();
    }
}
