//! Statistics: plain snapshots ([`Stats`]) and the atomic counters behind them.

use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A current value and the highest it has been.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Gauge {
    /// The value now.
    pub current: u64,
    /// The highest value seen.
    pub peak: u64,
}

impl Gauge {
    /// Add another gauge (of another pool) into this one: the currents add, and so
    /// do the peaks, an upper bound of the peak of the sum.
    #[inline]
    pub fn merge(&mut self, o: &Gauge) {
        self.current += o.current;
        self.peak += o.peak;
    }
}

/// A snapshot of an allocator's statistics.
///
/// When an allocator is made of several pools (one per stream, one per route),
/// currents and counts add up exactly; peaks are the sum of the pools' peaks, an
/// upper bound of the true peak (exact with one stream).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// Requested bytes of live blocks.
    pub live_bytes: Gauge,
    /// Granted bytes of live blocks (requested plus rounding).
    pub allocated_bytes: Gauge,
    /// Bytes held from the backend (regions plus mapped physical pages).
    pub reserved_bytes: Gauge,
    /// Live blocks.
    pub live_blocks: Gauge,
    /// Successful allocations.
    pub allocations: u64,
    /// Successful frees.
    pub frees: u64,
    /// Calls to the backend that take or give back memory.
    pub backend_calls: u64,
    /// Failed allocations.
    pub failures: u64,
}

impl Stats {
    /// Add another snapshot into this one (currents and counts add; peaks add too, an
    /// upper bound).
    pub fn merge(&mut self, o: &Stats) {
        self.live_bytes.merge(&o.live_bytes);
        self.allocated_bytes.merge(&o.allocated_bytes);
        self.reserved_bytes.merge(&o.reserved_bytes);
        self.live_blocks.merge(&o.live_blocks);
        self.allocations += o.allocations;
        self.frees += o.frees;
        self.backend_calls += o.backend_calls;
        self.failures += o.failures;
    }

    /// Bytes held from the backend but not handed out.
    pub fn cached_bytes(&self) -> u64 {
        self.reserved_bytes
            .current
            .saturating_sub(self.allocated_bytes.current)
    }
}

/// An atomic current/peak pair.
#[derive(Debug, Default)]
pub struct AtomicGauge {
    current: AtomicU64,
    peak: AtomicU64,
}

impl AtomicGauge {
    /// Add `v` and raise the peak if needed.
    #[inline]
    pub fn add(&self, v: u64) {
        let now = self.current.fetch_add(v, Relaxed) + v;
        if now > self.peak.load(Relaxed) {
            self.peak.fetch_max(now, Relaxed);
        }
    }

    /// Subtract `v`.
    #[inline]
    pub fn sub(&self, v: u64) {
        self.current.fetch_sub(v, Relaxed);
    }

    /// The current value.
    #[inline]
    pub fn current(&self) -> u64 {
        self.current.load(Relaxed)
    }

    /// Snapshot.
    pub fn get(&self) -> Gauge {
        Gauge {
            current: self.current.load(Relaxed),
            peak: self.peak.load(Relaxed),
        }
    }

    /// Set the peak back to the current value.
    pub fn reset_peak(&self) {
        self.peak.store(self.current.load(Relaxed), Relaxed);
    }
}

/// The counters a pool keeps; [`Counters::snapshot`] gives a [`Stats`].
///
/// ```
/// use devpool_core::Counters;
/// let c = Counters::default();
/// c.on_reserve(2 << 20);
/// c.on_alloc(1000, 1024);
/// c.on_free(1000, 1024);
/// let s = c.snapshot();
/// assert_eq!((s.allocations, s.frees, s.live_bytes.peak), (1, 1, 1000));
/// assert_eq!(s.reserved_bytes.current, 2 << 20);
/// ```
#[derive(Debug, Default)]
pub struct Counters {
    live: AtomicGauge,
    allocated: AtomicGauge,
    reserved: AtomicGauge,
    blocks: AtomicGauge,
    allocations: AtomicU64,
    frees: AtomicU64,
    backend_calls: AtomicU64,
    failures: AtomicU64,
}

