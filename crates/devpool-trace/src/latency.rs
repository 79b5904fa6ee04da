//! Latency samples: timing calls and summarising them in a histogram whose size does
//! not grow with the number of calls.

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

/// Values below this are counted exactly, one bucket per nanosecond.
const EXACT: u64 = 2048;
/// Above [`EXACT`], each power of two is split into this many buckets (a value is
/// known to within 1/64 of itself).
const SUB_BITS: u32 = 6;
const EXACT_BITS: u32 = EXACT.trailing_zeros();
const BUCKETS: usize = EXACT as usize + ((64 - EXACT_BITS as usize) << SUB_BITS);

/// Counts of latency samples: exact below 2 µs, within 1/64 above; exact count,
/// mean and maximum. Its size is fixed (about 45 KB), whatever the number of calls.
pub(crate) struct Histogram {
    counts: Vec<u64>,
    n: u64,
    sum: u128,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: vec![0; BUCKETS],
            n: 0,
            sum: 0,
            max: 0,
        }
    }
}

/// The bucket of `v`.
fn bucket(v: u64) -> usize {
    if v < EXACT {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // at least EXACT_BITS
    let sub = (v >> (e - SUB_BITS)) & ((1 << SUB_BITS) - 1);
    EXACT as usize + (((e - EXACT_BITS) as usize) << SUB_BITS) + sub as usize
}

/// The smallest value of bucket `i`.
fn floor(i: usize) -> u64 {
    if i < EXACT as usize {
        return i as u64;
    }
    let j = i - EXACT as usize;
    let e = (j >> SUB_BITS) as u32 + EXACT_BITS;
    let sub = (j & ((1 << SUB_BITS) - 1)) as u64;
    ((1u64 << SUB_BITS) + sub) << (e - SUB_BITS)
}

impl Histogram {
    /// Count one sample.
    #[inline]
    pub(crate) fn record(&mut self, v: u64) {
        self.counts[bucket(v)] += 1;
        self.n += 1;
        self.sum += v as u128;
        self.max = self.max.max(v);
    }

    /// Add another histogram's samples.
    pub(crate) fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.n += other.n;
        self.sum += other.sum;
        self.max = self.max.max(other.max);
    }

    /// The sample of nearest rank `p` (0 to 1): exact below 2 µs, else the lowest
    /// value of its bucket (never above the maximum).
    fn rank(&self, p: f64) -> u64 {
        let want = ((p * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= want {
                return floor(i).min(self.max);
            }
        }
        self.max
    }

    /// Median, 99th percentile (nearest rank), mean and maximum.
    pub(crate) fn summary(&self) -> OpLatency {
        if self.n == 0 {
            return OpLatency::default();
        }
        OpLatency {
            count: self.n,
            median_ns: self.rank(0.5),
            p99_ns: self.rank(0.99),
            mean_ns: self.sum as f64 / self.n as f64,
            max_ns: self.max,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(values: impl IntoIterator<Item = u64>) -> OpLatency {
        let mut h = Histogram::default();
        values.into_iter().for_each(|v| h.record(v));
        h.summary()
    }

    #[test]
    fn nearest_rank() {
        let s = of((1..=200).rev());
        assert_eq!(
            (s.count, s.median_ns, s.p99_ns, s.max_ns),
            (200, 100, 198, 200)
        );
        assert_eq!(s.mean_ns, 100.5);
        let s = of([7]);
        assert_eq!((s.median_ns, s.p99_ns), (7, 7));
        assert_eq!(of([]), OpLatency::default());
    }

    #[test]
    fn buckets_cover_every_value_within_a_64th() {
        for v in (0..5000u64).chain([1 << 20, (1 << 40) + 12345, u64::MAX]) {
            let b = bucket(v);
            assert!(b < BUCKETS, "{v}");
            assert!(floor(b) <= v, "{v}");
            assert!(v - floor(b) <= v / 64, "{v}: floor {}", floor(b));
            assert_eq!(bucket(floor(b)), b, "{v}");
        }
        let s = of([100_000, 100_000, 100_500, 3_000_000]);
        assert_eq!(s.median_ns, 99_328, "the bucket of 100000 starts at 99328");
        assert_eq!(s.max_ns, 3_000_000);
        let mut a = Histogram::default();
        a.record(5);
        let mut b = Histogram::default();
        b.record(9);
        a.merge(&b);
        assert_eq!((a.summary().count, a.summary().max_ns), (2, 9));
    }
}
