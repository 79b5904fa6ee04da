//! [`cuda_malloc`]: the driver's plain allocator as a baseline, one `cuMemAlloc` and
//! one `cuMemFree` per block.

use devpool_core::{
    align_up, Backend, Block, Counters, DevicePtr, Error, Pool, Request, Result, Stats,
    StreamOrdered, MIN_ALIGN,
};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

/// A pool that takes one backend region per block and gives it back at once, like
/// plain `cudaMalloc`/`cudaFree`. Nothing is cached.
///
/// Alignments above 256 bytes are served by asking for `align - 256` bytes more and
/// handing out the aligned address inside, as callers of `cudaMalloc` do: the driver
/// only promises 256-byte alignment for small allocations.
pub struct MallocPool {
    backend: Arc<dyn Backend>,
    live: Mutex<HashMap<u64, Entry>>,
    counters: Counters,
}

#[derive(Clone, Copy)]
struct Entry {
    base: DevicePtr,
    bytes: usize,
    size: usize,
    requested: usize,
}

impl MallocPool {
    /// A pool over `backend`.
    pub fn new(backend: Arc<dyn Backend>) -> Self {
        MallocPool {
            backend,
            live: Mutex::new(HashMap::new()),
            counters: Counters::default(),
        }
    }
}

/// The `cudaMalloc` baseline over `backend`: one region per block, freed at once;
/// the stream-ordered layer holds cross-stream frees back until their events
/// complete. Over a [`CudaBackend`](crate::CudaBackend) each block is one
/// `cuMemAlloc` and one `cuMemFree`.
///
/// ```
/// use devpool_core::{Allocator, MockBackend};
/// let a = devpool_cuda::cuda_malloc(MockBackend::shared());
/// let b = a.allocate(devpool_core::Request::new(1000).with_align(4096)).unwrap();
/// assert!(b.ptr.is_aligned(4096) && b.size >= 1000);
/// a.free(b).unwrap();
/// assert_eq!(a.stats().reserved_bytes.current, 0);
/// ```
pub fn cuda_malloc(backend: Arc<impl Backend + 'static>) -> StreamOrdered<MallocPool> {
    let backend: Arc<dyn Backend> = backend;
    let b = backend.clone();
    StreamOrdered::new("cuda-malloc", backend, move |_| MallocPool::new(b.clone()))
}

impl Pool for MallocPool {
    fn allocate(&self, req: &Request) -> Result<Block> {
        let align = req.effective_align()?;
        let too_large = Error::TooLarge {
            size: req.size,
            max: isize::MAX as usize,
        };
        let size = align_up(req.effective_size(), MIN_ALIGN).ok_or(too_large.clone())?;
        let bytes = size
            .checked_add(align - MIN_ALIGN)
            .ok_or(too_large.clone())?;
        if bytes > isize::MAX as usize {
            return Err(too_large);
        }
        let base = self.backend.alloc_region(bytes)?;
        // Cannot overflow: the region's bytes fit in the address space.
        let ptr = DevicePtr(base.0.next_multiple_of(align as u64));
        self.counters.on_reserve(bytes);
        self.counters.on_alloc(req.size, size);
        self.live.lock().insert(
            ptr.0,
            Entry {
                base,
                bytes,
                size,
                requested: req.size,
            },
        );
        Ok(Block {
            ptr,
            size,
            requested: req.size,
            stream: req.stream,
            device: self.backend.device(),
            handle: 0,
        })
    }

    fn deallocate(&self, block: &Block) -> Result<()> {
        let e = {
            let mut live = self.live.lock();
            match live.get(&block.ptr.0) {
                Some(&e) if e.size == block.size => {
                    live.remove(&block.ptr.0);
                    e
                }
                _ => return Err(Error::NotOwned { ptr: block.ptr }),
            }
        };
        // The driver call runs outside the lock; on failure the block stays live.
        if let Err(err) = self.backend.free_region(e.base, e.bytes) {
            self.live.lock().insert(block.ptr.0, e);
            return Err(err.into());
        }
        self.counters.on_release(e.bytes);
        self.counters.on_free(e.requested, e.size);
        Ok(())
    }

    fn check(&self, block: &Block) -> Result<()> {
        match self.live.lock().get(&block.ptr.0) {
            Some(e) if e.size == block.size => Ok(()),
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

impl Drop for MallocPool {
    fn drop(&mut self) {
        for (_, e) in self.live.get_mut().drain() {
            let _ = self.backend.free_region(e.base, e.bytes);
        }
    }
}
