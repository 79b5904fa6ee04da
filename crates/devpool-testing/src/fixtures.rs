//! Small allocators for tests: a pool that caches freed regions by size and hands
//! the last one freed out first, so addresses come back at once (the direct pool
//! never reuses an address on the mock).
//!
//! - [`reuse`]: each stream's pool has its own cache: a correct caching pool.
//! - [`shared_cache`]: every stream's pool draws from one cache, so a block freed on
//!   one stream is handed at once to another: the stream-order bug, deliberately,
//!   for tests that show a check catches it.
//!
//! ```
//! use devpool_core::Allocator;
//! use devpool_testing::{fixtures::reuse, MockBackend};
//! let a = reuse(MockBackend::shared());
//! let b = a.alloc(4096).unwrap();
//! a.free(b).unwrap();
//! assert_eq!(a.alloc(4096).unwrap().ptr, b.ptr); // the same address at once
//! ```

use devpool_core::{
    Backend, Block, Counters, DevicePtr, Error, IntoBackend, Pool, Request, Result, Stats,
    StreamOrdered, MIN_ALIGN,
};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

/// Freed regions by size, last freed at the end.
type Cache = Arc<Mutex<HashMap<usize, Vec<u64>>>>;

/// One stream's caching pool. A free must name the block's pointer, size and
/// requested size.
pub struct CachingPool {
    backend: Arc<dyn Backend>,
    live: Mutex<HashMap<u64, (usize, usize)>>,
    cache: Cache,
    counters: Counters,
}

impl CachingPool {
    /// A pool over `backend` with its own cache.
    pub fn new(backend: impl IntoBackend) -> Self {
        Self::with_cache(backend.into_backend(), Cache::default())
    }

    fn with_cache(backend: Arc<dyn Backend>, cache: Cache) -> Self {
        CachingPool {
            backend,
            live: Mutex::new(HashMap::new()),
            cache,
            counters: Counters::default(),
        }
    }
}

/// The caching pool as an allocator: one pool, and one cache, per stream.
pub fn reuse(backend: impl IntoBackend) -> StreamOrdered<CachingPool> {
    let backend = backend.into_backend();
    let b = backend.clone();
    StreamOrdered::new("reuse", backend, move |_| CachingPool::new(b.clone()))
}

/// The broken allocator: one pool per stream, one cache shared by all of them.
pub fn shared_cache(backend: impl IntoBackend) -> StreamOrdered<CachingPool> {
    let backend = backend.into_backend();
    let b = backend.clone();
    let cache = Cache::default();
    StreamOrdered::new("shared-cache", backend, move |_| {
        CachingPool::with_cache(b.clone(), cache.clone())
    })
}

impl Pool for CachingPool {
    fn allocate(&self, req: &Request) -> Result<Block> {
        let align = req.effective_align()?;
        if align > MIN_ALIGN {
            return Err(Error::InvalidAlignment { align: req.align });
        }
        let (size, _) = req.padded(MIN_ALIGN, MIN_ALIGN)?;
        let cached = self.cache.lock().get_mut(&size).and_then(|v| v.pop());
        let ptr = match cached {
            Some(p) => DevicePtr(p),
            None => {
                let p = self.backend.alloc_region(size)?;
                self.counters.on_reserve(size);
                p
            }
        };
        self.live.lock().insert(ptr.0, (size, req.size));
        self.counters.on_alloc(req.size, size);
        Ok(req.granted(ptr, size, self.backend.device(), 0))
    }

    fn deallocate(&self, block: &Block) -> Result<()> {
        let mut live = self.live.lock();
        match live.get(&block.ptr.0) {
            Some(&s) if s == (block.size, block.requested) => {
                live.remove(&block.ptr.0);
                drop(live);
                self.counters.on_free(block.requested, block.size);
                self.cache
                    .lock()
                    .entry(block.size)
                    .or_default()
                    .push(block.ptr.0);
                Ok(())
            }
            _ => Err(Error::NotOwned { ptr: block.ptr }),
        }
    }

    fn check(&self, block: &Block) -> Result<()> {
        match self.live.lock().get(&block.ptr.0) {
            Some(&s) if s == (block.size, block.requested) => Ok(()),
            _ => Err(Error::NotOwned { ptr: block.ptr }),
        }
    }

    fn stats(&self) -> Stats {
        self.counters.snapshot()
    }

    fn trim(&self) -> Result<usize> {
        let mut total = 0;
        for (size, ptrs) in self.cache.lock().drain() {
            for p in ptrs {
                self.backend.free_region(DevicePtr(p), size)?;
                self.counters.on_release(size);
                total += size;
            }
        }
        Ok(total)
    }
}

impl Drop for CachingPool {
    fn drop(&mut self) {
        let _ = self.trim();
        for (p, (size, _)) in self.live.get_mut().drain() {
            let _ = self.backend.free_region(DevicePtr(p), size);
        }
    }
}
