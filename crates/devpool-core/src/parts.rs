//! [`Parts`]: an allocator's statistics broken down by its parts (a router's routes,
//! a slab's size classes), reached through [`Allocator::parts`](crate::Allocator::parts)
//! so that callers never downcast or match on names.

use crate::stats::Stats;
use serde::Serialize;

/// Statistics of one route of a router.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RouteStats {
    /// The route's name (`small`, `large`, `huge` for the hybrid).
    pub route: &'static str,
    /// What the route's strategy holds and has done.
    pub stats: Stats,
}

/// What one size class of a size-class strategy holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ClassStats {
    /// Bytes per slot.
    pub size: usize,
    /// Bytes per slab.
    pub slab_bytes: usize,
    /// Slots per slab.
    pub slots_per_slab: usize,
    /// Slots handed out and not freed.
    pub live_slots: u64,
    /// Free slots in the slabs held.
    pub free_slots: u64,
    /// Slabs held from the backend.
    pub slabs: u64,
    /// Slabs held with no slot in use.
    pub empty_slabs: u64,
    /// Requested bytes of the live slots.
    pub requested_bytes: u64,
    /// Rounding waste of the live slots: their bytes minus the requested bytes.
    pub waste_bytes: u64,
}

impl ClassStats {
    // The same class in another pool: its size and slab shape are the same.
    crate::merge_sums!(
        ClassStats: live_slots,
        free_slots,
        slabs,
        empty_slabs,
        requested_bytes,
        waste_bytes
    );
}

/// An allocator's statistics by part.
///
/// ```
/// use devpool_core::{direct, Allocator, Parts};
/// use devpool_testing::MockBackend;
/// // The direct allocator is one whole.
/// assert_eq!(direct(MockBackend::shared()).parts(), Parts::Whole);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Parts {
    /// No parts of its own.
    #[default]
    Whole,
    /// A router: each route's statistics, in routing order.
    Routes(Vec<RouteStats>),
    /// Size classes, smallest first.
    Classes(Vec<ClassStats>),
}

impl Parts {
    /// Add `other`'s figures (of another pool of the same allocator) to these.
    pub fn merge(&mut self, other: Parts) {
        match (self, other) {
            (Parts::Routes(a), Parts::Routes(b)) if a.len() == b.len() => {
                for (x, y) in a.iter_mut().zip(&b) {
                    x.stats.merge(&y.stats);
                }
            }
            (Parts::Classes(a), Parts::Classes(b)) if a.len() == b.len() => {
                for (x, y) in a.iter_mut().zip(&b) {
                    x.merge(y);
                }
            }
            (me @ Parts::Whole, other) => *me = other,
            _ => {}
        }
    }

    /// The statistics of route `name`, when these are a router's.
    pub fn route(&self, name: &str) -> Option<&Stats> {
        match self {
            Parts::Routes(r) => r.iter().find(|r| r.route == name).map(|r| &r.stats),
            _ => None,
        }
    }
}

/// When the memory of a freed block serves new requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Reuse {
    /// As soon as the block is freed: every strategy but the bump arena.
    OnFree,
    /// Only once every block is freed, or the allocator is
    /// [`reset`](crate::Allocator::reset): a bump arena. A workload that frees in
    /// random order and never empties grows it without bound.
    WhenEmpty,
}
