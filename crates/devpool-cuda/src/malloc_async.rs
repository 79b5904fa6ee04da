//! [`CudaMallocAsync`]: the driver's stream-ordered allocator (`cuMemAllocAsync` /
//! `cuMemFreeAsync` on the device's default memory pool) as a baseline.

use crate::driver::{check, raw_stream};
use crate::CudaBackend;
use cudarc::driver::sys::{self, CUresult};
use devpool_core::{
    Allocator, Backend, BackendError, Block, Counters, DevicePtr, Error, OomInfo, Request, Result,
    Stats, StreamId, MIN_ALIGN,
};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Arc;

const SHARDS: usize = 64;

#[derive(Clone, Copy)]
struct Entry {
    base: u64,
    size: usize,
    requested: usize,
    stream: StreamId,
}

/// The device's default memory pool handle.
#[derive(Clone, Copy)]
struct MemPool(sys::CUmemoryPool);

// SAFETY: a memory pool handle is an opaque token that the driver lets any thread use.
unsafe impl Send for MemPool {}
// SAFETY: as above; the driver synchronizes use of the pool.
unsafe impl Sync for MemPool {}

/// `cudaMallocAsync` as an [`Allocator`]: every allocation is one `cuMemAllocAsync`
/// and every free one `cuMemFreeAsync` on the device's default memory pool, whose
/// release threshold is set to the maximum so that it caches everything (as the
/// published figures of this baseline assume).
///
/// - A free is queued on the stream passed to
///   [`deallocate`](Allocator::deallocate) (the block's own stream for
///   [`free`](Allocator::free)); streams named by
///   [`record_stream`](Allocator::record_stream) are waited for first. The driver
///   decides when other streams may reuse the memory.
/// - A table of live blocks (pointer -> size) catches foreign pointers and double
///   frees before they reach the driver.
/// - `reserved_bytes` in [`stats`](Allocator::stats) is the pool's own count
///   (`CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT` / `_HIGH`). The default pool is shared by
///   the whole process, so it includes memory of other users of the pool, and the
///   backend's counters see none of it.
/// - On out of memory it synchronizes the device, trims the pool and retries once;
///   when that fails too it trims the pool again before returning the error.
///
/// ```
/// use devpool_core::Allocator;
/// let Ok(gpu) = devpool_cuda::CudaBackend::new(0) else { return };
/// let a = devpool_cuda::CudaMallocAsync::new(gpu).unwrap();
/// let b = a.alloc(1 << 20).unwrap();
/// a.free(b).unwrap();
/// ```
pub struct CudaMallocAsync {
    cuda: Arc<CudaBackend>,
    backend: Arc<dyn Backend>,
    pool: MemPool,
    live: Box<[Mutex<HashMap<u64, Entry>>]>,
    recorded: Mutex<HashMap<u64, Vec<StreamId>>>,
    counters: Counters,
}

impl CudaMallocAsync {
    /// The driver's stream-ordered allocator on `backend`'s device, with the default
    /// pool's release threshold set to `u64::MAX`.
    ///
    /// Errors: [`BackendError::Unsupported`] when the device has no memory pools;
    /// [`BackendError::Driver`] when a driver call fails.
    pub fn new(backend: Arc<CudaBackend>) -> std::result::Result<Self, BackendError> {
        let dev = backend.raw_device();
        let pools = crate::backend::attribute(
            dev,
            sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
        )?;
        if pools == 0 {
            return Err(BackendError::Unsupported(
                "stream-ordered memory pools on this device",
            ));
        }
        let _cx = backend.enter()?;
        let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
        // SAFETY: the context is current; `dev` is a valid device; the driver writes
        // one pool handle.
        check("cuDeviceGetDefaultMemPool", unsafe {
            sys::cuDeviceGetDefaultMemPool(&mut pool, dev)
        })?;
        let mut threshold: u64 = u64::MAX;
        // SAFETY: the release threshold attribute takes a pointer to one cuuint64_t.
        check("cuMemPoolSetAttribute", unsafe {
            sys::cuMemPoolSetAttribute(
                pool,
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                (&mut threshold as *mut u64).cast::<c_void>(),
            )
        })?;
        // Measure from here: the high-water mark of the pool's memory starts again at
        // what it holds now (the driver only accepts zero, meaning "reset").
        let mut zero: u64 = 0;
        // SAFETY: the high-water attribute takes a pointer to one cuuint64_t.
        check("cuMemPoolSetAttribute", unsafe {
            sys::cuMemPoolSetAttribute(
                pool,
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH,
                (&mut zero as *mut u64).cast::<c_void>(),
            )
        })?;
        drop(_cx);
        let dyn_backend: Arc<dyn Backend> = backend.clone();
        Ok(CudaMallocAsync {
            cuda: backend,
            backend: dyn_backend,
            pool: MemPool(pool),
            live: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            recorded: Mutex::new(HashMap::new()),
            counters: Counters::default(),
        })
    }

