//! [`replay`]: drive any allocator with a trace and measure it.

use crate::event::{Action, Trace};
use crate::hash::addr_map;
use crate::latency::{summarize, timer_overhead_ns};
use crate::report::{BackendCallsSummary, LatencySummary, ReplayReport, TimelinePoint};
use crate::timeline::Timeline;
use devpool_core::{Allocator, Block, Request, StreamId};
use std::fmt;
use std::time::Instant;

/// How often (in events) the progress callback is called.
const PROGRESS_EVERY: u64 = 4096;

/// A progress callback: gets the number of events replayed so far.
pub type ProgressFn = Box<dyn Fn(u64) + Send + Sync>;

/// Settings of a [`replay`].
///
/// ```
/// use devpool_trace::ReplayOptions;
/// let o = ReplayOptions::default();
/// assert_eq!((o.timeline_points, o.measure_latency), (2000, true));
/// let quiet = ReplayOptions { measure_latency: false, ..ReplayOptions::default() };
/// assert!(quiet.progress.is_none());
/// ```
pub struct ReplayOptions {
    /// At most this many timeline points (default 2000; 0 keeps none).
    pub timeline_points: usize,
    /// Whether to time every allocate and free call (default true).
    pub measure_latency: bool,
    /// Called every few thousand events and at the end with the events done so far.
    pub progress: Option<ProgressFn>,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            timeline_points: 2000,
            measure_latency: true,
            progress: None,
        }
    }
}

impl ReplayOptions {
    /// The same options with a progress callback.
    pub fn with_progress(mut self, f: impl Fn(u64) + Send + Sync + 'static) -> Self {
        self.progress = Some(Box::new(f));
        self
    }
}

impl fmt::Debug for ReplayOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplayOptions")
            .field("timeline_points", &self.timeline_points)
            .field("measure_latency", &self.measure_latency)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

/// What the replay holds for a trace pointer.
#[derive(Clone, Copy)]
enum Slot {
    /// The block the allocator returned.
    Live(Block),
    /// The allocation failed: its free is skipped.
    Failed,
}

/// Running byte counts of the replay.
#[derive(Default)]
struct Bytes {
    /// Requested bytes of live blocks.
    live: u64,
    /// Granted bytes of live blocks.
    granted: u64,
}

impl Bytes {
    fn add(&mut self, b: &Block) {
        self.live += b.requested as u64;
        self.granted += b.size as u64;
    }
    fn sub(&mut self, b: &Block) {
        self.live -= b.requested as u64;
        self.granted -= b.size as u64;
    }
}

/// Run `f`; when `measure`, push its duration less the clock's cost to `samples`.
#[inline]
fn timed<T>(measure: bool, overhead: u64, samples: &mut Vec<u64>, f: impl FnOnce() -> T) -> T {
    if !measure {
        return f();
    }
    let t = Instant::now();
    let out = f();
    let ns = t.elapsed().as_nanos() as u64;
    samples.push(ns.saturating_sub(overhead));
    out
}

/// Keep the first error message.
fn note(first: &mut Option<String>, e: &devpool_core::Error) {
    if first.is_none() {
        *first = Some(e.to_string());
    }
}

