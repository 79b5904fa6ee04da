//! Virtual memory of [`CudaBackend`]: reserved address ranges into which physical
//! allocations (chunks) are mapped.
//!
//! - [`map_chunks`](devpool_core::Backend::map_chunks) of `k` chunks is `k` ×
//!   (`cuMemCreate` + `cuMemMap`), then one `cuMemSetAccess` over the whole range
//!   (for this device and every peer given access), then `k` × `cuMemRelease` (the
//!   mapping keeps each chunk alive). [`map`](devpool_core::Backend::map) is the same
//!   with one chunk per page.
//! - [`alias`](devpool_core::Backend::alias) maps chunks that are mapped already a
//!   second time: per chunk `cuMemRetainAllocationHandle` (from its address) +
//!   `cuMemMap` + `cuMemRelease` of the retained handle, then one `cuMemSetAccess`.
//!   No memory is created.
//! - [`unmap`](devpool_core::Backend::unmap) is one `cuMemUnmap` per mapping in the
//!   range (it must cover whole mappings); a chunk's memory goes back to the device
//!   with its last mapping. It does not wait for the device: the caller unmaps only
//!   pages that no queued work can still touch (the page layer waits for events
//!   recorded on the streams that used them).
//!
//! The table knows every mapping and the physical allocation behind it, so memory
//! held is counted once per chunk however many times it is mapped. The pages of a
//! call are claimed in the table before the driver is called, so two threads can
//! never map or unmap the same page at once, and a failure midway undoes every step
//! already done before returning the error.

use crate::backend::{page_prop, CudaBackend};
use crate::driver::check;
use crate::timing::Call;
use cudarc::driver::sys::{self, CUresult};
use devpool_core::{BackendCounterCell, BackendResult, DevicePtr};
use std::ffi::c_void;
use std::sync::atomic::Ordering::Relaxed;

impl CudaBackend {
    fn check_pages(&self, call: &'static str, ptr: DevicePtr, size: usize) -> BackendResult<u64> {
        let g = self.granularity_u64();
        if size == 0 || !(size as u64).is_multiple_of(g) || !ptr.0.is_multiple_of(g) {
            return Err(self.invalid(call, format!("{ptr}+{size} is not page aligned")));
        }
        ptr.0
            .checked_add(size as u64)
            .ok_or_else(|| self.invalid(call, format!("{ptr}+{size} overflows")))
    }

    fn granularity_u64(&self) -> u64 {
        devpool_core::Backend::granularity(self) as u64
    }

    fn require_virtual(&self) -> BackendResult<()> {
        if devpool_core::Backend::supports_virtual(self) {
            Ok(())
        } else {
            Err(devpool_core::BackendError::Unsupported(
                "virtual memory management on this device",
            ))
        }
    }

    pub(crate) fn vm_reserve(&self, size: usize, align: usize) -> BackendResult<DevicePtr> {
        self.require_virtual()?;
        BackendCounterCell::bump(&self.counters.reserves);
        let g = self.granularity_u64() as usize;
        if size == 0 || !size.is_multiple_of(g) || !align.is_power_of_two() {
            return Err(self.invalid(
                "reserve",
                format!("size {size} / align {align} not granular"),
            ));
        }
        let _cx = self.enter()?;
        let mut p: sys::CUdeviceptr = 0;
        // SAFETY: the context is current; size and alignment are granular; no fixed
        // address is asked for; the driver writes one pointer.
        let r = self.clock.time(Call::MemAddressReserve, || unsafe {
            sys::cuMemAddressReserve(&mut p, size, align.max(g), 0, 0)
        });
        if r != CUresult::CUDA_SUCCESS {
            return Err(self.driver_fail("cuMemAddressReserve", r, size));
        }
        self.vm.lock().ranges.insert(p, size);
        Ok(DevicePtr(p))
    }

