//! A mock backend that also keeps a model of what the CUDA driver calls behind each
//! backend call would cost on an H200, from the per-call figures measured there
//! (2 MiB and 64 MiB points, linear in between and beyond): cuMemCreate 10.8 /
//! 17.4 µs, cuMemMap 0.9 / 1.0, cuMemSetAccess 25.5 / 51.9 (once per call, over the
//! whole run), cuMemUnmap 17.3 / 25.2, cuMemRelease 12.9 / 54.6 (per chunk);
//! cuMemAlloc and cuMemFree about 29 µs each (a 58 µs pair). A model to compare
//! policies with, not a measurement.

use devpool_core::{Backend, BackendResult, DevicePtr, EventId, StreamId};
use devpool_testing::MockBackend;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Interpolate a cost between its 2 MiB and 64 MiB figures, in ns.
fn lerp(bytes: usize, at2: f64, at64: f64) -> u64 {
    let mib = bytes as f64 / (1 << 20) as f64;
    ((at2 + (at64 - at2) * (mib - 2.0) / 62.0).max(at2 * 0.5) * 1000.0) as u64
}

/// The mock, with a running total of modeled driver time.
pub struct Costed {
    pub inner: Arc<MockBackend>,
    /// Modeled driver time so far, ns.
    pub ns: AtomicU64,
}

impl Costed {
    pub fn new(inner: Arc<MockBackend>) -> Arc<Self> {
        Arc::new(Costed {
            inner,
            ns: AtomicU64::new(0),
        })
    }
    fn add(&self, ns: u64) {
        self.ns.fetch_add(ns, Relaxed);
    }
}

impl Backend for Costed {
    devpool_core::forward_backend!(|s| &*s.inner; device, granularity, mem_info, supports_virtual, reserve, unreserve, create_stream, destroy_stream, synchronize, synchronize_device, create_event, destroy_event, wait_event, counters);
    fn name(&self) -> &str {
        "mock+cost"
    }
    fn alloc_region(&self, size: usize) -> BackendResult<DevicePtr> {
        self.add(29_000);
        self.inner.alloc_region(size)
    }
    fn free_region(&self, ptr: DevicePtr, size: usize) -> BackendResult<()> {
        self.add(29_000);
        self.inner.free_region(ptr, size)
    }
    fn map(&self, ptr: DevicePtr, size: usize) -> BackendResult<()> {
        let g = self.granularity();
        self.map_chunks(ptr, &vec![g; size / g])
    }
    fn map_chunks(&self, ptr: DevicePtr, chunks: &[usize]) -> BackendResult<()> {
        let total: usize = chunks.iter().sum();
        let per: u64 = chunks
            .iter()
            .map(|&c| lerp(c, 10.8, 17.4) + lerp(c, 0.9, 1.0))
            .sum();
        self.add(per + lerp(total, 25.5, 51.9));
        self.inner.map_chunks(ptr, chunks)
    }
    fn alias(&self, to: DevicePtr, from: &[(DevicePtr, usize)]) -> BackendResult<()> {
        // Per chunk a handle retained and dropped (about 1 µs each, a guess) and a
        // cuMemMap; one cuMemSetAccess; no cuMemCreate.
        let g = self.granularity();
        let size: usize = from.iter().map(|f| f.1).sum();
        let chunks = (size / g).max(1) as u64;
        self.add(chunks * (2_000 + lerp(g, 0.9, 1.0)) + lerp(size, 25.5, 51.9));
        self.inner.alias(to, from)
    }
    fn unmap(&self, ptr: DevicePtr, size: usize) -> BackendResult<()> {
        // One unmap and one release per chunk; the chunk sizes are not visible
        // here, so count the range as chunks of the layer's usual size.
        // One cuMemUnmap per page's mapping (a bound: per chunk in fact), and a
        // release for each chunk whose memory goes.
        let before = self.inner.counters();
        let r = self.inner.unmap(ptr, size);
        let after = self.inner.counters();
        let freed = after.chunks_released - before.chunks_released;
        let freed_bytes = before.bytes_in_use.current - after.bytes_in_use.current;
        let each = if freed > 0 {
            freed_bytes as usize / freed as usize
        } else {
            0
        };
        let g = self.granularity();
        self.add(
            lerp(size.min(64 << 20).max(g), 17.3, 25.2) + freed * lerp(each.max(g), 12.9, 54.6),
        );
        r
    }
    fn record_event(&self, event: EventId, stream: StreamId) -> BackendResult<()> {
        self.add(1_500);
        self.inner.record_event(event, stream)
    }
    fn event_done(&self, event: EventId) -> BackendResult<bool> {
        self.add(500);
        self.inner.event_done(event)
    }
}
