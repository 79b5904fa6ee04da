//! Replaying traces through the direct allocator over a fresh mock backend.
mod common;

use devpool_core::{direct, Allocator, Backend, Block, Request, Stats, StreamId, GIB};
use devpool_testing::{MockBackend, MockConfig};
use devpool_trace::{read_trace, replay, Action, ReplayOptions, ReplayReport, Trace, TraceEvent};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

fn bundled(file: &str) -> Trace {
    read_trace(&common::bundled(file)).unwrap()
}

fn replay_direct(trace: &Trace, opts: &ReplayOptions) -> (ReplayReport, Arc<MockBackend>) {
    let mock = MockBackend::shared();
    let alloc = direct(mock.clone());
    (replay(trace, &alloc, opts), mock)
}

#[test]
fn bundled_traces_on_direct() {
    for file in ["resnet50_train.csv.gz", "gpt2_train_varlen.csv.gz"] {
        let trace = bundled(file);
        let summary = trace.summary();
        let (r, mock) = replay_direct(&trace, &ReplayOptions::default());
        assert!(r.fragmentation_ratio.is_finite(), "{file}");
        assert!(
            r.fragmentation_ratio >= 1.0,
            "{file}: {}",
            r.fragmentation_ratio
        );
        assert_eq!(r.strategy, "direct");
        assert_eq!(r.trace, trace.name);
        assert_eq!(r.events as usize, trace.events.len());
        assert_eq!(r.allocations as usize, trace.count(Action::Allocate));
        assert_eq!(r.frees as usize, trace.count(Action::Free));
        assert_eq!(r.failed_allocations + r.unknown_frees + r.free_errors, 0);
        assert_eq!(r.peak_live_bytes, summary.peak_live_bytes);
        assert_eq!(r.leaked_at_end, summary.live_at_end);
        assert!(r.peak_reserved_bytes >= r.peak_live_bytes);
        // The direct allocator makes one region per block and frees it with the block.
        assert_eq!(r.backend.region_allocs, r.allocations);
        assert_eq!(r.allocations_calling_backend, r.allocations);
        assert_eq!(r.memory_calls_in_allocations, r.backend.region_allocs);
        assert_eq!(r.allocations_calling_backend_pct(), 100.0);
        assert_eq!(r.backend.region_frees, r.frees);
        assert_eq!(r.backend.per_1000_ops.memory_calls, 1000.0);
        assert_eq!(r.backend.pages_mapped, 0);
        // Leaked blocks were freed after the measurements.
        assert_eq!(mock.counters().bytes_in_use.current, 0);
        assert_eq!(mock.live_regions(), 0);
        assert!(r.latency.measured);
        assert_eq!(r.latency.alloc.count, r.allocations);
        assert_eq!(r.latency.free.count, r.frees);
        // Every call of direct reaches the backend.
        assert_eq!(r.latency.alloc_calling_backend.count, r.allocations);
        assert_eq!(r.latency.alloc_not_calling_backend.count, 0);
        assert_eq!(r.latency.free_calling_backend.count, r.frees);
        assert_eq!(
            r.latency.alloc_calling_backend.max_ns,
            r.latency.alloc.max_ns
        );
        assert!(r.latency.alloc.median_ns <= r.latency.alloc.p99_ns);
        assert!(r.latency.all.p99_ns <= r.latency.all.max_ns);
        assert!(r.wall_ms > 0.0);
    }
}

#[test]
fn timeline_includes_the_peak() {
    let trace = bundled("resnet50_train.csv.gz");
    // Every event as a point: the full curve, to find the peak independently.
    let all = ReplayOptions {
        timeline_points: usize::MAX,
        ..ReplayOptions::default()
    };
    let (full, _) = replay_direct(&trace, &all);
    assert_eq!(full.timeline.len(), trace.events.len());
    let top = full
        .timeline
        .iter()
        .map(|p| p.reserved_bytes)
        .max()
        .unwrap();
    let live_top = full.timeline.iter().map(|p| p.live_bytes).max().unwrap();
    assert_eq!(live_top, full.peak_live_bytes);
    // Direct takes one region per call, so the backend's peak is seen between events.
    assert_eq!(top, full.peak_reserved_bytes);

    for points in [1, 7, 100, 2000] {
        let opts = ReplayOptions {
            timeline_points: points,
            ..ReplayOptions::default()
        };
        let (r, _) = replay_direct(&trace, &opts);
        assert!(!r.timeline.is_empty() && r.timeline.len() <= points);
        let peak = r
            .timeline
            .iter()
            .find(|p| p.reserved_bytes == top)
            .expect("the peak is kept");
        assert_eq!(peak.event, r.peak_event);
        assert_eq!(*peak, full.timeline[peak.event as usize]);
        assert!(r.timeline.windows(2).all(|w| w[0].event < w[1].event));
    }
    let none = ReplayOptions {
        timeline_points: 0,
        ..ReplayOptions::default()
    };
    assert!(replay_direct(&trace, &none).0.timeline.is_empty());
}

