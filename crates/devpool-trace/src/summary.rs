//! What a trace holds, without replaying it: [`TraceSummary`].

use crate::event::{Action, Trace, TraceEvent};
use crate::hash::addr_map;
use crate::recent::Recent;
use serde::{Deserialize, Serialize};

/// Requests up to this size count as small (1 MiB, PyTorch's small-pool limit).
pub const SMALL_REQUEST: usize = 1 << 20;

/// Counts and sizes of a trace, as the trace itself tells them.
///
/// Live bytes follow the trace's own pointers: an allocation adds its size, the free
/// of a live pointer takes that allocation's size off; an allocation at a pointer
/// that is still live first ends the earlier block (the trace lacks its free).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceSummary {
    /// The trace's name.
    pub name: String,
    /// All events.
    pub events: u64,
    /// `allocate` events.
    pub allocations: u64,
    /// `free` events.
    pub frees: u64,
    /// `allocate failure` events.
    pub allocate_failures: u64,
    /// Frees of a pointer the trace never allocated (or freed long before).
    pub unmatched_frees: u64,
    /// Frees of a pointer the trace had already freed (recognised when the first free
    /// was among the last 65536 frees at least).
    pub double_frees: u64,
    /// Allocations at a pointer that was still live.
    pub missing_frees: u64,
    /// Blocks still live at the end.
    pub live_at_end: u64,
    /// Distinct streams.
    pub streams: u64,
    /// The most bytes live at once (sum of requested sizes).
    pub peak_live_bytes: u64,
    /// The most blocks live at once.
    pub peak_live_blocks: u64,
    /// Bytes allocated over the whole trace.
    pub total_allocated_bytes: u64,
    /// The largest request.
    pub max_request: u64,
    /// Allocations of at most [`SMALL_REQUEST`] bytes.
    pub small_allocations: u64,
    /// Share of allocations of at most [`SMALL_REQUEST`] bytes (0 to 1).
    pub small_share: f64,
    /// Microseconds from the first event to the last.
    pub duration_us: u64,
}

impl Trace {
    /// The most bytes live at once: the largest sum of requested sizes of live blocks.
    pub fn peak_live_bytes(&self) -> u64 {
        self.summary().peak_live_bytes
    }

    /// Counts, peak live bytes and the share of small requests.
    ///
    /// ```
    /// use devpool_trace::{Trace, TraceEvent};
    /// let t = Trace::new("t", vec![
    ///     TraceEvent::allocate(0x100, 4 << 20),
    ///     TraceEvent::allocate(0x200, 512),
    ///     TraceEvent::free(0x100, 4 << 20),
    ///     TraceEvent::free(0x999, 1),
    /// ]);
    /// let s = t.summary();
    /// assert_eq!((s.allocations, s.frees, s.unmatched_frees, s.live_at_end), (2, 2, 1, 1));
    /// assert_eq!(s.peak_live_bytes, (4 << 20) + 512);
    /// assert_eq!(s.small_share, 0.5);
    /// ```
    pub fn summary(&self) -> TraceSummary {
        TraceSummary::of_events(&self.name, self.events.iter().copied())
    }
}

impl TraceSummary {
    /// The summary of the events of a trace named `name`, as they come: memory grows
    /// with the blocks live at once, not with the number of events.
    pub fn of_events(name: &str, events: impl IntoIterator<Item = TraceEvent>) -> TraceSummary {
        let mut s = TraceSummary {
            name: name.to_string(),
            ..TraceSummary::default()
        };
        let mut live = addr_map::<usize>(1024);
        let mut recent = Recent::default();
        let mut streams = addr_map::<()>(4);
        let (mut live_bytes, mut live_blocks) = (0u64, 0u64);
        let (mut first, mut last) = (None, 0u64);
        for e in events {
            s.events += 1;
            first.get_or_insert(e.time_us);
            last = e.time_us;
            streams.insert(e.stream, ());
            match e.action {
                Action::Allocate => {
                    s.allocations += 1;
                    s.total_allocated_bytes = s.total_allocated_bytes.saturating_add(e.size as u64);
                    s.max_request = s.max_request.max(e.size as u64);
                    if e.size <= SMALL_REQUEST {
                        s.small_allocations += 1;
                    }
                    recent.reused(e.ptr);
                    if let Some(old) = live.insert(e.ptr, e.size) {
                        s.missing_frees += 1;
                        live_bytes = live_bytes.saturating_sub(old as u64);
                        live_blocks -= 1;
                    }
                    // Sizes come from the file: a sum past u64 saturates, never panics.
                    live_bytes = live_bytes.saturating_add(e.size as u64);
                    live_blocks += 1;
                    s.peak_live_bytes = s.peak_live_bytes.max(live_bytes);
                    s.peak_live_blocks = s.peak_live_blocks.max(live_blocks);
                }
                Action::Free => {
                    s.frees += 1;
                    match live.remove(&e.ptr) {
                        Some(size) => {
                            live_bytes = live_bytes.saturating_sub(size as u64);
                            live_blocks -= 1;
                            recent.freed(e.ptr);
                        }
                        None if recent.contains(e.ptr) => s.double_frees += 1,
                        None => s.unmatched_frees += 1,
                    }
                }
                Action::AllocateFailure => s.allocate_failures += 1,
            }
        }
        s.live_at_end = live_blocks;
        s.streams = streams.len() as u64;
        if s.allocations > 0 {
            s.small_share = s.small_allocations as f64 / s.allocations as f64;
        }
        if let Some(first) = first {
            s.duration_us = last.saturating_sub(first);
        }
        s
    }
}
