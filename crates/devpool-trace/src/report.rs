//! [`ReplayReport`]: what one replay of a trace through one allocator measured.

use devpool_core::BackendCounters;
use serde::{Deserialize, Serialize};

/// The result of [`replay`](crate::replay): memory, latency and backend figures of one
/// strategy on one trace.
///
/// Bytes "live" are the requested sizes of the blocks the replay holds; "granted"
/// bytes are the block sizes the allocator handed out; "reserved" bytes are the
/// device bytes the backend counts as held (regions plus mapped pages).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplayReport {
    /// The allocator's name.
    pub strategy: String,
    /// The trace's name.
    pub trace: String,
    /// Events replayed (every row of the trace).
    pub events: u64,
    /// Successful allocations.
    pub allocations: u64,
    /// Successful frees of blocks the trace freed.
    pub frees: u64,
    /// Allocations during which the allocator took or gave back device memory
    /// through the backend (a region, map or unmap call): on a GPU, the allocations
    /// that wait for the driver. When they are more than 1% of allocations, the
    /// allocation p99 is one of them.
    #[serde(default)]
    pub allocations_calling_backend: u64,
    /// Backend memory calls made inside those allocations (of
    /// [`backend.memory_calls`](BackendCallsSummary::memory_calls) in all; the rest
    /// were made inside frees, off the allocation path).
    #[serde(default)]
    pub memory_calls_in_allocations: u64,
    /// The most requested bytes live at once.
    pub peak_live_bytes: u64,
    /// The most device bytes the backend held at once, what the allocator held before
    /// the first event included (the backend's own peak when it never held more
    /// before the replay, which also sees peaks inside a call; else the highest
    /// reading after an event).
    pub peak_reserved_bytes: u64,
    /// `peak_reserved_bytes / peak_live_bytes`: 1.0 is no waste at all (0 when nothing
    /// was ever live).
    pub fragmentation_ratio: f64,
    /// Granted minus requested bytes of the live blocks at `peak_event`, when the
    /// reserved bytes read after each event first reached their highest.
    pub rounding_waste_at_peak: u64,
    /// The most granted-minus-requested bytes of live blocks at any time.
    pub peak_rounding_waste: u64,
    /// Reserved minus granted bytes at `peak_event`: memory held but not handed out
    /// (0 when an allocator grants address space it has not backed).
    pub cached_bytes_at_peak: u64,
    /// Index of the event after which reserved bytes first reached their sampled peak.
    pub peak_event: u64,
    /// Allocations the allocator refused (their frees are skipped).
    pub failed_allocations: u64,
    /// Frees of blocks whose allocation had failed, skipped.
    pub skipped_frees: u64,
    /// Frees of pointers the trace never allocated (or freed long before: see
    /// `double_frees`).
    pub unknown_frees: u64,
    /// Frees of a pointer the trace had already freed (recognised when the first
    /// free was among the last 65536 frees at least).
    pub double_frees: u64,
    /// Allocations at a pointer still live: the trace lacks the earlier block's free,
    /// which the replay makes first.
    pub missing_frees: u64,
    /// Frees the allocator refused (a bug in the allocator).
    pub free_errors: u64,
    /// The first error the allocator returned, if any.
    pub first_error: Option<String>,
    /// Blocks still live at the end of the trace (freed after the measurements).
    pub leaked_at_end: u64,
    /// Device bytes the backend held after the last event.
    pub reserved_at_end: u64,
    /// The allocator's own peak of reserved bytes (its stats), to check against
    /// `peak_reserved_bytes`.
    pub allocator_peak_reserved: u64,
    /// Latency of the allocator's calls.
    pub latency: LatencySummary,
    /// Calls the allocator made to the backend during the replay.
    pub backend: BackendCallsSummary,
    /// Live and reserved bytes over the replay, at most
    /// [`timeline_points`](crate::ReplayOptions::timeline_points) points, the peak of
    /// reserved bytes among them.
    pub timeline: Vec<TimelinePoint>,
    /// Wall-clock time of the whole replay, in milliseconds.
    pub wall_ms: f64,
    /// Time inside the driver's calls during the replay, per entry point, most time
    /// first: filled in by whoever ran the replay on a backend that times its
    /// driver calls (the CUDA backend); empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub driver_calls: Vec<DriverCall>,
}

/// Time inside one driver entry point during a replay.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriverCall {
    /// The entry point, as the driver names it (`cuMemCreate`).
    pub call: String,
    /// Calls made.
    pub calls: u64,
    /// Time inside them, in nanoseconds.
    pub total_ns: u64,
    /// The longest one, in nanoseconds.
    pub max_ns: u64,
}

impl ReplayReport {
    /// [`allocations_calling_backend`](Self::allocations_calling_backend) in percent
    /// of successful allocations (0 when there were none).
    pub fn allocations_calling_backend_pct(&self) -> f64 {
        if self.allocations == 0 {
            0.0
        } else {
            100.0 * self.allocations_calling_backend as f64 / self.allocations as f64
        }
    }
}