    pub(crate) fn vm_unreserve(&self, ptr: DevicePtr, size: usize) -> BackendResult<()> {
        BackendCounterCell::bump(&self.counters.unreserves);
        {
            let mut vm = self.vm.lock();
            if !vm.ranges.is_range(ptr.0, size) {
                return Err(
                    self.invalid("unreserve", format!("{ptr}+{size} is not a reserved range"))
                );
            }
            let end = ptr.0.saturating_add(size as u64);
            if vm.pages.range(ptr.0..end).next().is_some() {
                return Err(
                    self.invalid("unreserve", format!("{ptr}+{size} still has mapped pages"))
                );
            }
            vm.ranges.remove(ptr.0, size);
        }
        let undo = |e| {
            self.vm.lock().ranges.insert(ptr.0, size);
            e
        };
        let _cx = self.enter().map_err(undo)?;
        // SAFETY: a range reserved by this backend with nothing mapped in it, freed
        // once (taken out of the table above).
        let r = self.clock.time(Call::MemAddressFree, || unsafe {
            sys::cuMemAddressFree(ptr.0, size)
        });
        check("cuMemAddressFree", r).map_err(|e| undo(self.fail(e)))
    }

    pub(crate) fn vm_map(&self, ptr: DevicePtr, size: usize) -> BackendResult<()> {
        let g = self.granularity_u64() as usize;
        if size == 0 || !size.is_multiple_of(g) {
            BackendCounterCell::bump(&self.counters.map_calls);
            return Err(self.invalid("map", format!("{ptr}+{size} is not page aligned")));
        }
        self.vm_map_chunks("map", ptr, &vec![g; size / g])
    }

    /// Claim pages `[start, end)` (inside a reserved range, none mapped) in the table.
    fn claim(&self, call: &'static str, ptr: DevicePtr, end: u64) -> BackendResult<()> {
        let g = self.granularity_u64();
        let mut vm = self.vm.lock();
        if !vm.ranges.covers(ptr.0, end) {
            return Err(self.invalid(
                call,
                format!("{ptr}+{} is not inside a reserved range", end - ptr.0),
            ));
        }
        if vm.pages.range(ptr.0..end).next().is_some() {
            return Err(self.invalid(call, format!("{ptr}+{} overlaps mapped pages", end - ptr.0)));
        }
        vm.pages.extend((ptr.0..end).step_by(g as usize));
        Ok(())
    }

    fn unclaim(&self, start: u64, end: u64) {
        let g = self.granularity_u64();
        let mut vm = self.vm.lock();
        for p in (start..end).step_by(g as usize) {
            vm.pages.remove(&p);
        }
    }

    pub(crate) fn vm_map_chunks(
        &self,
        call: &'static str,
        ptr: DevicePtr,
        chunks: &[usize],
    ) -> BackendResult<()> {
        self.require_virtual()?;
        BackendCounterCell::bump(&self.counters.map_calls);
        let g = self.granularity_u64() as usize;
        let size = chunks
            .iter()
            .try_fold(0usize, |a, &c| a.checked_add(c))
            .ok_or_else(|| self.invalid(call, "sizes overflow".into()))?;
        if chunks.iter().any(|&c| c == 0 || !c.is_multiple_of(g)) {
            return Err(self.invalid(call, format!("chunks of {ptr} are not page multiples")));
        }
        let end = self.check_pages(call, ptr, size)?;
        self.claim(call, ptr, end)?;
        let result = self.enter().and_then(|_cx| {
            let peers = self.peers.read();
            self.create_and_map(ptr.0, chunks, size, &peers)
        });
        match result {
            Ok(()) => {
                let mut vm = self.vm.lock();
                let mut at = ptr.0;
                for &c in chunks {
                    let id = vm.next_phys;
                    vm.next_phys += 1;
                    vm.maps.insert(at, (c, id));
                    vm.phys.insert(id, (c, 1));
                    at += c as u64;
                }
                drop(vm);
                self.counters.bytes_in_use.add(size as u64);
                self.counters
                    .on_mapped((size / g) as u64, chunks.len() as u64);
                Ok(())
            }
            Err(e) => {
                self.unclaim(ptr.0, end);
                Err(e)
            }
        }
    }

