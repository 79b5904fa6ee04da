//! [`ClassStats`]: what each size class holds.

use serde::Serialize;

/// What one size class of a [`SlabPool`](crate::SlabPool) holds, from
/// [`SlabPool::class_stats`](crate::SlabPool::class_stats).
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
