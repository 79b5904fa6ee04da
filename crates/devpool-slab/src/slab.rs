//! One slab: a backend region cut into equal slots of one class, with its bitmap.

use crate::bitmap::SlotBitmap;
use crate::classes::ClassInfo;
use devpool_core::DevicePtr;

/// No slab (the end of a list).
pub(crate) const NIL: u32 = u32::MAX;

/// A slab and its place in its owner's list of slabs with free slots.
#[derive(Debug)]
pub(crate) struct Slab {
    /// The backend region.
    pub region: DevicePtr,
    /// Bytes of the region.
    pub region_bytes: usize,
    /// Address of slot 0 (the region's start, raised to the class alignment).
    pub start: u64,
    /// The handle of slot 0, set when a cache adopts the slab: the generation of
    /// its place in the cache, the cache and the place. A slot's handle is this
    /// with the slot number in the low bits.
    pub base: u64,
    /// Class index.
    pub class: u32,
    /// Slot bytes.
    pub size: usize,
    /// Slots in the slab.
    pub slots: u32,
    /// Free slots.
    pub free: u32,
    /// Neighbours in the owner's list (local indices).
    pub prev: u32,
    pub next: u32,
    /// Whether the slab is in the owner's list.
    pub linked: bool,
    pub bits: SlotBitmap,
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