    /// The driver's part of `map_chunks`, with the context current. On failure every
    /// chunk mapped so far is unmapped and every handle released.
    fn create_and_map(
        &self,
        start: u64,
        chunks: &[usize],
        size: usize,
        peers: &[crate::peer::Peer],
    ) -> BackendResult<()> {
        let prop = page_prop(self.raw_device());
        let mut made: Vec<(u64, usize, sys::CUmemGenericAllocationHandle)> =
            Vec::with_capacity(chunks.len());
        let undo = |made: &[(u64, usize, sys::CUmemGenericAllocationHandle)], mapped: usize| {
            for (i, &(at, len, h)) in made.iter().enumerate() {
                if i < mapped {
                    // SAFETY: chunk `i` was mapped at `at` by this call and is unmapped
                    // once.
                    let _ = self
                        .clock
                        .time(Call::MemUnmap, || unsafe { sys::cuMemUnmap(at, len) });
                }
                // SAFETY: `h` came from cuMemCreate in this call and is released once.
                let _ = self
                    .clock
                    .time(Call::MemRelease, || unsafe { sys::cuMemRelease(h) });
            }
        };
        let mut at = start;
        for &len in chunks {
            let mut h: sys::CUmemGenericAllocationHandle = 0;
            // SAFETY: the context is current; `prop` describes pinned memory on this
            // device and `len` is a multiple of its granularity; the driver writes one
            // handle.
            let r = self.clock.time(Call::MemCreate, || unsafe {
                sys::cuMemCreate(&mut h, len, &prop, 0)
            });
            if r != CUresult::CUDA_SUCCESS {
                undo(&made, made.len());
                return Err(self.driver_fail("cuMemCreate", r, size));
            }
            made.push((at, len, h));
            // SAFETY: `[at, at + len)` lies in a range reserved by this backend and
            // claimed by this call (so nothing is mapped there); `h` holds `len` bytes.
            let r = self
                .clock
                .time(Call::MemMap, || unsafe { sys::cuMemMap(at, len, 0, h, 0) });
            if r != CUresult::CUDA_SUCCESS {
                undo(&made, made.len() - 1);
                return Err(self.driver_fail("cuMemMap", r, size));
            }
            at += len as u64;
        }
        // Read-write for this device and every peer given access.
        let access = self.access_list(peers);
        // SAFETY: every chunk of [start, start + size) was mapped above; the
        // descriptors are live for the call.
        let r = self.clock.time(Call::MemSetAccess, || unsafe {
            sys::cuMemSetAccess(start, size, access.as_ptr(), access.len())
        });
        if r != CUresult::CUDA_SUCCESS {
            undo(&made, made.len());
            return Err(self.driver_fail("cuMemSetAccess", r, size));
        }
        let mut first_err = None;
        for &(_, _, h) in &made {
            // SAFETY: `h` came from cuMemCreate in this call and is released once; its
            // mapping keeps the memory alive.
            let r = self
                .clock
                .time(Call::MemRelease, || unsafe { sys::cuMemRelease(h) });
            if r != CUresult::CUDA_SUCCESS && first_err.is_none() {
                first_err = Some(r);
            }
        }
        if let Some(r) = first_err {
            // A handle that cannot be released would leak its chunk once unmapped:
            // unmap everything and report the failure.
            for &(at, len, _) in &made {
                // SAFETY: every chunk was mapped by this call and is unmapped once.
                let _ = self
                    .clock
                    .time(Call::MemUnmap, || unsafe { sys::cuMemUnmap(at, len) });
            }
            return Err(self.driver_fail("cuMemRelease", r, size));
        }
        Ok(())
    }

