//! Time spent inside the driver, per entry point, for one [`CudaBackend`]: how many
//! calls, their total and their longest. It says where a slow allocation's time
//! went (creating memory, mapping it, granting access, unmapping, events).
//!
//! Only the backend's own calls are timed (memory, events, stream waits); the
//! driver pool's `cuMemAllocAsync` / `cuMemFreeAsync`, whose cost is what a
//! comparison measures, are not, so the clock adds nothing to them. A timed call
//! costs two clock readings more (tens of nanoseconds against the microseconds of
//! the calls timed).
//!
//! [`CudaBackend`]: crate::CudaBackend

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

/// A timed driver entry point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Call {
    MemCreate,
    MemMap,
    MemSetAccess,
    MemUnmap,
    MemRelease,
    MemRetainAllocationHandle,
    MemAddressReserve,
    MemAddressFree,
    MemAlloc,
    MemFree,
    EventCreate,
    EventDestroy,
    EventRecord,
    EventQuery,
    EventSynchronize,
    StreamWaitEvent,
    StreamSynchronize,
    CtxSynchronize,
}

/// Names of the calls, in the order of [`Call`].
const NAMES: [&str; 18] = [
    "cuMemCreate",
    "cuMemMap",
    "cuMemSetAccess",
    "cuMemUnmap",
    "cuMemRelease",
    "cuMemRetainAllocationHandle",
    "cuMemAddressReserve",
    "cuMemAddressFree",
    "cuMemAlloc",
    "cuMemFree",
    "cuEventCreate",
    "cuEventDestroy",
    "cuEventRecord",
    "cuEventQuery",
    "cuEventSynchronize",
    "cuStreamWaitEvent",
    "cuStreamSynchronize",
    "cuCtxSynchronize",
];

/// The time one driver entry point took in a backend's calls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriverCallTime {
    /// The entry point, as the driver names it (`cuMemCreate`).
    pub call: &'static str,
    /// Calls made.
    pub calls: u64,
    /// Time inside them, in nanoseconds.
    pub total_ns: u64,
    /// The longest one, in nanoseconds.
    pub max_ns: u64,
}

/// Calls, total and longest time of one entry point.
#[derive(Default)]
struct Slot {
    calls: AtomicU64,
    total: AtomicU64,
    max: AtomicU64,
}

/// The running times of every [`Call`].
#[derive(Default)]
pub(crate) struct DriverClock {
    slots: [Slot; NAMES.len()],
}

impl DriverClock {
    /// Run `f` (one driver call) and add its time to `call`'s.
    #[inline]
    pub(crate) fn time<R>(&self, call: Call, f: impl FnOnce() -> R) -> R {
        let t = Instant::now();
        let r = f();
        let ns = t.elapsed().as_nanos() as u64;
        let s = &self.slots[call as usize];
        s.calls.fetch_add(1, Relaxed);
        s.total.fetch_add(ns, Relaxed);
        s.max.fetch_max(ns, Relaxed);
        r
    }

    /// Every entry point called at least once, most time first.
    pub(crate) fn snapshot(&self) -> Vec<DriverCallTime> {
        let mut v: Vec<DriverCallTime> = self
            .slots
            .iter()
            .zip(NAMES)
            .map(|(s, call)| DriverCallTime {
                call,
                calls: s.calls.load(Relaxed),
                total_ns: s.total.load(Relaxed),
                max_ns: s.max.load(Relaxed),
            })
            .filter(|t| t.calls > 0)
            .collect();
        v.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.call.cmp(b.call)));
        v
    }

    /// Start again from zero.
    pub(crate) fn reset(&self) {
        for s in &self.slots {
            s.calls.store(0, Relaxed);
            s.total.store(0, Relaxed);
            s.max.store(0, Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_counted_summed_and_the_longest_kept() {
        let c = DriverClock::default();
        assert!(c.snapshot().is_empty());
        let v = c.time(Call::MemMap, || 7);
        assert_eq!(v, 7);
        c.time(Call::MemMap, || {
            std::thread::sleep(std::time::Duration::from_millis(2))
        });
        c.time(Call::EventQuery, || ());
        let s = c.snapshot();
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].call, s[0].calls), ("cuMemMap", 2));
        assert!(s[0].max_ns >= 2_000_000 && s[0].total_ns >= s[0].max_ns);
        assert_eq!((s[1].call, s[1].calls), ("cuEventQuery", 1));
        c.reset();
        assert!(c.snapshot().is_empty());
    }

    #[test]
    fn every_call_has_its_name() {
        assert_eq!(NAMES[Call::CtxSynchronize as usize], "cuCtxSynchronize");
        assert_eq!(NAMES[Call::MemCreate as usize], "cuMemCreate");
        assert_eq!(NAMES[Call::StreamWaitEvent as usize], "cuStreamWaitEvent");
    }
}
