//! [`Statistics`]: exact counters of what passes through an allocator.

use devpool_core::{human_bytes, Allocator, AtomicGauge, Block, Request, Result, StreamId};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Buckets of the request-size histogram: one for zero, one per power of two.
pub const HISTOGRAM_BUCKETS: usize = 65;

/// The histogram bucket of a request of `size` bytes: 0 for zero, otherwise the
/// number of significant bits, so bucket `k` holds sizes in `[2^(k-1), 2^k)`.
///
/// ```
/// use devpool_adaptors::size_bucket;
/// assert_eq!(size_bucket(0), 0);
/// assert_eq!(size_bucket(1), 1);
/// assert_eq!(size_bucket(4095), 12);
/// assert_eq!(size_bucket(4096), 13);
/// ```
#[inline]
pub fn size_bucket(size: usize) -> usize {
    (usize::BITS - size.leading_zeros()) as usize
}

/// A current value, the highest it has been since the last peak reset, and the
/// cumulative total of everything ever added.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counter {
    /// The value now.
    pub current: u64,
    /// The highest value seen.
    pub peak: u64,
    /// Everything ever added.
    pub total: u64,
}

/// A snapshot of a [`Statistics`] adaptor's counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatisticsSnapshot {
    /// Requested bytes of live blocks.
    pub requested_bytes: Counter,
    /// Granted bytes of live blocks.
    pub granted_bytes: Counter,
    /// Live blocks.
    pub blocks: Counter,
    /// Successful allocations.
    pub allocations: u64,
    /// Successful frees.
    pub frees: u64,
    /// Failed allocations.
    pub failures: u64,
    /// Requests (successful or not) per size bucket; see [`size_bucket`].
    pub histogram: [u64; HISTOGRAM_BUCKETS],
}

impl StatisticsSnapshot {
    /// Non-empty histogram buckets as `(smallest size, largest size, requests)`.
    pub fn histogram_rows(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.histogram
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(k, &n)| match k {
                0 => (0, 0, n),
                64 => (1 << 63, u64::MAX, n),
                _ => (1 << (k - 1), (1 << k) - 1, n),
            })
    }
}

impl fmt::Display for StatisticsSnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (label, c, bytes) in [
            ("requested", &self.requested_bytes, true),
            ("granted", &self.granted_bytes, true),
            ("blocks", &self.blocks, false),
        ] {
            let show = |v: u64| if bytes { human_bytes(v) } else { v.to_string() };
            writeln!(
                f,
                "{label:>9}: current {}, peak {}, total {}",
                show(c.current),
                show(c.peak),
                show(c.total)
            )?;
        }
        writeln!(
            f,
            "allocations {}, frees {}, failures {}",
            self.allocations, self.frees, self.failures
        )?;
        for (lo, hi, n) in self.histogram_rows() {
            writeln!(
                f,
                "  {:>10} ..= {:>10}: {n}",
                human_bytes(lo),
                human_bytes(hi)
            )?;
        }
        Ok(())
    }
}

#[derive(Default)]
struct Tally {
    gauge: AtomicGauge,
    total: AtomicU64,
}

impl Tally {
    #[inline]
    fn add(&self, v: u64) {
        self.gauge.add(v);
        self.total.fetch_add(v, Relaxed);
    }

    fn get(&self) -> Counter {
        let g = self.gauge.get();
        Counter {
            current: g.current,
            peak: g.peak,
            total: self.total.load(Relaxed),
        }
    }
}

/// Counts what passes through the allocator it wraps, with atomics only.
///
/// Counts are exact: an allocation is counted once it succeeds, a free once the inner
/// allocator accepts it, so rejected frees change nothing. Peaks are exact as well
/// (each is the highest value the current count ever took). The wrapped allocator's
/// own [`Stats`](devpool_core::Stats) are still what [`Allocator::stats`] returns; this adaptor's counters
/// come from [`snapshot`](Statistics::snapshot).
///
/// ```
/// use devpool_adaptors::Statistics;
/// use devpool_core::{direct, Allocator};
/// use devpool_testing::MockBackend;
/// let a = Statistics::new(direct(MockBackend::shared()));
/// let x = a.alloc(1000).unwrap();
/// let y = a.alloc(3000).unwrap();
/// a.free(x).unwrap();
/// let s = a.snapshot();
/// assert_eq!((s.requested_bytes.current, s.requested_bytes.peak), (3000, 4000));
/// assert_eq!((s.allocations, s.frees), (2, 1));
/// a.reset_peaks();
/// assert_eq!(a.snapshot().requested_bytes.peak, 3000);
/// a.free(y).unwrap();
/// ```
pub struct Statistics<A> {
    inner: A,
    name: String,
    requested: Tally,
    granted: Tally,
    blocks: Tally,
    frees: AtomicU64,
    failures: AtomicU64,
    histogram: [AtomicU64; HISTOGRAM_BUCKETS],
}

impl<A: Allocator> Statistics<A> {
    /// Count what passes through `inner`.
    pub fn new(inner: A) -> Self {
        Statistics {
            name: format!("stats({})", inner.name()),
            inner,
            requested: Tally::default(),
            granted: Tally::default(),
            blocks: Tally::default(),
            frees: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            histogram: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// The wrapped allocator.
    pub fn inner(&self) -> &A {
        &self.inner
    }

    /// The wrapped allocator, unwrapped.
    pub fn into_inner(self) -> A {
        self.inner
    }

    /// A snapshot of the counters.
    pub fn snapshot(&self) -> StatisticsSnapshot {
        let blocks = self.blocks.get();
        StatisticsSnapshot {
            requested_bytes: self.requested.get(),
            granted_bytes: self.granted.get(),
            allocations: blocks.total,
            blocks,
            frees: self.frees.load(Relaxed),
            failures: self.failures.load(Relaxed),
            histogram: std::array::from_fn(|k| self.histogram[k].load(Relaxed)),
        }
    }

    /// Set every peak back to its current value.
    pub fn reset_peaks(&self) {
        self.requested.gauge.reset_peak();
        self.granted.gauge.reset_peak();
        self.blocks.gauge.reset_peak();
    }
}

impl<A: Allocator> Allocator for Statistics<A> {
    devpool_core::forward_allocator!(|a| &a.inner; backend, record_stream, stats, trim, parts, reuse);

    fn name(&self) -> &str {
        &self.name
    }

    #[inline]
    fn allocate(&self, req: Request) -> Result<Block> {
        self.histogram[size_bucket(req.size)].fetch_add(1, Relaxed);
        match self.inner.allocate(req) {
            Ok(b) => {
                self.requested.add(b.requested as u64);
                self.granted.add(b.size as u64);
                self.blocks.add(1);
                Ok(b)
            }
            Err(e) => {
                self.failures.fetch_add(1, Relaxed);
                Err(e)
            }
        }
    }

    #[inline]
    fn deallocate(&self, block: Block, stream: StreamId) -> Result<()> {
        self.inner.deallocate(block, stream)?;
        self.requested.gauge.sub(block.requested as u64);
        self.granted.gauge.sub(block.size as u64);
        self.blocks.gauge.sub(1);
        self.frees.fetch_add(1, Relaxed);
        Ok(())
    }
}
