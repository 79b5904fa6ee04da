//! Virtual memory of [`CudaBackend`]: reserved address ranges into which physical
//! pages are mapped one granule at a time.
//!
//! [`map`](devpool_core::Backend::map) of `n` pages is `n` × (`cuMemCreate` +
//! `cuMemMap`), then one `cuMemSetAccess` over the whole range (for this device and
//! every peer given access), then `n` ×
//! `cuMemRelease` (the mapping keeps each page alive). Each page is its own physical
//! allocation, so any single page can be unmapped later. `cuMemUnmap` must cover
//! exactly what one `cuMemMap` mapped, so [`unmap`](devpool_core::Backend::unmap)
//! calls it once per page; the page's memory goes back to the device then.
//!
//! The pages of a call are claimed in the backend's table before the driver is
//! called, so two threads can never map or unmap the same page at once, and a failure
//! midway undoes every step already done before returning the error.

use crate::backend::{page_prop, CudaBackend};
use crate::driver::check;
use cudarc::driver::sys::{self, CUresult};
use devpool_core::{BackendCounterCell, BackendResult, DevicePtr};
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
        let r = unsafe { sys::cuMemAddressReserve(&mut p, size, align.max(g), 0, 0) };
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
            if vm.ranges.get(&ptr.0) != Some(&size) {
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
            vm.ranges.remove(&ptr.0);
        }
        let undo = |e| {
            self.vm.lock().ranges.insert(ptr.0, size);
            e
        };
        let _cx = self.enter().map_err(undo)?;
        // SAFETY: a range reserved by this backend with nothing mapped in it, freed
        // once (taken out of the table above).
        check("cuMemAddressFree", unsafe {
            sys::cuMemAddressFree(ptr.0, size)
        })
        .map_err(|e| undo(self.fail(e)))
    }

    pub(crate) fn vm_map(&self, ptr: DevicePtr, size: usize) -> BackendResult<()> {
        self.require_virtual()?;
        BackendCounterCell::bump(&self.counters.map_calls);
        let end = self.check_pages("map", ptr, size)?;
        let g = self.granularity_u64();
        {
            let mut vm = self.vm.lock();
            let inside = vm
                .ranges
                .range(..=ptr.0)
                .next_back()
                .is_some_and(|(&start, &len)| end <= start + len as u64);
            if !inside {
                return Err(self.invalid(
                    "map",
                    format!("{ptr}+{size} is not inside a reserved range"),
                ));
            }
            if vm.pages.range(ptr.0..end).next().is_some() {
                return Err(self.invalid("map", format!("{ptr}+{size} overlaps mapped pages")));
            }
            vm.pages.extend((ptr.0..end).step_by(g as usize));
        }
        let result = self.enter().and_then(|_cx| {
            let peers = self.peers.read();
            self.map_pages(ptr.0, end, size, &peers)
        });
        match result {
            Ok(()) => {
                self.counters.bytes_in_use.add(size as u64);
                self.counters
                    .pages_mapped
                    .fetch_add(size as u64 / g, Relaxed);
                Ok(())
            }
            Err(e) => {
                let mut vm = self.vm.lock();
                for p in (ptr.0..end).step_by(g as usize) {
                    vm.pages.remove(&p);
                }
                Err(e)
            }
        }
    }

    /// The driver's part of `map`, with the context current. On failure every page
    /// mapped so far is unmapped and every handle released.
    fn map_pages(
        &self,
        start: u64,
        end: u64,
        size: usize,
        peers: &[crate::peer::Peer],
    ) -> BackendResult<()> {
        let g = self.granularity_u64();
        let prop = page_prop(self.raw_device());
        let mut handles: Vec<sys::CUmemGenericAllocationHandle> =
            Vec::with_capacity(((end - start) / g) as usize);
        let undo = |handles: &[sys::CUmemGenericAllocationHandle], mapped: usize| {
            for (i, &h) in handles.iter().enumerate() {
                if i < mapped {
                    // SAFETY: page `i` was mapped by this call and is unmapped once.
                    let _ = unsafe { sys::cuMemUnmap(start + i as u64 * g, g as usize) };
                }
                // SAFETY: `h` came from cuMemCreate in this call and is released once.
                let _ = unsafe { sys::cuMemRelease(h) };
            }
        };
        for page in (start..end).step_by(g as usize) {
            let mut h: sys::CUmemGenericAllocationHandle = 0;
            // SAFETY: the context is current; `prop` describes pinned memory on this
            // device and `g` is its granularity; the driver writes one handle.
            let r = unsafe { sys::cuMemCreate(&mut h, g as usize, &prop, 0) };
            if r != CUresult::CUDA_SUCCESS {
                undo(&handles, handles.len());
                return Err(self.driver_fail("cuMemCreate", r, size));
            }
            handles.push(h);
            // SAFETY: `page` lies in a range reserved by this backend and claimed by
            // this call (so nothing is mapped there); `h` holds exactly `g` bytes.
            let r = unsafe { sys::cuMemMap(page, g as usize, 0, h, 0) };
            if r != CUresult::CUDA_SUCCESS {
                undo(&handles, handles.len() - 1);
                return Err(self.driver_fail("cuMemMap", r, size));
            }
        }
        // Read-write for this device and every peer given access.
        let access = self.access_list(peers);
        // SAFETY: every page of [start, end) was mapped above; the descriptors are
        // live for the call.
        let r = unsafe { sys::cuMemSetAccess(start, size, access.as_ptr(), access.len()) };
        if r != CUresult::CUDA_SUCCESS {
            undo(&handles, handles.len());
            return Err(self.driver_fail("cuMemSetAccess", r, size));
        }
        let mut first_err = None;
        for (i, &h) in handles.iter().enumerate() {
            // SAFETY: `h` came from cuMemCreate in this call and is released once; its
            // mapping keeps the memory alive.
            let r = unsafe { sys::cuMemRelease(h) };
            if r != CUresult::CUDA_SUCCESS && first_err.is_none() {
                first_err = Some((i, r));
            }
        }
        if let Some((_, r)) = first_err {
            // A handle that cannot be released would leak its page once unmapped:
            // unmap everything and report the failure.
            for page in (start..end).step_by(g as usize) {
                // SAFETY: every page was mapped by this call and is unmapped once.
                let _ = unsafe { sys::cuMemUnmap(page, g as usize) };
            }
            return Err(self.driver_fail("cuMemRelease", r, size));
        }
        Ok(())
    }

    pub(crate) fn vm_unmap(&self, ptr: DevicePtr, size: usize) -> BackendResult<()> {
        BackendCounterCell::bump(&self.counters.unmap_calls);
        let end = self.check_pages("unmap", ptr, size)?;
        let g = self.granularity_u64();
        let n = size as u64 / g;
        {
            let mut vm = self.vm.lock();
            if vm.pages.range(ptr.0..end).count() as u64 != n {
                return Err(self.invalid(
                    "unmap",
                    format!("{ptr}+{size} has pages that are not mapped"),
                ));
            }
            for p in (ptr.0..end).step_by(g as usize) {
                vm.pages.remove(&p);
            }
        }
        let mut done = 0u64;
        let result = self.enter().and_then(|_cx| {
            // Unlike cuMemFree, cuMemUnmap does not wait for work still using the pages:
            // a pool unmaps a page right after a free on a stream whose kernels may still
            // run. Wait for the device first (unmapping is rare and off the hot path).
            // SAFETY: the context is current.
            let r = unsafe { sys::cuCtxSynchronize() };
            if r != CUresult::CUDA_SUCCESS {
                return Err(self.driver_fail("cuCtxSynchronize", r, size));
            }
            for page in (ptr.0..end).step_by(g as usize) {
                // SAFETY: the page is mapped (it was in the table, now claimed by this
                // call); one cuMemMap mapped exactly these `g` bytes.
                let r = unsafe { sys::cuMemUnmap(page, g as usize) };
                if r != CUresult::CUDA_SUCCESS {
                    return Err(self.driver_fail("cuMemUnmap", r, size));
                }
                done += 1;
            }
            Ok(())
        });
        self.counters.bytes_in_use.sub(done * g);
        self.counters.pages_unmapped.fetch_add(done, Relaxed);
        if result.is_err() {
            // The pages not unmapped are still mapped: put them back in the table.
            let mut vm = self.vm.lock();
            vm.pages.extend((ptr.0 + done * g..end).step_by(g as usize));
        }
        result
    }
}