    /// The mappings that tile `[ptr, ptr + size)` exactly, in address order, as
    /// (start, bytes, physical allocation).
    fn whole_maps(
        &self,
        vm: &crate::backend::VmTable,
        call: &'static str,
        ptr: DevicePtr,
        size: usize,
    ) -> BackendResult<Vec<(u64, usize, u64)>> {
        let end = self.check_pages(call, ptr, size)?;
        if let Some((&s, &(len, _))) = vm.maps.range(..ptr.0).next_back() {
            if s + len as u64 > ptr.0 {
                return Err(self.invalid(
                    call,
                    format!("{ptr}+{size} cuts the mapping at {s:#x}: mappings go whole"),
                ));
            }
        }
        let mut out = Vec::new();
        let mut at = ptr.0;
        for (&s, &(len, id)) in vm.maps.range(ptr.0..end) {
            if s != at {
                return Err(
                    self.invalid(call, format!("{ptr}+{size} has pages that are not mapped"))
                );
            }
            if s + len as u64 > end {
                return Err(self.invalid(
                    call,
                    format!("{ptr}+{size} cuts the mapping at {s:#x}: mappings go whole"),
                ));
            }
            out.push((s, len, id));
            at = s + len as u64;
        }
        if at != end {
            return Err(self.invalid(call, format!("{ptr}+{size} has pages that are not mapped")));
        }
        Ok(out)
    }

    pub(crate) fn vm_alias(&self, to: DevicePtr, from: &[(DevicePtr, usize)]) -> BackendResult<()> {
        self.require_virtual()?;
        BackendCounterCell::bump(&self.counters.map_calls);
        BackendCounterCell::bump(&self.counters.alias_calls);
        let g = self.granularity_u64();
        let size = from
            .iter()
            .try_fold(0usize, |a, &(_, n)| a.checked_add(n))
            .ok_or_else(|| self.invalid("alias", "sizes overflow".into()))?;
        let end = self.check_pages("alias", to, size)?;
        let sources: Vec<(u64, usize, u64)> = {
            let vm = self.vm.lock();
            let mut v = Vec::new();
            for &(src, n) in from {
                v.extend(self.whole_maps(&vm, "alias", src, n)?);
            }
            v
        };
        self.claim("alias", to, end)?;
        let result = self.enter().and_then(|_cx| {
            let peers = self.peers.read();
            self.map_again(to.0, &sources, size, &peers)
        });
        match result {
            Ok(()) => {
                let mut vm = self.vm.lock();
                let mut at = to.0;
                for &(_, len, id) in &sources {
                    vm.maps.insert(at, (len, id));
                    if let Some(p) = vm.phys.get_mut(&id) {
                        p.1 += 1;
                    }
                    at += len as u64;
                }
                drop(vm);
                self.counters
                    .pages_mapped
                    .fetch_add(size as u64 / g, Relaxed);
                Ok(())
            }
            Err(e) => {
                self.unclaim(to.0, end);
                Err(e)
            }
        }
    }