#[test]
fn unknown_and_double_frees_are_counted() {
    let trace = Trace::new(
        "frees",
        vec![
            TraceEvent::allocate(0x1000, 4096),
            TraceEvent::free(0x2000, 4096), // never allocated
            TraceEvent::free(0x1000, 4096),
            TraceEvent::free(0x1000, 4096), // already freed
            TraceEvent::allocate(0x1000, 512),
            TraceEvent::free(0x1000, 512),
            TraceEvent::allocate(0x1000, 256),
            TraceEvent::free(0x1000, 256),
            TraceEvent::free(0x1000, 256), // already freed, after the address came back
        ],
    );
    let (r, mock) = replay_direct(&trace, &ReplayOptions::default());
    assert_eq!((r.unknown_frees, r.double_frees), (1, 2));
    assert_eq!((r.allocations, r.frees, r.leaked_at_end), (3, 3, 0));
    assert_eq!(r.free_errors, 0);
    assert_eq!(mock.counters().bytes_in_use.current, 0);
}

#[test]
fn allocation_larger_than_the_device_fails_without_panic() {
    let mock = MockBackend::shared_with(MockConfig::default().capacity(GIB));
    let alloc = direct(mock.clone());
    let big = 2 * GIB as usize;
    let trace = Trace::new(
        "too_big",
        vec![
            TraceEvent::allocate(0x1000, 1 << 20),
            TraceEvent::allocate(0x2000, big),
            TraceEvent {
                action: Action::AllocateFailure,
                ..TraceEvent::allocate(0, big)
            },
            TraceEvent::free(0x2000, big),
            TraceEvent::free(0x1000, 1 << 20),
            TraceEvent::allocate(0x2000, 4096),
        ],
    );
    let r = replay(&trace, &alloc, &ReplayOptions::default());
    assert_eq!(r.failed_allocations, 1);
    assert_eq!(r.skipped_frees, 1);
    assert_eq!(r.unknown_frees, 0);
    assert_eq!((r.allocations, r.frees), (2, 1));
    assert_eq!(r.events, 6);
    assert!(r.first_error.as_deref().unwrap_or("").contains("memory"));
    assert_eq!(r.peak_live_bytes, 1 << 20);
    // The failed call is timed like any other.
    assert_eq!(r.latency.alloc.count, 3);
}

#[test]
fn an_address_reused_while_live_frees_the_earlier_block() {
    let trace = Trace::new(
        "reuse",
        vec![
            TraceEvent::allocate(0x1000, 1000),
            TraceEvent::allocate(0x1000, 3000),
            TraceEvent::free(0x1000, 3000),
        ],
    );
    let (r, mock) = replay_direct(&trace, &ReplayOptions::default());
    assert_eq!(r.missing_frees, 1);
    assert_eq!(r.peak_live_bytes, 3000);
    assert_eq!((r.allocations, r.frees, r.leaked_at_end), (2, 1, 0));
    assert_eq!(mock.counters().bytes_in_use.current, 0);
}

