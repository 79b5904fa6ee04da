//! A mock backend that also keeps a model of what the CUDA driver calls behind each
//! backend call would cost on an H200. The model is fitted to the per-call times
//! measured there on 2026-12-01 (`driver_call_costs_by_chunk_size` in the CUDA
//! backend's GPU tests, and the driver times of the bundled traces replayed with
//! `devpool compare --backend cuda`; docs/BENCHMARKS.md). A model to compare
//! policies with, not a measurement:
//!
//! - `cuMemCreate`: 10 µs + 90 µs per GiB of the chunk.
//! - `cuMemMap`: 1 µs per mapping; `cuMemRetainAllocationHandle` 0.4 µs.
//! - `cuMemSetAccess`: 12 µs + 25 µs per mapping in the range + 50 µs per GiB: the
//!   cost grows with the number of mappings, not with one call for the range.
//! - `cuMemUnmap`: 16 µs per mapping, plus 27 µs + 0.6 µs per MiB when the
//!   mapping was its chunk's last (the memory goes back to the device).
//! - `cuMemAlloc` / `cuMemFree`: 40 µs each; an event record 2 µs, a query 2 µs.

use devpool_core::{Backend, BackendResult, DevicePtr, EventId, StreamId};
use devpool_testing::MockBackend;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

const MIB: f64 = (1 << 20) as f64;

/// µs to ns.
fn us(x: f64) -> u64 {
    (x * 1000.0) as u64
}

/// `cuMemSetAccess` over `mappings` mappings of `bytes` in all.
fn set_access(mappings: usize, bytes: usize) -> u64 {
    us(12.0 + 25.0 * mappings as f64 + 50.0 * bytes as f64 / (1024.0 * MIB))
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
        self.add(us(40.0));
        self.inner.alloc_region(size)
    }
    fn free_region(&self, ptr: DevicePtr, size: usize) -> BackendResult<()> {
        self.add(us(40.0));
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
            .map(|&c| us(10.0 + 90.0 * c as f64 / (1024.0 * MIB) + 1.0))
            .sum();
        self.add(per + set_access(chunks.len(), total));
        self.inner.map_chunks(ptr, chunks)
    }
    fn alias(&self, to: DevicePtr, from: &[(DevicePtr, usize)]) -> BackendResult<()> {
        let mut mappings = 0;
        for &(p, n) in from {
            mappings += self.inner.mappings_in(p, n).map_or(0, |m| m.len());
        }
        let size: usize = from.iter().map(|f| f.1).sum();
        self.add(us(1.4) * mappings as u64 + set_access(mappings, size));
        self.inner.alias(to, from)
    }
    fn unmap(&self, ptr: DevicePtr, size: usize) -> BackendResult<()> {
        if let Ok(m) = self.inner.mappings_in(ptr, size) {
            let ns: u64 = m
                .iter()
                .map(|&(bytes, maps)| {
                    let freed = if maps == 1 {
                        27.0 + 0.6 * bytes as f64 / MIB
                    } else {
                        0.0
                    };
                    us(16.0 + freed)
                })
                .sum();
            self.add(ns);
        }
        self.inner.unmap(ptr, size)
    }
    fn record_event(&self, event: EventId, stream: StreamId) -> BackendResult<()> {
        self.add(us(2.0));
        self.inner.record_event(event, stream)
    }
    fn event_done(&self, event: EventId) -> BackendResult<bool> {
        self.add(us(2.0));
        self.inner.event_done(event)
    }
}
