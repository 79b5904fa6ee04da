//! Deliberately broken allocators, to show that the checks catch what they look for.
#![allow(dead_code)]

use devpool_core::{
    align_up, Backend, Block, Counters, DevicePtr, Error, Pool, Request, Result, Stats,
    StreamOrdered, MIN_ALIGN,
};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

type Cache = Arc<Mutex<Vec<(DevicePtr, usize)>>>;

/// Caches freed regions in one list shared by every stream's pool, so a block freed
/// on one stream is handed at once to another: the stream-order bug.
pub struct SharedCachePool {
    backend: Arc<dyn Backend>,
    cache: Cache,
    live: Mutex<HashMap<u64, usize>>,
    counters: Counters,
}

/// The broken allocator over `backend`.
pub fn shared_cache(backend: Arc<dyn Backend>) -> StreamOrdered<SharedCachePool> {
    let cache: Cache = Arc::default();
    let b = backend.clone();
    StreamOrdered::new("shared-cache", backend, move |_| SharedCachePool {
        backend: b.clone(),
        cache: cache.clone(),
        live: Mutex::new(HashMap::new()),
        counters: Counters::default(),
    })
}

impl Pool for SharedCachePool {
    fn allocate(&self, req: &Request) -> Result<Block> {
        let size = align_up(req.effective_size(), MIN_ALIGN).ok_or(Error::TooLarge {
            size: req.size,
            max: 0,
        })?;
        let cached = {
            let mut c = self.cache.lock();
            c.iter()
                .position(|&(_, s)| s == size)
                .map(|i| c.swap_remove(i).0)
        };
        let ptr = match cached {
            Some(p) => p,
            None => {
                let p = self.backend.alloc_region(size)?;
                self.counters.on_reserve(size);
                p
            }
        };
        self.live.lock().insert(ptr.0, size);
        self.counters.on_alloc(req.size, size);
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
        match self.live.lock().remove(&block.ptr.0) {
            Some(size) => {
                self.cache.lock().push((block.ptr, size));
                self.counters.on_free(block.requested, size);
                Ok(())
            }
            None => Err(Error::NotOwned { ptr: block.ptr }),
        }
    }

    fn check(&self, block: &Block) -> Result<()> {
        match self.live.lock().contains_key(&block.ptr.0) {
            true => Ok(()),
            false => Err(Error::NotOwned { ptr: block.ptr }),
        }
    }

    fn stats(&self) -> Stats {
        self.counters.snapshot()
    }

    fn trim(&self) -> Result<usize> {
        let mut total = 0;
        for (p, s) in self.cache.lock().drain(..) {
            self.backend.free_region(p, s)?;
            self.counters.on_release(s);
            total += s;
        }
        Ok(total)
    }
}

impl Drop for SharedCachePool {
    fn drop(&mut self) {
        for (p, s) in self.cache.lock().drain(..) {
            let _ = self.backend.free_region(p, s);
        }
        for (p, s) in self.live.get_mut().drain() {
            let _ = self.backend.free_region(DevicePtr(p), s);
        }
    }
}
