//! The C ABI as an [`Allocator`], so that `devpool bench` can time a workload through
//! `devpool_malloc` / `devpool_free` (device lookup, panic guard, pointer table)
//! exactly as C, PyTorch and CuPy call it.
//!
//! The C ABI keeps one allocator per device for the whole process, with the settings
//! of its first use: this row always runs the hybrid, on the backend and device of
//! the command line, and may run only once per process with other settings.

use crate::error::CliError;
use crate::overlay::Overlay;
use crate::reference::keeps_nothing;
use devpool::BackendKind;
use devpool_core::{Allocator, Backend, Block, DevicePtr, Error, Request, Result, StreamId};
use devpool_ffi::{
    devpool_configure, devpool_free, devpool_malloc, DEVPOOL_ERR_INVALID, DEVPOOL_OK,
};
use std::ffi::{c_int, CString};
use std::sync::Arc;

/// `devpool_malloc` and `devpool_free` of this process's C ABI, on one device.
pub(crate) struct CAbi {
    /// The row's name: the strategy, through the C ABI.
    name: String,
    backend: Arc<dyn Backend>,
    device: c_int,
}

impl CAbi {
    /// Configure the C ABI for its default strategy (the hybrid) on `backend`, with
    /// the `--config` settings, and use `device`; `target` only answers
    /// [`Allocator::backend`]. Fails when the C ABI of this process already has other
    /// settings.
    pub(crate) fn new(
        backend: BackendKind,
        device: u32,
        target: Arc<dyn Backend>,
        overlay: Option<&Overlay>,
    ) -> std::result::Result<Self, CliError> {
        let strategy = devpool::StrategySpec::default();
        let changed = overlay.is_some_and(|o| o.apply(strategy.clone()).1);
        let label = crate::overlay::row_name(&strategy.to_string(), changed, overlay);
        let name = format!("{label} (C ABI)");
        let extra = overlay.map_or(String::new(), |o| format!(";{}", o.text()));
        let refused = |code| CliError::CAbi {
            row: name.clone(),
            code,
        };
        // Names and numbers: no NUL inside.
        let cfg = CString::new(format!(
            "strategy={strategy};backend={backend};log=off{extra}"
        ))
        .map_err(|_| refused(DEVPOOL_ERR_INVALID))?;
        // SAFETY: `cfg` is a NUL-terminated string that lives across the call.
        let rc = unsafe { devpool_configure(cfg.as_ptr()) };
        if rc != DEVPOOL_OK {
            return Err(refused(rc));
        }
        let device = c_int::try_from(device)
            .map_err(|_| CliError::setting(format!("--device {device}"), "out of range"))?;
        Ok(CAbi {
            name,
            backend: target,
            device,
        })
    }
}

fn stream_ptr(s: StreamId) -> *mut std::ffi::c_void {
    std::ptr::without_provenance_mut(s.raw() as usize)
}

impl Allocator for CAbi {
    fn name(&self) -> &str {
        &self.name
    }

    fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    fn allocate(&self, req: Request) -> Result<Block> {
        let p = devpool_malloc(req.size, self.device, stream_ptr(req.stream));
        if p.is_null() {
            return Err(Error::OutOfMemory(Box::default()));
        }
        Ok(req.granted(
            DevicePtr(p.addr() as u64),
            req.size,
            self.backend.device(),
            0,
        ))
    }

    fn deallocate(&self, block: Block, stream: StreamId) -> Result<()> {
        let p = std::ptr::without_provenance_mut(block.ptr.0 as usize);
        devpool_free(p, block.requested, self.device, stream_ptr(stream));
        Ok(())
    }

    keeps_nothing!();
}
