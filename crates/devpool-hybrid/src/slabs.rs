//! [`SlabSource`]: the slab route takes its slabs from the large route, so slabs and
//! large blocks share pages, and the memory of an empty slab goes back to the page
//! layer (as cache, reusable by either route and movable) instead of to the driver.
//!
//! It is a [`Backend`] to the slab pool: `alloc_region` and `free_region` carve and
//! return blocks of the large pool; everything else goes to the real backend.

use crate::pool::Large;
use devpool_core::{
    Backend, BackendError, BackendResult, Block, DevicePtr, Error, Gauge, Request, Stats, StreamId,
};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

/// What the slab route holds from the large route.
#[derive(Debug, Default)]
pub(crate) struct Taken {
    /// Slabs (blocks of the large route) by address.
    blocks: HashMap<u64, Block>,
    /// Requested and granted bytes of those blocks.
    requested: Gauge,
    granted: Gauge,
    allocations: u64,
    frees: u64,
}

/// Slabs carved from the large route. See the [module docs](self).
pub(crate) struct SlabSource {
    pub(crate) large: Arc<Large>,
    backend: Arc<dyn Backend>,
    stream: StreamId,
    align: usize,
    taken: Mutex<Taken>,
}

fn as_backend_error(e: Error, requested: usize) -> BackendError {
    match e {
        Error::Backend(b) => b,
        Error::OutOfMemory(info) => BackendError::OutOfMemory {
            requested,
            free: info.backend_free,
            total: info.backend_total,
        },
        other => BackendError::InvalidArgument {
            call: "alloc_region",
            detail: other.to_string(),
        },
    }
}

impl SlabSource {
    /// Slabs of `large`, aligned to `align` bytes, for the pool of `stream`.
    pub fn new(
        large: Arc<Large>,
        backend: Arc<dyn Backend>,
        stream: StreamId,
        align: usize,
    ) -> Self {
        SlabSource {
            large,
            backend,
            stream,
            align: align.max(devpool_core::MIN_ALIGN).next_power_of_two(),
            taken: Mutex::new(Taken::default()),
        }
    }

    /// The large route's statistics without the slabs it holds for the slab route,
    /// and the bytes of those slabs (as the slab route asked for them).
    pub fn large_stats(&self) -> (Stats, u64) {
        let t = self.taken.lock();
        let mut s = self.large.pool().stats();
        s.live_bytes.current -= t.requested.current;
        s.allocated_bytes.current -= t.granted.current;
        s.live_blocks.current -= t.blocks.len() as u64;
        s.allocations -= t.allocations;
        s.frees -= t.frees;
        // The slab route counts its slabs at the size it asked for: the rest of what
        // the large route holds is the large route's.
        s.reserved_bytes.current = s.reserved_bytes.current.saturating_sub(t.requested.current);
        (s, t.requested.current)
    }
}

impl Backend for SlabSource {
    devpool_core::forward_backend!(|s| &*s.backend; device, mem_info, create_stream, destroy_stream, synchronize, create_event, destroy_event, record_event, event_done, wait_event, counters);
    fn name(&self) -> &str {
        "slabs of the large route"
    }
    /// Slabs are aligned to this, which bounds the alignment of the slab's classes.
    fn granularity(&self) -> usize {
        self.align
    }
    fn alloc_region(&self, size: usize) -> BackendResult<DevicePtr> {
        let req = Request::new(size)
            .with_align(self.align)
            .on_stream(self.stream);
        let b = self
            .large
            .pool()
            .allocate(&req)
            .map_err(|e| as_backend_error(e, size))?;
        let mut t = self.taken.lock();
        t.requested.current += b.requested as u64;
        t.requested.peak = t.requested.peak.max(t.requested.current);
        t.granted.current += b.size as u64;
        t.granted.peak = t.granted.peak.max(t.granted.current);
        t.allocations += 1;
        t.blocks.insert(b.ptr.0, b);
        Ok(b.ptr)
    }
    fn free_region(&self, ptr: DevicePtr, size: usize) -> BackendResult<()> {
        let mut t = self.taken.lock();
        let b = match t.blocks.get(&ptr.0) {
            Some(b) if b.requested == size => *b,
            _ => {
                return Err(BackendError::InvalidArgument {
                    call: "free_region",
                    detail: format!("{ptr}+{size} is not a slab of the large route"),
                })
            }
        };
        self.large
            .pool()
            .deallocate(&b)
            .map_err(|e| as_backend_error(e, size))?;
        t.blocks.remove(&ptr.0);
        t.requested.current -= b.requested as u64;
        t.granted.current -= b.size as u64;
        t.frees += 1;
        Ok(())
    }
}
