//! [`replay`]: drive any allocator with a trace and measure it.

use crate::event::{Action, Trace, TraceEvent};
use crate::hash::addr_map;
use crate::latency::{timer_overhead_ns, Histogram};
use crate::recent::Recent;
use crate::report::{BackendCallsSummary, LatencySummary, ReplayReport, TimelinePoint};
use crate::timeline::Timeline;
use devpool_core::{Allocator, Backend, Block, Request, StreamId};
use std::collections::HashMap;
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

/// Run `f`; when `measure`, count its duration less the clock's cost in `hist`, and
/// return that duration too (0 when not measured).
#[inline]
fn timed<T>(measure: bool, overhead: u64, hist: &mut Histogram, f: impl FnOnce() -> T) -> (T, u64) {
    if !measure {
        return (f(), 0);
    }
    let t = Instant::now();
    let out = f();
    let ns = t.elapsed().as_nanos().saturating_sub(overhead as u128) as u64;
    hist.record(ns);
    (out, ns)
}

/// Keep the first error message.
fn note(first: &mut Option<String>, e: &devpool_core::Error) {
    if first.is_none() {
        *first = Some(e.to_string());
    }
}

/// Replay `trace` through `alloc` and measure it: [`replay_events`] over the trace's
/// events.
///
/// ```
/// use devpool_core::direct;
/// use devpool_testing::MockBackend;
/// use devpool_trace::{replay, ReplayOptions, Trace, TraceEvent};
/// let trace = Trace::new("t", vec![
///     TraceEvent::allocate(0x100, 1000),
///     TraceEvent::allocate(0x200, 3000),
///     TraceEvent::free(0x100, 1000),
///     TraceEvent::free(0x300, 10),
///     TraceEvent::free(0x100, 1000),
/// ]);
/// let r = replay(&trace, &direct(MockBackend::shared()), &ReplayOptions::default());
/// assert_eq!((r.allocations, r.frees, r.leaked_at_end), (2, 1, 1));
/// assert_eq!((r.unknown_frees, r.double_frees), (1, 1));
/// assert_eq!(r.peak_live_bytes, 4000);
/// assert!(r.fragmentation_ratio >= 1.0);
/// ```
pub fn replay(trace: &Trace, alloc: &dyn Allocator, opts: &ReplayOptions) -> ReplayReport {
    let events = trace
        .events
        .iter()
        .map(|e| Ok::<_, std::convert::Infallible>(*e));
    match replay_events(&trace.name, events, alloc, opts) {
        Ok(r) => r,
        Err(never) => match never {},
    }
}

