//! [`Unit`]: one ring's device range and its [`Placement`]: a range of the pool's
//! page layer whose pages are mapped from the bottom up as the ring first needs them,
//! or a region.

use crate::place::Placement;
use devpool_core::{Backend, Counters, DevicePtr, Result, StreamId};
use devpool_vm::{PageLayer, RangeId};

/// Where a ring's bytes come from.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Source {
    /// A range of the page layer.
    Pages(RangeId),
    /// A region of the backend.
    Region,
}

/// One ring.
pub(crate) struct Unit {
    /// Tells this ring's blocks apart in their handles.
    pub tag: u8,
    /// First byte.
    pub base: u64,
    /// Bytes of address space: the reservation, or the region.
    pub size: u64,
    /// Where the bytes come from.
    pub source: Source,
    /// Bytes the ring may use from `base` up: the pages it has mapped, or the region.
    pub held: u64,
    /// Where blocks go.
    pub place: Placement,
}

impl Unit {
    /// A ring over a fresh range of `size` bytes of the page layer, nothing mapped.
    pub fn reserve(vm: &mut PageLayer, tag: u8, size: u64) -> Result<Unit> {
        let page = vm.page_size();
        let r = vm.reserve(size as usize, page as usize)?;
        let base = vm.base(r);
        Ok(Unit {
            tag,
            base,
            size: vm.size(r),
            source: Source::Pages(r),
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
            source: Source::Region,
            held: size,
            place: Placement::new(base, base + size),
        })
    }

    /// The end of the reservation or region.
    pub fn end(&self) -> u64 {
        self.base + self.size
    }

    /// Map the pages from the top of what the ring uses up to `end` (rounded up to
    /// the page); false when `end` lies beyond the reservation, or the ring is a
    /// region. On error nothing changed.
    pub fn map_to(&mut self, vm: &mut PageLayer, end: u64) -> Result<bool> {
        let Source::Pages(r) = self.source else {
            return Ok(false);
        };
        if end > self.end() {
            return Ok(false);
        }
        let page = vm.page_size();
        let want = (end - self.base).div_ceil(page) * page;
        if want > self.held {
            let room = (self.base + self.held, self.end());
            vm.acquire(r, (self.base + self.held, self.base + want), room)?;
            self.held = want;
            self.place.set_hi(self.base + want);
        }
        Ok(true)
    }

    /// Stop using the pages above the highest block: the page layer gives them back
    /// once the work queued on `stream` (the pool's, the last to use them) has
    /// completed. Returns the bytes let go.
    pub fn release_above_top(&mut self, vm: &mut PageLayer, stream: StreamId) -> u64 {
        let Source::Pages(r) = self.source else {
            return 0;
        };
        let page = vm.page_size();
        let keep = (self.place.top() - self.base).div_ceil(page) * page;
        if keep >= self.held {
            return 0;
        }
        vm.release(r, (self.base + keep, self.base + self.held), stream);
        let bytes = self.held - keep;
        self.held = keep;
        self.place.set_hi(self.base + keep);
        bytes
    }

    /// Give the whole ring back (it must hold no block), after the work queued on
    /// `stream` has completed. On error what could not be given back stays held.
    pub fn close(
        &mut self,
        backend: &dyn Backend,
        counters: &Counters,
        vm: Option<&mut PageLayer>,
        stream: StreamId,
    ) -> Result<()> {
        match (self.source, vm) {
            (Source::Pages(r), Some(vm)) => {
                self.release_above_top(vm, stream);
                vm.trim()?;
                vm.unreserve(r)?;
            }
            (Source::Pages(_), None) => {}
            (Source::Region, _) => {
                backend.free_region(DevicePtr(self.base), self.size as usize)?;
                counters.on_release(self.size as usize);
                self.held = 0;
            }
        }
        Ok(())
    }
}