    #[inline]
    fn shard(&self, ptr: u64) -> &Mutex<HashMap<u64, Entry>> {
        let h = (ptr >> 8).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58;
        &self.live[h as usize % SHARDS]
    }

    /// One attribute of the pool (a byte count).
    fn pool_bytes(&self, attr: sys::CUmemPool_attribute) -> std::result::Result<u64, BackendError> {
        let _cx = self.cuda.enter()?;
        let mut v: u64 = 0;
        // SAFETY: the byte-count attributes write one cuuint64_t.
        check("cuMemPoolGetAttribute", unsafe {
            sys::cuMemPoolGetAttribute(self.pool.0, attr, (&mut v as *mut u64).cast::<c_void>())
        })?;
        Ok(v)
    }

    fn reserved(&self) -> (u64, u64) {
        use sys::CUmemPool_attribute as A;
        (
            self.pool_bytes(A::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)
                .unwrap_or(0),
            self.pool_bytes(A::CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH)
                .unwrap_or(0),
        )
    }

    /// Wait for the device and give every unused byte of the pool back.
    fn trim_pool(&self) -> std::result::Result<(), BackendError> {
        let _cx = self.cuda.enter()?;
        // SAFETY: the context is current.
        check("cuCtxSynchronize", unsafe { sys::cuCtxSynchronize() })?;
        // SAFETY: the pool handle is the device's default pool, alive for the process.
        check("cuMemPoolTrimTo", unsafe {
            sys::cuMemPoolTrimTo(self.pool.0, 0)
        })
    }

    fn raw_alloc(&self, bytes: usize, stream: StreamId) -> std::result::Result<u64, CUresult> {
        let mut p: sys::CUdeviceptr = 0;
        let r = match self.cuda.enter() {
            // SAFETY: the context is current; the driver writes one pointer.
            Ok(_cx) => unsafe { sys::cuMemAllocAsync(&mut p, bytes, raw_stream(stream)) },
            Err(_) => CUresult::CUDA_ERROR_INVALID_CONTEXT,
        };
        match r {
            CUresult::CUDA_SUCCESS => Ok(p),
            r => Err(r),
        }
    }

    fn oom(&self, req: &Request) -> Error {
        let s = self.stats();
        Error::OutOfMemory(Box::new(OomInfo::from_stats(
            req.size,
            &s,
            self.cuda.mem_info().unwrap_or((0, 0)),
            "allocator cuda-malloc-async: the driver's default memory pool".into(),
        )))
    }
}

impl Allocator for CudaMallocAsync {
    fn name(&self) -> &str {
        "cuda-malloc-async"
    }

    fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    fn allocate(&self, req: Request) -> Result<Block> {
        let align = req.effective_align()?;
        let (size, bytes) = req.padded(MIN_ALIGN, align)?;
        if bytes > isize::MAX as usize {
            return Err(Error::too_large(req.size));
        }
        let mut r = self.raw_alloc(bytes, req.stream);
        if r == Err(CUresult::CUDA_ERROR_OUT_OF_MEMORY) {
            let _ = self.trim_pool();
            r = self.raw_alloc(bytes, req.stream);
        }
        self.counters.on_backend_call();
        let base = match r {
            Ok(p) => p,
            Err(CUresult::CUDA_ERROR_OUT_OF_MEMORY) => {
                self.counters.on_failure();
                // A failed request can leave the pool grown to nearly the whole
                // device (seen on an H200 with driver 580): give that back first.
                let _ = self.trim_pool();
                return Err(self.oom(&req));
            }
            Err(r) => {
                self.counters.on_failure();
                return Err(crate::driver::error("cuMemAllocAsync", r).into());
            }
        };
        let ptr = base.next_multiple_of(align as u64);
        self.shard(ptr).lock().insert(
            ptr,
            Entry {
                base,
                size,
                requested: req.size,
                stream: req.stream,
            },
        );
        self.counters.on_alloc(req.size, size);
        Ok(req.granted(DevicePtr(ptr), size, self.cuda.device(), 0))
    }

    fn deallocate(&self, block: Block, stream: StreamId) -> Result<()> {
        let dev = self.cuda.device();
        if block.device != dev {
            return Err(Error::WrongDevice {
                ptr: block.ptr,
                block_device: block.device,
                allocator_device: dev,
            });
        }
        let e = {
            let mut live = self.shard(block.ptr.0).lock();
            match live.get(&block.ptr.0) {
                Some(&e) if e.size == block.size => {
                    live.remove(&block.ptr.0);
                    e
                }
                _ => return Err(Error::NotOwned { ptr: block.ptr }),
            }
        };
        let put_back = |err: Error| {
            self.shard(block.ptr.0).lock().insert(block.ptr.0, e);
            err
        };
        let waits = self.recorded.lock().remove(&block.ptr.0);
        for s in waits.unwrap_or_default() {
            if s == stream {
                continue;
            }
            let ev = self.cuda.create_event().map_err(|e| put_back(e.into()))?;
            let r = self
                .cuda
                .record_event(ev, s)
                .and_then(|_| self.cuda.stream_wait_event(stream, ev));
            let _ = self.cuda.destroy_event(ev);
            r.map_err(|e| put_back(e.into()))?;
        }
        let _cx = self.cuda.enter().map_err(|e| put_back(e.into()))?;
        // SAFETY: `base` came from cuMemAllocAsync on this device and is freed once
        // (taken out of the live table above); the context is current.
        let r = unsafe { sys::cuMemFreeAsync(e.base, raw_stream(stream)) };
        check("cuMemFreeAsync", r).map_err(|err| put_back(err.into()))?;
        self.counters.on_backend_call();
        self.counters.on_free(e.requested, e.size);
        Ok(())
    }

    fn record_stream(&self, block: &Block, stream: StreamId) -> Result<()> {
        match self.shard(block.ptr.0).lock().get(&block.ptr.0) {
            Some(e) if e.size == block.size => {}
            _ => return Err(Error::NotOwned { ptr: block.ptr }),
        }
        if stream != block.stream {
            let mut r = self.recorded.lock();
            let v = r.entry(block.ptr.0).or_default();
            if !v.contains(&stream) {
                v.push(stream);
            }
        }
        Ok(())
    }

    fn stats(&self) -> Stats {
        let mut s = self.counters.snapshot();
        let (current, peak) = self.reserved();
        s.reserved_bytes.current = current;
        s.reserved_bytes.peak = peak;
        s
    }

    fn trim(&self) -> Result<usize> {
        let (before, _) = self.reserved();
        self.trim_pool()?;
        let (after, _) = self.reserved();
        Ok(before.saturating_sub(after) as usize)
    }
}

impl Drop for CudaMallocAsync {
    fn drop(&mut self) {
        let Ok(_cx) = self.cuda.enter() else { return };
        for shard in self.live.iter_mut() {
            for (_, e) in shard.get_mut().drain() {
                // SAFETY: a live allocation of this pool, freed once, on its own stream.
                let _ = unsafe { sys::cuMemFreeAsync(e.base, raw_stream(e.stream)) };
            }
        }
    }
}
