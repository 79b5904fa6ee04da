//! [`RingConfig`]: where the ring's memory comes from, how much it may hold, and what
//! it does when it is full.

use devpool_core::{Error, Result};
use std::time::Duration;

/// 1 MiB.
pub const MIB: usize = 1 << 20;

/// Where a ring's bytes come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingMode {
    /// One virtual range per ring, as large as the device, whose pages are mapped as
    /// the ring first reaches them (the default). The ring holds only the pages it has
    /// needed; on a backend without virtual memory, [`Region`](RingMode::Region) is used.
    Virtual,
    /// One contiguous region per ring, of [`RingConfig::capacity`] bytes, taken whole
    /// at the first allocation.
    Region,
}

/// What the ring does when a request finds no room: neither at the head, nor in the
/// room the tail has left, nor by passing live blocks at the tail (see
/// [`RingPool`](crate::RingPool)), without holding more than
/// [`capacity`](RingConfig::capacity) bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WhenFull {
    /// Hold more (the default): map more pages at the top of the virtual range, or
    /// start a second ring, larger than the first, while the first one drains.
    Grow,
    /// Wait for the tail to move, up to this long: for the events of the oldest blocks
    /// freed on other streams, and for other threads to free the oldest live blocks.
    /// Then out of memory, with the ring's state in the message.
    Wait(Duration),
    /// Out of memory at once, with the ring's state in the message.
    Fail,
}

/// Settings of a ring.
///
/// ```
/// use devpool_ring::{RingMode, RingConfig, WhenFull};
/// use std::time::Duration;
/// let cfg = RingConfig::default()
///     .mode(RingMode::Region)
///     .capacity(256 << 20)
///     .when_full(WhenFull::Wait(Duration::from_millis(20)));
/// assert!(cfg.validate().is_ok());
/// assert!(RingConfig::default().capacity(0).validate().is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingConfig {
    /// Where the bytes come from (default [`RingMode::Virtual`]).
    pub mode: RingMode,
    /// Bytes the ring may hold before it is full (default 64 MiB), rounded up to the
    /// backend's page. In region mode, the size of the first ring.
    pub capacity: usize,
    /// What to do when full (default [`WhenFull::Grow`]).
    pub when_full: WhenFull,
    /// Live blocks the tail may pass and leave in place (default 4096). A live block
    /// at the tail holds back everything freed after it; when room is short the tail
    /// leaves it where it is, as an obstacle the head steps over, and goes on. 0 keeps
    /// the strict order: the tail never passes a live block.
    pub max_pinned: usize,
    /// Address space reserved for a ring in virtual mode (default 0: the device's
    /// memory), rounded up to the backend's page.
    pub reserve: usize,
}

impl Default for RingConfig {
    fn default() -> Self {
        RingConfig {
            mode: RingMode::Virtual,
            capacity: 64 * MIB,
            when_full: WhenFull::Grow,
            max_pinned: 4096,
            reserve: 0,
        }
    }
}

impl RingConfig {
    devpool_core::setters! {
        /// Another memory source.
        mode: RingMode,
        /// Another capacity.
        capacity: usize,
        /// Another policy when full.
        when_full: WhenFull,
        /// Another bound on the live blocks the tail may pass.
        max_pinned: usize,
        /// Another reservation size for virtual mode.
        reserve: usize,
    }

    /// Check the settings: a capacity of at least one byte, and in virtual mode a
    /// reservation (when given) no smaller than the capacity.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: &str| Err(Error::Limit(format!("ring config: {what}")));
        if self.capacity == 0 || self.capacity > isize::MAX as usize / 2 {
            return bad("capacity must be between 1 B and isize::MAX / 2");
        }
        if self.reserve != 0 && self.reserve < self.capacity {
            return bad("reserve must be 0 (the device's memory) or at least the capacity");
        }
        if self.reserve > isize::MAX as usize / 2 {
            return bad("reserve must be at most isize::MAX / 2");
        }
        Ok(())
    }
}
