//! One slab: a backend region cut into equal slots of one class, with its bitmap.

use crate::bitmap::SlotBitmap;
use crate::classes::ClassInfo;
use devpool_core::DevicePtr;

/// No slab (the end of a list).
pub(crate) const NIL: u32 = u32::MAX;

/// A slab and its place in its owner's list of slabs with free slots.
///
/// A free reads the record's first cache line only (the fields in the order a free
/// reads them, then the bitmap, inline for slabs of up to 64 slots); the list links
/// (read when a full slab gets a free slot again) and the region (read when the slab
/// goes back) come after.
#[derive(Debug)]
#[repr(C, align(64))]
pub(crate) struct Slab {
    /// Address of slot 0 (the region's start, raised to the class alignment).
    pub start: u64,
    /// The handle of slot 0, set when a cache adopts the slab: the generation of
    /// its place in the cache, the cache and the place. A slot's handle is this
    /// with the slot number in the low bits.
    pub base: u64,
    /// Slot bytes.
    pub size: usize,
    /// Slots in the slab.
    pub slots: u32,
    /// Free slots.
    pub free: u32,
    /// Class index.
    pub class: u32,
    /// Whether the slab is in the owner's list.
    pub linked: bool,
    pub bits: SlotBitmap,
    /// Neighbours in the owner's list (local indices).
    pub prev: u32,
    pub next: u32,
    /// The backend region.
    pub region: DevicePtr,
    /// Bytes of the region.
    pub region_bytes: usize,
}

impl Slab {
    /// A slab over `region` for `class`, all slots free. `None` when the region is
    /// too misaligned to hold a single slot.
    pub fn new(
        region: DevicePtr,
        region_bytes: usize,
        class: usize,
        info: &ClassInfo,
    ) -> Option<Slab> {
        let start = devpool_core::align_up(region.0 as usize, info.align)? as u64;
        let usable = region_bytes.checked_sub((start - region.0) as usize)?;
        let slots = (usable / info.size).min(1 << crate::handle::SLOT_BITS);
        if slots == 0 {
            return None;
        }
        Some(Slab {
            region,
            region_bytes,
            start,
            base: 0,
            class: class as u32,
            size: info.size,
            slots: slots as u32,
            free: slots as u32,
            prev: NIL,
            next: NIL,
            linked: false,
            bits: SlotBitmap::all_free(slots),
        })
    }

    /// A vacant place in a cache's list of slabs: no region and no slot, so every
    /// handle that names it is refused by its slot check, with no separate test.
    pub fn vacant() -> Slab {
        Slab {
            region: DevicePtr::NULL,
            region_bytes: 0,
            start: 0,
            base: 0,
            class: 0,
            size: 0,
            slots: 0,
            free: 0,
            prev: NIL,
            next: NIL,
            linked: false,
            bits: SlotBitmap::none(),
        }
    }

    /// Whether this is a vacant place ([`vacant`](Self::vacant)), not a slab: real
    /// slabs hold at least one slot.
    #[inline]
    pub fn is_vacant(&self) -> bool {
        self.slots == 0
    }

    /// The generation of the slab's place in its cache.
    #[inline]
    pub fn gen(&self) -> u16 {
        crate::handle::Handle::decode(self.base).gen
    }

    /// Whether no slot is in use.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.free == self.slots
    }

    /// The address of `slot`.
    #[inline]
    pub fn slot_ptr(&self, slot: usize) -> u64 {
        self.start + (slot * self.size) as u64
    }

    /// Host bytes this slab's metadata takes.
    pub fn metadata_bytes(&self) -> usize {
        std::mem::size_of::<Slab>() + self.bits.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    /// The fields a free reads (slot checks, counts, class, list flag, and an inline
    /// bitmap's words and summary) lie in the record's first cache line, and records
    /// start on a line.
    #[test]
    fn a_free_reads_one_line_of_the_record() {
        assert_eq!(align_of::<Slab>(), 64);
        let bits = offset_of!(Slab, bits);
        let hot_end = [
            offset_of!(Slab, start) + 8,
            offset_of!(Slab, base) + 8,
            offset_of!(Slab, size) + size_of::<usize>(),
            offset_of!(Slab, slots) + 4,
            offset_of!(Slab, free) + 4,
            offset_of!(Slab, class) + 4,
            offset_of!(Slab, linked) + 1,
            bits + SlotBitmap::HOT_BYTES,
        ];
        assert!(hot_end.iter().all(|&e| e <= 64), "{hot_end:?}");
        // The links and the region come after.
        assert!(offset_of!(Slab, prev) >= 64 && offset_of!(Slab, region) >= 64);
    }
}