impl Counters {
    /// A block of `requested` bytes was handed out with `granted` bytes.
    #[inline]
    pub fn on_alloc(&self, requested: usize, granted: usize) {
        self.live.add(requested as u64);
        self.allocated.add(granted as u64);
        self.blocks.add(1);
        self.allocations.fetch_add(1, Relaxed);
    }

    /// A block came back.
    #[inline]
    pub fn on_free(&self, requested: usize, granted: usize) {
        self.live.sub(requested as u64);
        self.allocated.sub(granted as u64);
        self.blocks.sub(1);
        self.frees.fetch_add(1, Relaxed);
    }

    /// Memory was taken from the backend (one backend call).
    #[inline]
    pub fn on_reserve(&self, bytes: usize) {
        self.reserved.add(bytes as u64);
        self.backend_calls.fetch_add(1, Relaxed);
    }

    /// Memory was given back to the backend (one backend call).
    #[inline]
    pub fn on_release(&self, bytes: usize) {
        self.reserved.sub(bytes as u64);
        self.backend_calls.fetch_add(1, Relaxed);
    }

    /// A backend call that moved no memory (e.g. reserving address space).
    #[inline]
    pub fn on_backend_call(&self) {
        self.backend_calls.fetch_add(1, Relaxed);
    }

    /// An allocation failed.
    #[inline]
    pub fn on_failure(&self) {
        self.failures.fetch_add(1, Relaxed);
    }

    /// Bytes reserved now.
    #[inline]
    pub fn reserved(&self) -> u64 {
        self.reserved.current()
    }

    /// Snapshot of every counter.
    pub fn snapshot(&self) -> Stats {
        Stats {
            live_bytes: self.live.get(),
            allocated_bytes: self.allocated.get(),
            reserved_bytes: self.reserved.get(),
            live_blocks: self.blocks.get(),
            allocations: self.allocations.load(Relaxed),
            frees: self.frees.load(Relaxed),
            backend_calls: self.backend_calls.load(Relaxed),
            failures: self.failures.load(Relaxed),
        }
    }

    /// Reset every peak to its current value.
    pub fn reset_peaks(&self) {
        self.live.reset_peak();
        self.allocated.reset_peak();
        self.reserved.reset_peak();
        self.blocks.reset_peak();
    }
}

/// Counts of a pool's live blocks and bytes, kept under the pool's own lock (plain
/// adds: cheaper than atomics, and the lock is held anyway). [`Counters`] is the same
/// with atomics, for pools without a lock.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tally {
    /// Requested bytes of live blocks.
    pub live: Gauge,
    /// Granted bytes of live blocks.
    pub granted: Gauge,
    /// Live blocks.
    pub blocks: Gauge,
    /// Successful allocations.
    pub allocations: u64,
    /// Successful frees.
    pub frees: u64,
}

#[inline]
fn raise_gauge(g: &mut Gauge, v: u64) {
    g.current += v;
    g.peak = g.peak.max(g.current);
}

impl Tally {
    /// A block of `requested` bytes was handed out with `granted` bytes.
    #[inline(always)]
    pub fn on_alloc(&mut self, requested: u64, granted: u64) {
        raise_gauge(&mut self.live, requested);
        raise_gauge(&mut self.granted, granted);
        raise_gauge(&mut self.blocks, 1);
        self.allocations += 1;
    }

    /// A block came back.
    #[inline]
    pub fn on_free(&mut self, requested: u64, granted: u64) {
        self.live.current -= requested;
        self.granted.current -= granted;
        self.blocks.current -= 1;
        self.frees += 1;
    }

    /// Put these counts into `s`.
    pub fn fill(&self, s: &mut Stats) {
        s.live_bytes = self.live;
        s.allocated_bytes = self.granted;
        s.live_blocks = self.blocks;
        s.allocations = self.allocations;
        s.frees = self.frees;
    }
}