#[test]
fn streams_and_cross_stream_frees() {
    let trace = Trace::new(
        "streams",
        vec![
            TraceEvent::allocate(0x1000, 1 << 20).on_stream(7),
            TraceEvent::allocate(0x2000, 1 << 20).on_stream(9),
            TraceEvent::free(0x1000, 1 << 20).on_stream(9),
            TraceEvent::free(0x2000, 1 << 20).on_stream(9),
            TraceEvent::allocate(0x3000, 100).on_stream(u64::MAX),
        ],
    );
    let (r, mock) = replay_direct(&trace, &ReplayOptions::default());
    // A recorded handle only names a stream: each gets one of the backend's own, the
    // all-ones handle too.
    assert_eq!((r.allocations, r.frees, r.failed_allocations), (3, 2, 0));
    assert_eq!(r.leaked_at_end, 1);
    // Streams 7 and 9 stay apart: the free of 0x1000 on 9 waits for an event.
    assert!(mock.counters().event_records >= 1, "{:?}", mock.counters());
}

#[test]
fn progress_and_no_latency() {
    let trace = bundled("resnet50_train.csv.gz");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let opts = ReplayOptions {
        measure_latency: false,
        ..ReplayOptions::default()
    }
    .with_progress(move |n| s2.lock().unwrap().push(n));
    let (r, _) = replay_direct(&trace, &opts);
    let seen = seen.lock().unwrap();
    assert!(seen.len() >= 2);
    assert!(seen.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(*seen.last().unwrap(), trace.events.len() as u64);
    assert!(!r.latency.measured);
    assert_eq!(r.latency.all.count, 0);
}

/// Delegates to another allocator but reports empty statistics.
struct NoStats<A>(A, AtomicU64);

impl<A: Allocator> Allocator for NoStats<A> {
    fn name(&self) -> &str {
        "no-stats"
    }
    fn backend(&self) -> &Arc<dyn Backend> {
        self.0.backend()
    }
    fn allocate(&self, req: Request) -> devpool_core::Result<Block> {
        self.1.fetch_add(1, Ordering::Relaxed);
        self.0.allocate(req)
    }
    fn deallocate(&self, block: Block, stream: StreamId) -> devpool_core::Result<()> {
        self.0.deallocate(block, stream)
    }
    fn record_stream(&self, block: &Block, stream: StreamId) -> devpool_core::Result<()> {
        self.0.record_stream(block, stream)
    }
    fn stats(&self) -> Stats {
        Stats::default()
    }
    fn trim(&self) -> devpool_core::Result<usize> {
        self.0.trim()
    }
}

#[test]
fn reserved_bytes_come_from_the_backend() {
    let trace = bundled("resnet50_train.csv.gz");
    let (reference, _) = replay_direct(&trace, &ReplayOptions::default());
    let liar = NoStats(direct(MockBackend::shared()), AtomicU64::new(0));
    let r = replay(&trace, &liar, &ReplayOptions::default());
    assert_eq!(liar.1.load(Ordering::Relaxed), r.allocations);
    assert_eq!(r.strategy, "no-stats");
    assert_eq!(r.allocator_peak_reserved, 0);
    assert_eq!(r.peak_reserved_bytes, reference.peak_reserved_bytes);
    assert_eq!(r.timeline, reference.timeline);
}

/// Keeps freed blocks and hands one out again for a request of the same size; only
/// the requests it cannot serve so (`misses`) reach the allocator below.
struct Spares<A> {
    below: A,
    spare: Mutex<Vec<Block>>,
    misses: AtomicU64,
}

impl<A: Allocator> Allocator for Spares<A> {
    fn name(&self) -> &str {
        "spares"
    }
    fn backend(&self) -> &Arc<dyn Backend> {
        self.below.backend()
    }
    fn allocate(&self, req: Request) -> devpool_core::Result<Block> {
        let mut spare = self.spare.lock().unwrap();
        if let Some(i) = spare.iter().position(|b| b.requested == req.size) {
            return Ok(spare.swap_remove(i));
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        self.below.allocate(req)
    }
    fn deallocate(&self, block: Block, _: StreamId) -> devpool_core::Result<()> {
        self.spare.lock().unwrap().push(block);
        Ok(())
    }
    fn record_stream(&self, block: &Block, stream: StreamId) -> devpool_core::Result<()> {
        self.below.record_stream(block, stream)
    }
    fn stats(&self) -> Stats {
        self.below.stats()
    }
    fn trim(&self) -> devpool_core::Result<usize> {
        self.below.trim()
    }
}

#[test]
fn allocations_calling_the_backend_are_those_the_pool_could_not_serve() {
    let trace = bundled("resnet50_train.csv.gz");
    let spares = Spares {
        below: direct(MockBackend::shared()),
        spare: Mutex::new(Vec::new()),
        misses: AtomicU64::new(0),
    };
    let r = replay(&trace, &spares, &ReplayOptions::default());
    let misses = spares.misses.load(Ordering::Relaxed);
    assert!(
        misses > 0 && misses < r.allocations,
        "{misses} of {}",
        r.allocations
    );
    assert_eq!(r.allocations_calling_backend, misses);
    // Each miss made one region; the spares give none back during the replay.
    assert_eq!(r.memory_calls_in_allocations, misses);
    assert_eq!(r.backend.region_frees, 0, "the spares keep what is freed");
    // The latency split counts the same calls apart.
    let lat = &r.latency;
    assert_eq!(lat.alloc_calling_backend.count, misses);
    assert_eq!(lat.alloc_not_calling_backend.count, r.allocations - misses);
    assert_eq!(lat.free_calling_backend.count, 0);
    let pct = 100.0 * misses as f64 / r.allocations as f64;
    assert!((r.allocations_calling_backend_pct() - pct).abs() < 1e-9);
    for b in spares.spare.into_inner().unwrap() {
        spares.below.free(b).unwrap();
    }
}

#[test]
fn memory_taken_before_the_first_event_counts() {
    // An allocator that takes an initial pool when built holds it through the whole
    // replay: it is part of what the replay reports as held, not a baseline to drop.
    let trace = bundled("resnet50_train.csv.gz");
    let (reference, _) = replay_direct(&trace, &ReplayOptions::default());
    let mock = MockBackend::shared();
    let pool = 64usize << 20;
    let initial = mock.alloc_region(pool).unwrap();
    let r = replay(&trace, &direct(mock.clone()), &ReplayOptions::default());
    assert_eq!(
        r.peak_reserved_bytes,
        reference.peak_reserved_bytes + pool as u64
    );
    assert_eq!(r.reserved_at_end, reference.reserved_at_end + pool as u64);
    assert!(r.fragmentation_ratio > reference.fragmentation_ratio);
    assert!(r.timeline.iter().all(|p| p.reserved_bytes >= pool as u64));
    mock.free_region(initial, pool).unwrap();
}

/// Float fields of a report, which a JSON round trip may move by a unit in the last place.
fn floats(r: &mut ReplayReport) -> Vec<&mut f64> {
    let l = &mut r.latency;
    let b = &mut r.backend.per_1000_ops;
    vec![
        &mut r.fragmentation_ratio,
        &mut r.wall_ms,
        &mut l.alloc.mean_ns,
        &mut l.free.mean_ns,
        &mut l.all.mean_ns,
        &mut l.alloc_calling_backend.mean_ns,
        &mut l.alloc_not_calling_backend.mean_ns,
        &mut l.free_calling_backend.mean_ns,
        &mut b.region_allocs,
        &mut b.region_frees,
        &mut b.pages_mapped,
        &mut b.pages_unmapped,
        &mut b.map_calls,
        &mut b.unmap_calls,
        &mut b.memory_calls,
    ]
}

#[test]
fn report_serializes_and_reads_back() {
    let trace = bundled("resnet50_train.csv.gz");
    let (mut r, _) = replay_direct(&trace, &ReplayOptions::default());
    let json = serde_json::to_string(&r).unwrap();
    assert!(json.contains("\"fragmentation_ratio\""));
    let mut back: ReplayReport = serde_json::from_str(&json).unwrap();
    for (a, b) in floats(&mut r).into_iter().zip(floats(&mut back)) {
        assert!((*a - *b).abs() <= a.abs() * 1e-12, "{a} vs {b}");
        (*a, *b) = (0.0, 0.0);
    }
    assert_eq!(back, r);
}

#[test]
fn empty_trace() {
    let (r, _) = replay_direct(&Trace::new("empty", vec![]), &ReplayOptions::default());
    assert_eq!(
        (r.events, r.peak_live_bytes, r.peak_reserved_bytes),
        (0, 0, 0)
    );
    assert_eq!(r.fragmentation_ratio, 0.0);
    assert!(r.timeline.is_empty());
}
