//! [`RingDetail`]: the ring's own figures, beside the common [`Stats`](devpool_core::Stats).

use devpool_core::human_bytes;
use std::fmt;

/// What a ring pool holds and how it has behaved, from
/// [`RingPool::detail`](crate::RingPool::detail) (one stream) or
/// [`Ring::detail`](crate::Ring::detail) (summed over streams).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingDetail {
    /// Rings held: the current one, and older ones still draining after a growth.
    pub rings: usize,
    /// Device bytes held: mapped pages and regions.
    pub held_bytes: u64,
    /// Bytes from the oldest queued block to the head of the current ring.
    pub span_bytes: u64,
    /// Live blocks.
    pub live_blocks: usize,
    /// Blocks freed but not yet given back, because an older block is still live.
    pub freed_blocks: usize,
    /// Blocks freed on other streams whose events have not been seen complete.
    pub waiting_blocks: usize,
    /// Blocks the tail has passed and left in place.
    pub pinned_blocks: usize,
    /// New runs started while older ones were held: wraps, and jumps over obstacles
    /// or to new pages at the top.
    pub jumps: u64,
    /// Times the ring held more: pages mapped beyond what it had, or a new ring.
    pub grows: u64,
    /// Live blocks the tail has passed, in all.
    pub pins: u64,
    /// Requests that found the ring full (whatever the policy then did).
    pub full: u64,
    /// Requests that got out of memory because the ring was full.
    pub refused: u64,
}

impl RingDetail {
    devpool_core::merge_sums!(
        RingDetail: rings,
        held_bytes,
        span_bytes,
        live_blocks,
        freed_blocks,
        waiting_blocks,
        pinned_blocks,
        jumps,
        grows,
        pins,
        full,
        refused
    );
}

impl fmt::Display for RingDetail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ring(s) holding {}, {} from tail to head; {} live blocks, {} freed behind an \
             older live block, {} waiting for other streams' events, {} passed by the tail; \
             {} wraps, {} grows, {} pins, full {} times ({} refused)",
            self.rings,
            human_bytes(self.held_bytes),
            human_bytes(self.span_bytes),
            self.live_blocks,
            self.freed_blocks,
            self.waiting_blocks,
            self.pinned_blocks,
            self.jumps,
            self.grows,
            self.pins,
            self.full,
            self.refused
        )
    }
}
