//! [`Unit`]: one ring's device range (a virtual range whose pages are mapped from the
//! bottom up, or a region) and its [`Placement`].

use crate::place::Placement;
use devpool_core::{Backend, Counters, DevicePtr, Result};

/// One ring.
#[derive(Debug)]
pub(crate) struct Unit {
    /// Tells this ring's blocks apart in their handles.
    pub tag: u8,
    /// First byte.
    pub base: u64,
    /// Bytes of address space: the reservation, or the region.
    pub size: u64,
    /// Whether pages are mapped into a reservation (else a region).
    pub virt: bool,
    /// Bytes held from the backend: pages mapped from `base` up, or the region.
    pub held: u64,
    /// Where blocks go.
    pub place: Placement,
}

impl Unit {
    /// A ring over a fresh reservation of `size` bytes (a multiple of the page), with
    /// nothing mapped yet.
    pub fn reserve(
        backend: &dyn Backend,
        counters: &Counters,
        tag: u8,
        size: u64,
        page: u64,
    ) -> Result<Unit> {
        let base = backend.reserve(size as usize, page as usize)?.0;
        counters.on_backend_call();
        Ok(Unit {
            tag,
            base,
            size,
            virt: true,
            held: 0,
            place: Placement::new(base, base),
        })
    }

    /// A ring over a fresh region of `size` bytes.
    pub fn region(backend: &dyn Backend, counters: &Counters, tag: u8, size: u64) -> Result<Unit> {
        let base = backend.alloc_region(size as usize)?.0;
        counters.on_reserve(size as usize);
        Ok(Unit {
            tag,
            base,
            size,
            virt: false,
            held: size,
            place: Placement::new(base, base + size),
        })
    }

    /// The end of the reservation or region.
    pub fn end(&self) -> u64 {
        self.base + self.size
    }

    /// Map pages from the top of what is mapped up to `end` (rounded up to the page);
    /// false when `end` lies beyond the reservation. On error nothing changed.
    pub fn map_to(
        &mut self,
        backend: &dyn Backend,
        counters: &Counters,
        end: u64,
        page: u64,
    ) -> Result<bool> {
        if !self.virt || end > self.end() {
            return Ok(false);
        }
        let want = (end - self.base).div_ceil(page) * page;
        if want > self.held {
            let bytes = (want - self.held) as usize;
            backend.map(DevicePtr(self.base + self.held), bytes)?;
            counters.on_reserve(bytes);
            self.held = want;
            self.place.set_hi(self.base + want);
        }
        Ok(true)
    }

    /// Unmap the pages above the highest block; returns the bytes given back.
    pub fn unmap_above_top(
        &mut self,
        backend: &dyn Backend,
        counters: &Counters,
        page: u64,
    ) -> Result<u64> {
        if !self.virt {
            return Ok(0);
        }
        let keep = (self.place.top() - self.base).div_ceil(page) * page;
        if keep >= self.held {
            return Ok(0);
        }
        let bytes = self.held - keep;
        backend.unmap(DevicePtr(self.base + keep), bytes as usize)?;
        counters.on_release(bytes as usize);
        self.held = keep;
        self.place.set_hi(self.base + keep);
        Ok(bytes)
    }

    /// Give the whole ring back (it must hold no block); returns the bytes given back.
    /// On error what could not be given back stays held.
    pub fn close(&mut self, backend: &dyn Backend, counters: &Counters) -> Result<u64> {
        let held = self.held;
        if self.virt {
            if self.held > 0 {
                backend.unmap(DevicePtr(self.base), self.held as usize)?;
                counters.on_release(self.held as usize);
                self.held = 0;
                self.place.set_hi(self.base);
            }
            backend.unreserve(DevicePtr(self.base), self.size as usize)?;
            counters.on_backend_call();
        } else {
            backend.free_region(DevicePtr(self.base), self.size as usize)?;
            counters.on_release(self.size as usize);
            self.held = 0;
        }
        Ok(held)
    }
}
