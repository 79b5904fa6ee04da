//! Peer access of [`CudaBackend`]: letting another device of the machine read and
//! write this device's memory, and copies between devices.
//!
//! Regions (`cuMemAlloc`) become visible to a peer through the contexts:
//! `cuCtxEnablePeerAccess` called in the peer's primary context on this one. Mapped
//! pages are not covered by that: their access list is set by `cuMemSetAccess`, so
//! enabling a peer adds it to every page mapped now, and [`map`](Backend::map) names
//! it for every page mapped later.

use crate::backend::{device_handle, CudaBackend};
use crate::driver::{self, check, raw_stream, Context};
use cudarc::driver::sys::{self, CUresult};
use devpool_core::{Backend, BackendError, BackendResult, DeviceId, DevicePtr, StreamId};
use std::ffi::c_int;

/// A device this backend's memory is shared with.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Peer {
    pub(crate) id: DeviceId,
    /// The peer's device handle; its primary context is retained by this backend
    /// while it lives.
    pub(crate) device: sys::CUdevice,
}

/// Read-write access for one device.
pub(crate) fn access_for(device: sys::CUdevice) -> sys::CUmemAccessDesc {
    sys::CUmemAccessDesc {
        location: sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: device,
        },
        flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
    }
}

impl CudaBackend {
    /// Access descriptors of this device and every peer.
    pub(crate) fn access_list(&self, peers: &[Peer]) -> Vec<sys::CUmemAccessDesc> {
        std::iter::once(self.raw_device())
            .chain(peers.iter().map(|p| p.device))
            .map(access_for)
            .collect()
    }

    pub(crate) fn peer_enable(&self, peer: DeviceId) -> BackendResult<()> {
        if peer == self.device() {
            return Err(self.invalid(
                "enable_peer_access",
                format!("{peer} is this backend's own device"),
            ));
        }
        let mut peers = self.peers.write();
        if peers.iter().any(|p| p.id == peer) {
            return Ok(());
        }
        let dev = device_handle(peer.0).map_err(|e| self.fail(e))?;
        let mut can: c_int = 0;
        // SAFETY: both handles came from cuDeviceGet; the driver writes one int.
        check("cuDeviceCanAccessPeer", unsafe {
            sys::cuDeviceCanAccessPeer(&mut can, dev, self.raw_device())
        })
        .map_err(|e| self.fail(e))?;
        if can == 0 {
            return Err(self.fail(BackendError::Unavailable(format!(
                "{peer} cannot access the memory of {}",
                self.device()
            ))));
        }
        let mut raw: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: `dev` came from cuDeviceGet; one more reference to its primary
        // context, released when this backend drops (or just below on failure).
        check("cuDevicePrimaryCtxRetain", unsafe {
            sys::cuDevicePrimaryCtxRetain(&mut raw, dev)
        })
        .map_err(|e| self.fail(e))?;
        let ctx = Context(raw);
        let enabled = ctx.enter().and_then(|_cx| {
            // SAFETY: the peer's context is current; ours is a retained primary
            // context.
            match unsafe { sys::cuCtxEnablePeerAccess(self.context().0, 0) } {
                CUresult::CUDA_SUCCESS | CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => Ok(()),
                r => Err(driver::error("cuCtxEnablePeerAccess", r)),
            }
        });
        let me = Peer {
            id: peer,
            device: dev,
        };
        let granted = enabled.and_then(|()| {
            let mut with_peer = peers.clone();
            with_peer.push(me);
            self.grant_mapped(&with_peer)
        });
        if let Err(e) = granted {
            // SAFETY: balances the retain above.
            let _ = unsafe { sys::cuDevicePrimaryCtxRelease_v2(dev) };
            return Err(self.fail(e));
        }
        peers.push(me);
        Ok(())
    }

    /// Give every device of `peers` (and this one) access to every page mapped now.
    /// The caller holds the peer list for writing, so no map is in flight.
    fn grant_mapped(&self, peers: &[Peer]) -> BackendResult<()> {
        let desc = self.access_list(peers);
        let g = self.granularity() as u64;
        let vm = self.vm.lock();
        let _cx = self.context().enter()?;
        let mut pages = vm.pages.iter().copied().peekable();
        while let Some(start) = pages.next() {
            let mut end = start + g;
            while pages.peek() == Some(&end) {
                pages.next();
                end += g;
            }
            // SAFETY: [start, end) is a run of pages mapped by this backend (the table
            // lock keeps unmaps from starting and no map is in flight); the
            // descriptors are live for the call.
            check("cuMemSetAccess", unsafe {
                sys::cuMemSetAccess(start, (end - start) as usize, desc.as_ptr(), desc.len())
            })?;
        }
        Ok(())
    }

    pub(crate) fn peer_enabled(&self, peer: DeviceId) -> bool {
        self.peers.read().iter().any(|p| p.id == peer)
    }

    pub(crate) fn peer_copy(
        &self,
        dst: DevicePtr,
        src_backend: &dyn Backend,
        src: DevicePtr,
        len: usize,
        stream: StreamId,
    ) -> BackendResult<()> {
        let me = self.device();
        if src_backend.name() != self.name() {
            return Err(self.fail(BackendError::Unsupported(
                "peer copies from another kind of backend",
            )));
        }
        if src_backend.device() != me && !src_backend.peer_access_enabled(me) {
            return Err(self.invalid(
                "copy_from_peer",
                format!(
                    "{me} has no access to {}: enable peer access first",
                    src_backend.device()
                ),
            ));
        }
        if len == 0 {
            return Ok(());
        }
        let _cx = self.enter()?;
        // SAFETY: the context is current and supports unified addressing (every
        // 64-bit platform), so the driver tells the two devices' pointers apart; a
        // bad range fails on the device, never on the host.
        let r = unsafe { sys::cuMemcpyAsync(dst.0, src.0, len, raw_stream(stream)) };
        check("cuMemcpyAsync", r).map_err(|e| self.fail(e))?;
        // SAFETY: as in `synchronize`.
        check("cuStreamSynchronize", unsafe {
            sys::cuStreamSynchronize(raw_stream(stream))
        })
        .map_err(|e| self.fail(e))
    }

    pub(crate) fn device_synchronize(&self) -> BackendResult<()> {
        let _cx = self.enter()?;
        // SAFETY: the context is current.
        let r = self
            .clock
            .time(crate::timing::Call::CtxSynchronize, || unsafe {
                sys::cuCtxSynchronize()
            });
        check("cuCtxSynchronize", r).map_err(|e| self.fail(e))
    }
}