    /// The driver's part of `alias`, with the context current: map each source
    /// mapping's memory again, one after the other from `start`. On failure every
    /// new mapping is unmapped (the memory stays mapped at its source).
    fn map_again(
        &self,
        start: u64,
        sources: &[(u64, usize, u64)],
        size: usize,
        peers: &[crate::peer::Peer],
    ) -> BackendResult<()> {
        let mut done: Vec<(u64, usize)> = Vec::with_capacity(sources.len());
        let undo = |done: &[(u64, usize)]| {
            for &(at, len) in done {
                // SAFETY: mapped by this call at `at`, unmapped once; the memory lives
                // on at its source mapping.
                let _ = self
                    .clock
                    .time(Call::MemUnmap, || unsafe { sys::cuMemUnmap(at, len) });
            }
        };
        let mut at = start;
        for &(src, len, _) in sources {
            let mut h: sys::CUmemGenericAllocationHandle = 0;
            // SAFETY: `src` is the start of a live mapping of this backend (checked in
            // the table, which no unmap of it can pass while this call runs: the
            // page layer does not unmap what it is moving); the driver writes one
            // handle, retained until released below.
            let r = self.clock.time(Call::MemRetainAllocationHandle, || unsafe {
                sys::cuMemRetainAllocationHandle(&mut h, src as *mut c_void)
            });
            if r != CUresult::CUDA_SUCCESS {
                undo(&done);
                return Err(self.driver_fail("cuMemRetainAllocationHandle", r, size));
            }
            // SAFETY: `[at, at + len)` lies in a reserved range claimed by this call;
            // `h` is the handle of an allocation of `len` bytes.
            let r = self
                .clock
                .time(Call::MemMap, || unsafe { sys::cuMemMap(at, len, 0, h, 0) });
            // SAFETY: balances the retain above; the mappings keep the memory alive.
            let rel = self
                .clock
                .time(Call::MemRelease, || unsafe { sys::cuMemRelease(h) });
            if r != CUresult::CUDA_SUCCESS {
                undo(&done);
                return Err(self.driver_fail("cuMemMap", r, size));
            }
            done.push((at, len));
            if rel != CUresult::CUDA_SUCCESS {
                undo(&done);
                return Err(self.driver_fail("cuMemRelease", rel, size));
            }
            at += len as u64;
        }
        let access = self.access_list(peers);
        // SAFETY: every page of [start, start + size) was mapped above; the
        // descriptors are live for the call.
        let r = self.clock.time(Call::MemSetAccess, || unsafe {
            sys::cuMemSetAccess(start, size, access.as_ptr(), access.len())
        });
        if r != CUresult::CUDA_SUCCESS {
            undo(&done);
            return Err(self.driver_fail("cuMemSetAccess", r, size));
        }
        Ok(())
    }

    pub(crate) fn vm_unmap(&self, ptr: DevicePtr, size: usize) -> BackendResult<()> {
        BackendCounterCell::bump(&self.counters.unmap_calls);
        let g = self.granularity_u64();
        let maps = {
            let mut vm = self.vm.lock();
            let maps = self.whole_maps(&vm, "unmap", ptr, size)?;
            let end = ptr.0 + size as u64;
            for p in (ptr.0..end).step_by(g as usize) {
                vm.pages.remove(&p);
            }
            for &(s, _, _) in &maps {
                vm.maps.remove(&s);
            }
            maps
        };
        let mut done = 0usize;
        let result = self.enter().and_then(|_cx| {
            // No wait for the device: the caller unmaps only pages no queued work can
            // still touch (see the module docs).
            for &(s, len, _) in &maps {
                // SAFETY: `[s, s + len)` is exactly one live mapping of this backend,
                // taken out of the table by this call, so it is unmapped once.
                let r = self
                    .clock
                    .time(Call::MemUnmap, || unsafe { sys::cuMemUnmap(s, len) });
                if r != CUresult::CUDA_SUCCESS {
                    return Err(self.driver_fail("cuMemUnmap", r, size));
                }
                done += 1;
            }
            Ok(())
        });
        let mut vm = self.vm.lock();
        let (mut freed, mut chunks, mut pages) = (0u64, 0u64, 0u64);
        for &(_, len, id) in &maps[..done] {
            pages += len as u64 / g;
            if let Some(p) = vm.phys.get_mut(&id) {
                p.1 -= 1;
                if p.1 == 0 {
                    vm.phys.remove(&id);
                    freed += len as u64;
                    chunks += 1;
                }
            }
        }
        // The mappings not unmapped are still mapped: put them back in the table.
        for &(s, len, id) in &maps[done..] {
            vm.maps.insert(s, (len, id));
            vm.pages.extend((s..s + len as u64).step_by(g as usize));
        }
        drop(vm);
        self.counters.bytes_in_use.sub(freed);
        self.counters.pages_unmapped.fetch_add(pages, Relaxed);
        self.counters.chunks_released.fetch_add(chunks, Relaxed);
        result
    }
}
