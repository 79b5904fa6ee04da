//! [`DirectPool`]: every request goes straight to the backend, as plain `cudaMalloc`
//! does. The yardstick the strategies are measured against.

use crate::allocator::Pool;
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::ordered::StreamOrdered;
use crate::stats::{Counters, Stats};
use crate::types::{align_up, Block, DevicePtr, Request, MIN_ALIGN};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

/// A pool that takes one backend region per block and frees it at once. Nothing is
/// cached, so `trim` has nothing to do.
///
/// Regions are only promised 256-byte alignment (what `cuMemAlloc` guarantees for
/// small sizes), so a larger alignment is served by taking `align - 256` more bytes
/// and handing out the aligned address inside.
pub struct DirectPool {
    backend: Arc<dyn Backend>,
    /// Handed-out pointer -> (region base, region size, granted size, requested size).
    live: Mutex<HashMap<u64, (u64, usize, usize, usize)>>,
    counters: Counters,
}

impl DirectPool {
    /// A direct pool over `backend`.
    pub fn new(backend: impl crate::IntoBackend) -> Self {
        DirectPool {
            backend: backend.into_backend(),
            live: Mutex::new(HashMap::new()),
            counters: Counters::default(),
        }
    }
}

/// The direct allocator over `backend`: one region per block.
///
/// ```
/// use devpool_core::{direct, Allocator};
/// use devpool_testing::MockBackend;
/// let a = direct(MockBackend::shared());
/// let b = a.alloc(3 << 20).unwrap();
/// // What the driver takes: whole 2 MiB pages.
/// assert_eq!(a.stats().reserved_bytes.current, 4 << 20);
/// a.free(b).unwrap();
/// assert_eq!(a.stats().reserved_bytes.current, 0);
/// ```
pub fn direct(backend: impl crate::IntoBackend) -> StreamOrdered<DirectPool> {
    let backend = backend.into_backend();
    let b = backend.clone();
    StreamOrdered::new("direct", backend, move |_| DirectPool::new(b.clone()))
}

impl Pool for DirectPool {
    fn allocate(&self, req: &Request) -> Result<Block> {
        let align = req.effective_align()?;
        if align > self.backend.granularity() {
            return Err(Error::InvalidAlignment { align: req.align });
        }
        let (size, region) = req.padded(MIN_ALIGN, align)?;
        let held = self
            .backend
            .region_bytes(region)
            .ok_or_else(|| Error::too_large(req.size))?;
        let base = self.backend.alloc_region(region)?;
        let ptr = DevicePtr(
            align_up(base.0 as usize, align).expect("region fits the address space") as u64,
        );
        // Reserved: what the driver takes for the region (whole pages for a large
        // one), the same figure the backend counts.
        self.counters.on_reserve(held);
        self.counters.on_alloc(req.size, size);
        self.live
            .lock()
            .insert(ptr.0, (base.0, region, size, req.size));
        Ok(req.granted(ptr, size, self.backend.device(), 0))
    }

    fn deallocate(&self, block: &Block) -> Result<()> {
        let mut live = self.live.lock();
        match live.get(&block.ptr.0) {
            Some(&(base, region, size, requested)) if size == block.size => {
                self.backend.free_region(DevicePtr(base), region)?;
                live.remove(&block.ptr.0);
                self.counters
                    .on_release(self.backend.region_bytes(region).unwrap_or(region));
                // The recorded size, not the caller's copy: a forged block cannot skew stats.
                self.counters.on_free(requested, size);
                Ok(())
            }
            _ => Err(Error::NotOwned { ptr: block.ptr }),
        }
    }

    fn check(&self, block: &Block) -> Result<()> {
        match self.live.lock().get(&block.ptr.0) {
            Some(&(_, _, size, _)) if size == block.size => Ok(()),
            _ => Err(Error::NotOwned { ptr: block.ptr }),
        }
    }

    fn stats(&self) -> Stats {
        self.counters.snapshot()
    }

    fn trim(&self) -> Result<usize> {
        Ok(0)
    }
}

impl Drop for DirectPool {
    fn drop(&mut self) {
        for (_, (base, region, _, _)) in self.live.get_mut().drain() {
            let _ = self.backend.free_region(DevicePtr(base), region);
        }
    }
}