/// Latency figures of one kind of call, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OpLatency {
    /// Calls timed.
    pub count: u64,
    /// Median.
    pub median_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// Mean.
    pub mean_ns: f64,
    /// Slowest call.
    pub max_ns: u64,
}

/// Latency of allocate and free calls, each timed with [`std::time::Instant`]; the
/// cost of reading the clock is measured first and taken off every sample. Medians
/// and percentiles come from a histogram: exact below 2 µs, within 1/64 above
/// (the lowest value of the sample's bucket); counts, means and maxima are exact.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Whether latency was measured (see
    /// [`measure_latency`](crate::ReplayOptions::measure_latency)); all zero if not.
    pub measured: bool,
    /// The cost of one clock reading pair, taken off each sample.
    pub timer_overhead_ns: u64,
    /// Allocate calls (failed ones included).
    pub alloc: OpLatency,
    /// Free calls.
    pub free: OpLatency,
    /// All calls together.
    pub all: OpLatency,
    /// The allocate calls during which the allocator took or gave back memory
    /// through the backend (on a GPU: the calls that waited for the driver), failed
    /// ones included.
    #[serde(default)]
    pub alloc_calling_backend: OpLatency,
    /// The other allocate calls: host bookkeeping alone.
    #[serde(default)]
    pub alloc_not_calling_backend: OpLatency,
    /// The free calls that called the backend (unmapping, most often).
    #[serde(default)]
    pub free_calling_backend: OpLatency,
}

/// Backend calls made during a replay: the difference of the backend's
/// [`counters`](devpool_core::Backend::counters) before and after (the final freeing
/// of blocks still live excluded).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BackendCallsSummary {
    /// Regions allocated.
    pub region_allocs: u64,
    /// Regions freed.
    pub region_frees: u64,
    /// Physical pages mapped.
    pub pages_mapped: u64,
    /// Physical pages unmapped.
    pub pages_unmapped: u64,
    /// Calls to map.
    pub map_calls: u64,
    /// Calls to unmap.
    pub unmap_calls: u64,
    /// Address ranges reserved.
    pub reserves: u64,
    /// Address ranges released.
    pub unreserves: u64,
    /// Calls that take or give back memory: region allocs and frees, map and unmap.
    pub memory_calls: u64,
    /// The same per 1000 allocator calls (allocations and frees).
    pub per_1000_ops: BackendCallRates,
}

/// Backend calls per 1000 allocator calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BackendCallRates {
    /// Regions allocated.
    pub region_allocs: f64,
    /// Regions freed.
    pub region_frees: f64,
    /// Physical pages mapped.
    pub pages_mapped: f64,
    /// Physical pages unmapped.
    pub pages_unmapped: f64,
    /// Calls to map.
    pub map_calls: f64,
    /// Calls to unmap.
    pub unmap_calls: f64,
    /// Calls that take or give back memory.
    pub memory_calls: f64,
}

impl BackendCallsSummary {
    /// The calls between two counter snapshots, with rates per 1000 of `ops`.
    pub fn between(before: &BackendCounters, after: &BackendCounters, ops: u64) -> Self {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        let region_allocs = d(after.region_allocs, before.region_allocs);
        let region_frees = d(after.region_frees, before.region_frees);
        let pages_mapped = d(after.pages_mapped, before.pages_mapped);
        let pages_unmapped = d(after.pages_unmapped, before.pages_unmapped);
        let map_calls = d(after.map_calls, before.map_calls);
        let unmap_calls = d(after.unmap_calls, before.unmap_calls);
        let memory_calls = region_allocs + region_frees + map_calls + unmap_calls;
        let rate = |v: u64| {
            if ops == 0 {
                0.0
            } else {
                v as f64 * 1000.0 / ops as f64
            }
        };
        BackendCallsSummary {
            region_allocs,
            region_frees,
            pages_mapped,
            pages_unmapped,
            map_calls,
            unmap_calls,
            reserves: d(after.reserves, before.reserves),
            unreserves: d(after.unreserves, before.unreserves),
            memory_calls,
            per_1000_ops: BackendCallRates {
                region_allocs: rate(region_allocs),
                region_frees: rate(region_frees),
                pages_mapped: rate(pages_mapped),
                pages_unmapped: rate(pages_unmapped),
                map_calls: rate(map_calls),
                unmap_calls: rate(unmap_calls),
                memory_calls: rate(memory_calls),
            },
        }
    }
}

/// One point of a replay's timeline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelinePoint {
    /// Index of the event after which the point was taken.
    pub event: u64,
    /// The event's time in the trace.
    pub time_us: u64,
    /// Requested bytes of live blocks.
    pub live_bytes: u64,
    /// Device bytes the backend held.
    pub reserved_bytes: u64,
}