/// Replay the events of a trace named `name` through `alloc`, as they come (from
/// [`open_trace`](crate::open_trace), say), and measure it. Memory grows with the
/// blocks live at once, not with the number of events: latencies go to fixed-size
/// histograms and the timeline keeps at most its number of points.
///
/// Each `allocate` event becomes a request of the event's size on its stream; each
/// `free` event frees the block the replay got for that pointer, on the event's
/// stream. A recorded stream handle is only a name: stream 0 is the default stream,
/// and each other handle gets a stream of its own from the backend
/// ([`Backend::create_stream`](devpool_core::Backend::create_stream)), made when the
/// trace first names it and left alive (the allocator's pools may refer to it). Reserved bytes are the backend's own count of
/// device bytes held, read after every event, memory the allocator took before the
/// first event (an initial pool) included; so give each replay a fresh backend and a
/// fresh allocator. Nothing here panics on a bad trace or a failing allocator: failed
/// allocations, allocations at an address still live, double frees, frees of
/// addresses never allocated and refused frees are counted. Blocks still live at the
/// end are counted and freed.
///
/// The first error of `events` ends the replay: the blocks it made are freed and the
/// error is returned.
pub fn replay_events<E>(
    name: &str,
    events: impl IntoIterator<Item = Result<TraceEvent, E>>,
    alloc: &dyn Allocator,
    opts: &ReplayOptions,
) -> Result<ReplayReport, E> {
    let started = Instant::now();
    let backend = alloc.backend().clone();
    let measure = opts.measure_latency;
    let overhead = if measure { timer_overhead_ns() } else { 0 };
    let mut alloc_ns = Histogram::default();
    let mut free_ns = Histogram::default();
    // The same calls, split by whether they called the backend for memory.
    let mut alloc_backend_ns = Histogram::default();
    let mut alloc_host_ns = Histogram::default();
    let mut free_backend_ns = Histogram::default();
    // The event's allocate (true) or free call: its duration, and the backend's
    // memory calls before it.
    let mut last_call: Option<(bool, u64, u64)> = None;
    let mut slots = addr_map::<Slot>(1024);
    let mut recent = Recent::default();
    let mut timeline = Timeline::new(opts.timeline_points);
    let mut r = ReplayReport {
        strategy: alloc.name().to_string(),
        trace: name.to_string(),
        ..ReplayReport::default()
    };
    let mut bytes = Bytes::default();
    let mut streams = Streams::default();
    let mut calls = 0u64;
    let mut sampled_peak = 0u64;
    // The backend's memory calls before the event's allocation, when it succeeded.
    let mut calls_before_allocation = None;

    let before = backend.counters();
    let mut calls_at_last_event = before.memory_calls();
    // Everything the backend holds counts, what the allocator took when it was built
    // (an initial pool) included. When the backend never held more than it holds
    // now, its own peak counter is the replay's peak (and sees peaks inside a call).
    let fresh = before.bytes_in_use.peak == before.bytes_in_use.current;
    let mut failed = None;
    for (i, ev) in events.into_iter().enumerate() {
        let ev = match ev {
            Ok(ev) => ev,
            Err(e) => {
                failed = Some(e);
                break;
            }
        };
        r.events += 1;
        let stream = streams.of(ev.stream, &*backend, &mut r.first_error);
        match ev.action {
            Action::Allocate => {
                recent.reused(ev.ptr);
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
                let memory_calls = backend.counters().memory_calls();
                let (result, ns) = timed(measure, overhead, &mut alloc_ns, || alloc.allocate(req));
                last_call = Some((true, ns, memory_calls));
                calls += 1;
                match result {
                    Ok(block) => {
                        r.allocations += 1;
                        calls_before_allocation = Some(memory_calls);
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
                    let (result, ns) = timed(measure, overhead, &mut free_ns, || {
                        alloc.deallocate(block, stream)
                    });
                    last_call = Some((false, ns, calls_at_last_event));
                    calls += 1;
                    bytes.sub(&block);
                    recent.freed(ev.ptr);
                    match result {
                        Ok(()) => r.frees += 1,
                        Err(e) => {
                            r.free_errors += 1;
                            note(&mut r.first_error, &e);
                        }
                    }
                }
                Some(Slot::Failed) => r.skipped_frees += 1,
                None if recent.contains(ev.ptr) => r.double_frees += 1,
                None => r.unknown_frees += 1,
            },
            Action::AllocateFailure => {}
        }

        // Nothing between the allocation and this reading calls the backend.
        let counters = backend.counters();
        let now_calls = counters.memory_calls();
        if let Some(before) = calls_before_allocation.take() {
            let made = now_calls - before;
            if made > 0 {
                r.allocations_calling_backend += 1;
                r.memory_calls_in_allocations += made;
            }
        }
        if let (true, Some((is_alloc, ns, before))) = (measure, last_call.take()) {
            let called = now_calls != before;
            match (is_alloc, called) {
                (true, true) => alloc_backend_ns.record(ns),
                (true, false) => alloc_host_ns.record(ns),
                (false, true) => free_backend_ns.record(ns),
                (false, false) => {}
            }
        }
        calls_at_last_event = now_calls;
        let reserved = counters.bytes_in_use.current;
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
    if let Some(e) = failed {
        return Err(e);
    }

    if measure {
        let mut all = Histogram::default();
        all.merge(&alloc_ns);
        all.merge(&free_ns);
        r.latency = LatencySummary {
            measured: true,
            timer_overhead_ns: overhead,
            alloc: alloc_ns.summary(),
            free: free_ns.summary(),
            all: all.summary(),
            alloc_calling_backend: alloc_backend_ns.summary(),
            alloc_not_calling_backend: alloc_host_ns.summary(),
            free_calling_backend: free_backend_ns.summary(),
        };
    }
    if let Some(progress) = &opts.progress {
        progress(r.events);
    }
    r.wall_ms = started.elapsed().as_secs_f64() * 1e3;
    Ok(r)
}

/// The backend's streams that stand for a trace's recorded stream handles.
#[derive(Default)]
struct Streams(HashMap<u64, StreamId>);

impl Streams {
    /// The stream for recorded handle `raw` (0: the default stream), made on first
    /// use. A backend that cannot make one gets the default stream, and the first
    /// error says so.
    fn of(
        &mut self,
        raw: u64,
        backend: &dyn Backend,
        first_error: &mut Option<String>,
    ) -> StreamId {
        if raw == 0 {
            return StreamId::DEFAULT;
        }
        *self
            .0
            .entry(raw)
            .or_insert_with(|| match backend.create_stream() {
                Ok(s) => s,
                Err(e) => {
                    first_error.get_or_insert_with(|| {
                        format!("stream {raw:#x} replayed on the default stream: {e}")
                    });
                    StreamId::DEFAULT
                }
            })
    }
}