/// Replay `trace` through `alloc` and measure it.
///
/// Each `allocate` row becomes a request of the row's size on its stream (the handle
/// as a [`StreamId`]); each `free` row frees the block the replay got for that
/// pointer, on the row's stream. Reserved bytes are the backend's own count of device
/// bytes held, read after every event, memory the allocator took before the first
/// event (an initial pool) included; so give each replay a fresh backend and a fresh
/// allocator. Nothing here panics on a bad trace or a failing
/// allocator: failed allocations, frees of unknown pointers and refused frees are
/// counted. Blocks still live at the end are counted and freed.
///
/// ```
/// use devpool_core::{direct, MockBackend};
/// use devpool_trace::{replay, ReplayOptions, Trace, TraceEvent};
/// let trace = Trace::new("t", vec![
///     TraceEvent::allocate(0x100, 1000),
///     TraceEvent::allocate(0x200, 3000),
///     TraceEvent::free(0x100, 1000),
///     TraceEvent::free(0x300, 10),
/// ]);
/// let r = replay(&trace, &direct(MockBackend::shared()), &ReplayOptions::default());
/// assert_eq!((r.allocations, r.frees, r.unknown_frees, r.leaked_at_end), (2, 1, 1, 1));
/// assert_eq!(r.peak_live_bytes, 4000);
/// assert!(r.fragmentation_ratio >= 1.0);
/// ```
pub fn replay(trace: &Trace, alloc: &dyn Allocator, opts: &ReplayOptions) -> ReplayReport {
    let started = Instant::now();
    let backend = alloc.backend().clone();
    let allocs = trace.count(Action::Allocate);
    let frees = trace.count(Action::Free);
    let measure = opts.measure_latency;
    let overhead = if measure { timer_overhead_ns() } else { 0 };
    let mut alloc_ns: Vec<u64> = Vec::with_capacity(if measure { allocs } else { 0 });
    let mut free_ns: Vec<u64> = Vec::with_capacity(if measure { frees } else { 0 });
    let mut slots = addr_map::<Slot>(allocs.min(1 << 20));
    let mut timeline = Timeline::new(trace.events.len(), opts.timeline_points);
    let mut r = ReplayReport {
        strategy: alloc.name().to_string(),
        trace: trace.name.clone(),
        events: trace.events.len() as u64,
        ..ReplayReport::default()
    };
    let mut bytes = Bytes::default();
    let mut calls = 0u64;
    let mut sampled_peak = 0u64;

    let before = backend.counters();
    // Everything the backend holds counts, what the allocator took when it was built
    // (an initial pool) included. When the backend never held more than it holds
    // now, its own peak counter is the replay's peak (and sees peaks inside a call).
    let fresh = before.bytes_in_use.peak == before.bytes_in_use.current;
    for (i, ev) in trace.events.iter().enumerate() {
        let stream = StreamId(ev.stream);
        match ev.action {
            Action::Allocate => {
                if let Some(Slot::Live(old)) = slots.remove(&ev.ptr) {
                    // The recorded allocator handed this address out again, so the
                    // earlier block was freed; the trace lost that row.
                    r.missing_frees += 1;
                    calls += 1;
                    bytes.sub(&old);
                    if let Err(e) = alloc.deallocate(old, old.stream) {
                        r.free_errors += 1;
                        note(&mut r.first_error, &e);
                    }
                }
                let req = Request::new(ev.size).on_stream(stream);
                let result = timed(measure, overhead, &mut alloc_ns, || alloc.allocate(req));
                calls += 1;
                match result {
                    Ok(block) => {
                        r.allocations += 1;
                        bytes.add(&block);
                        r.peak_live_bytes = r.peak_live_bytes.max(bytes.live);
                        slots.insert(ev.ptr, Slot::Live(block));
                    }
                    Err(e) => {
                        r.failed_allocations += 1;
                        note(&mut r.first_error, &e);
                        slots.insert(ev.ptr, Slot::Failed);
                    }
                }
            }
            Action::Free => match slots.remove(&ev.ptr) {
                Some(Slot::Live(block)) => {
                    let result = timed(measure, overhead, &mut free_ns, || {
                        alloc.deallocate(block, stream)
                    });
                    calls += 1;
                    bytes.sub(&block);
                    match result {
                        Ok(()) => r.frees += 1,
                        Err(e) => {
                            r.free_errors += 1;
                            note(&mut r.first_error, &e);
                        }
                    }
                }
                Some(Slot::Failed) => r.skipped_frees += 1,
                None => r.unknown_frees += 1,
            },
            Action::AllocateFailure => {}
        }

        let reserved = backend.counters().bytes_in_use.current;
        let waste = bytes.granted.saturating_sub(bytes.live);
        r.peak_rounding_waste = r.peak_rounding_waste.max(waste);
        if reserved > sampled_peak || i == 0 {
            sampled_peak = reserved;
            r.peak_event = i as u64;
            r.rounding_waste_at_peak = waste;
            r.cached_bytes_at_peak = reserved.saturating_sub(bytes.granted);
        }
        timeline.push(TimelinePoint {
            event: i as u64,
            time_us: ev.time_us,
            live_bytes: bytes.live,
            reserved_bytes: reserved,
        });
        if let Some(progress) = &opts.progress {
            if (i as u64 + 1).is_multiple_of(PROGRESS_EVERY) {
                progress(i as u64 + 1);
            }
        }
    }

    let after = backend.counters();
    r.reserved_at_end = after.bytes_in_use.current;
    r.peak_reserved_bytes = if fresh {
        after.bytes_in_use.peak.max(sampled_peak)
    } else {
        sampled_peak
    };
    r.allocator_peak_reserved = alloc.stats().reserved_bytes.peak;
    r.fragmentation_ratio = if r.peak_live_bytes == 0 {
        0.0
    } else {
        r.peak_reserved_bytes as f64 / r.peak_live_bytes as f64
    };
    r.backend = BackendCallsSummary::between(&before, &after, calls);
    r.timeline = timeline.finish();

    for slot in slots.into_values() {
        if let Slot::Live(block) = slot {
            r.leaked_at_end += 1;
            if let Err(e) = alloc.free(block) {
                r.free_errors += 1;
                note(&mut r.first_error, &e);
            }
        }
    }

    if measure {
        let mut all: Vec<u64> = Vec::with_capacity(alloc_ns.len() + free_ns.len());
        all.extend_from_slice(&alloc_ns);
        all.extend_from_slice(&free_ns);
        r.latency = LatencySummary {
            measured: true,
            timer_overhead_ns: overhead,
            alloc: summarize(&mut alloc_ns),
            free: summarize(&mut free_ns),
            all: summarize(&mut all),
        };
    }
    if let Some(progress) = &opts.progress {
        progress(r.events);
    }
    r.wall_ms = started.elapsed().as_secs_f64() * 1e3;
    r
}
