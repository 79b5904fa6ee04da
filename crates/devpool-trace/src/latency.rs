//! Latency samples: timing calls and summarising the samples.

use crate::report::OpLatency;
use std::hint::black_box;
use std::time::Instant;

/// The cost of timing an empty stretch with two clock readings, in nanoseconds
/// (the median of many tries).
pub(crate) fn timer_overhead_ns() -> u64 {
    let mut samples: Vec<u64> = (0..1001)
        .map(|_| {
            let t = Instant::now();
            black_box(());
            t.elapsed().as_nanos() as u64
        })
        .collect();
    let mid = samples.len() / 2;
    *samples.select_nth_unstable(mid).1
}

/// Median, 99th percentile (nearest rank), mean and maximum of `samples`, which it
/// reorders.
pub(crate) fn summarize(samples: &mut [u64]) -> OpLatency {
    let n = samples.len();
    if n == 0 {
        return OpLatency::default();
    }
    let sum: u128 = samples.iter().map(|&v| v as u128).sum();
    let max = samples.iter().copied().max().unwrap_or(0);
    let rank = |p: f64| ((p * n as f64).ceil() as usize).clamp(1, n) - 1;
    let p99 = *samples.select_nth_unstable(rank(0.99)).1;
    let median = *samples.select_nth_unstable(rank(0.5)).1;
    OpLatency {
        count: n as u64,
        median_ns: median,
        p99_ns: p99,
        mean_ns: sum as f64 / n as f64,
        max_ns: max,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let mut v: Vec<u64> = (1..=200).rev().collect();
        let s = summarize(&mut v);
        assert_eq!(
            (s.count, s.median_ns, s.p99_ns, s.max_ns),
            (200, 100, 198, 200)
        );
        assert_eq!(s.mean_ns, 100.5);
        let mut one = [7];
        let s = summarize(&mut one);
        assert_eq!((s.median_ns, s.p99_ns), (7, 7));
        assert_eq!(summarize(&mut []), OpLatency::default());
    }
}
