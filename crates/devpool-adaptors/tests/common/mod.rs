//! Helpers shared by the adaptor tests: a pool that reuses addresses at once, an
//! adaptor that counts trims, and block tagging on the host-backed mock.
#![allow(dead_code)]

use devpool_core::{
    align_up, Allocator, Backend, Block, Counters, Error, IntoBackend, MockBackend, Pool, Request,
    Result, Stats, StreamOrdered, MIN_ALIGN,
};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A pool that keeps freed regions by size and hands the last one freed out first, so
/// addresses come back at once (the direct pool never reuses an address on the mock).
/// A free must name the block's pointer, size and requested size.
pub struct ReusePool {
    backend: Arc<dyn Backend>,
    live: Mutex<HashMap<u64, (usize, usize)>>,
    cache: Mutex<HashMap<usize, Vec<u64>>>,
    counters: Counters,
}

impl ReusePool {
    pub fn new(backend: Arc<dyn Backend>) -> Self {
        ReusePool {
            backend,
            live: Mutex::new(HashMap::new()),
            cache: Mutex::new(HashMap::new()),
            counters: Counters::default(),
        }
    }
}

impl Pool for ReusePool {
    fn allocate(&self, req: &Request) -> Result<Block> {
        let align = req.effective_align()?;
        if align > MIN_ALIGN {
            return Err(Error::InvalidAlignment { align: req.align });
        }
        let size = align_up(req.effective_size(), MIN_ALIGN).ok_or(Error::TooLarge {
            size: req.size,
            max: isize::MAX as usize,
        })?;
        let cached = self.cache.lock().get_mut(&size).and_then(|v| v.pop());
        let ptr = match cached {
            Some(p) => devpool_core::DevicePtr(p),
            None => {
                let p = self.backend.alloc_region(size)?;
                self.counters.on_reserve(size);
                p
            }
        };
        self.live.lock().insert(ptr.0, (size, req.size));
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
                self.backend.free_region(devpool_core::DevicePtr(p), size)?;
                self.counters.on_release(size);
                total += size;
            }
        }
        Ok(total)
    }
}

impl Drop for ReusePool {
    fn drop(&mut self) {
        let _ = self.trim();
        for (p, (size, _)) in self.live.get_mut().drain() {
            let _ = self.backend.free_region(devpool_core::DevicePtr(p), size);
        }
    }
}

/// The reusing pool as an allocator.
pub fn reuse(backend: impl IntoBackend) -> StreamOrdered<ReusePool> {
    let backend = backend.into_backend();
    let b = backend.clone();
    StreamOrdered::new("reuse", backend, move |_| ReusePool::new(b.clone()))
}

/// An adaptor that counts calls to `trim`.
pub struct CountTrims<A> {
    pub inner: A,
    pub trims: AtomicU64,
}

impl<A: Allocator> CountTrims<A> {
    pub fn new(inner: A) -> Self {
        CountTrims {
            inner,
            trims: AtomicU64::new(0),
        }
    }
    pub fn trims(&self) -> u64 {
        self.trims.load(Ordering::Relaxed)
    }
}

impl<A: Allocator> Allocator for CountTrims<A> {
    devpool_core::forward_allocator!(|a| &a.inner; name, backend, allocate, deallocate,
        record_stream, stats);
    fn trim(&self) -> Result<usize> {
        self.trims.fetch_add(1, Ordering::Relaxed);
        self.inner.trim()
    }
}

/// Fill a block with `tag`, and its first and last eight bytes with `id` (when it
/// has room), through the backend.
pub fn write_tag(mock: &MockBackend, b: &Block, tag: u8, id: u64) {
    let n = b.requested.max(1);
    mock.memset(b.ptr, tag, n, b.stream)
        .expect("block memory is accessible");
    if n >= 16 {
        mock.copy_to_device(b.ptr, &id.to_le_bytes(), b.stream)
            .expect("block memory is accessible");
        mock.copy_to_device(b.ptr.offset(n - 8), &id.to_le_bytes(), b.stream)
            .expect("block memory is accessible");
    }
}

/// Panic unless the block still holds what [`write_tag`] wrote.
pub fn check_tag(mock: &MockBackend, b: &Block, tag: u8, id: u64) {
    let n = b.requested.max(1);
    let mut back = vec![0u8; n];
    mock.copy_to_host(&mut back, b.ptr, b.stream)
        .expect("block memory is accessible");
    let body = if n >= 16 {
        assert_eq!(
            &back[..8],
            &id.to_le_bytes(),
            "block {b:?} lost its id {id}"
        );
        assert_eq!(
            &back[n - 8..],
            &id.to_le_bytes(),
            "block {b:?} lost its id {id} at the end"
        );
        &back[8..n - 8]
    } else {
        &back[..]
    };
    // A slice comparison is a memcmp, fast even without optimisation.
    if body != vec![tag; body.len()].as_slice() {
        let i = body.iter().position(|&x| x != tag).unwrap_or(0);
        panic!("block {b:?} lost its pattern {tag:#x} at byte {i}");
    }
}
