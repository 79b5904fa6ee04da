//! Where device memory comes from: the [`Backend`] trait and the counters every
//! backend keeps, so that all strategies are measured the same way.

use crate::error::BackendError;
use crate::stats::AtomicGauge;
use crate::types::{DeviceId, DevicePtr, EventId, StreamId};
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Result of a backend call.
pub type BackendResult<T> = std::result::Result<T, BackendError>;

/// A source of device memory, streams and events for one device.
///
/// Two ways to get memory:
/// - contiguous regions ([`alloc_region`](Backend::alloc_region), like `cuMemAlloc`);
/// - where [`supports_virtual`](Backend::supports_virtual) says so, virtual address
///   ranges ([`reserve`](Backend::reserve), like `cuMemAddressReserve`) into which
///   physical pages of [`granularity`](Backend::granularity) bytes are mapped and
///   unmapped ([`map`](Backend::map) / [`unmap`](Backend::unmap), like
///   `cuMemCreate` + `cuMemMap` + `cuMemSetAccess` and `cuMemUnmap` + `cuMemRelease`).
///
/// Each mapped page is its own physical allocation, so any page can later be unmapped
/// alone; [`map`](Backend::map) of many pages is still one batch for the caller.
///
/// Every backend counts the device bytes it holds for its users in
/// [`counters`](Backend::counters): regions plus mapped pages; reserved address
/// space does not count. Trace replay reads its fragmentation figures from there.
pub trait Backend: Send + Sync {
    /// A short name ("mock", "cuda").
    fn name(&self) -> &str;
    /// The device this backend serves.
    fn device(&self) -> DeviceId;
    /// Physical page size of virtual mappings, and the alignment of regions.
    fn granularity(&self) -> usize;
    /// The page a pool works in: the granularity, at least
    /// [`MIN_ALIGN`](crate::MIN_ALIGN), rounded up to a power of two (page sizes are
    /// powers of two on every device; a backend that said otherwise gets pages rounded
    /// up to one, and 1 GiB should that overflow).
    fn page_size(&self) -> usize {
        self.granularity()
            .max(crate::MIN_ALIGN)
            .checked_next_power_of_two()
            .unwrap_or(1 << 30)
    }
    /// Bytes free and in total on the device.
    fn mem_info(&self) -> BackendResult<(u64, u64)>;

    /// Device bytes a region of `size` bytes really takes, as the driver rounds it
    /// (see [`driver_region_bytes`]): what [`counters`](Backend::counters) count for
    /// it, and what an allocator that takes regions counts as reserved. `None` when
    /// the rounding overflows.
    fn region_bytes(&self, size: usize) -> Option<usize> {
        driver_region_bytes(size, self.granularity())
    }

    /// Allocate a contiguous region of `size` bytes (aligned to at least 256 bytes).
    fn alloc_region(&self, size: usize) -> BackendResult<DevicePtr>;
    /// Free a region returned by [`alloc_region`](Backend::alloc_region) (same size).
    fn free_region(&self, ptr: DevicePtr, size: usize) -> BackendResult<()>;

    /// Whether virtual ranges and page mapping are available.
    fn supports_virtual(&self) -> bool {
        false
    }
    /// Reserve `size` bytes of address space (a multiple of the granularity), aligned
    /// to `align` (a power of two, at least the granularity). No memory is used.
    fn reserve(&self, _size: usize, _align: usize) -> BackendResult<DevicePtr> {
        Err(BackendError::Unsupported("virtual address ranges"))
    }
    /// Give back a reserved range; every page in it must be unmapped first.
    fn unreserve(&self, _ptr: DevicePtr, _size: usize) -> BackendResult<()> {
        Err(BackendError::Unsupported("virtual address ranges"))
    }
    /// Back `[ptr, ptr + size)` with fresh physical pages (one per granule) and make it
    /// accessible. The range must lie in a reserved range, be granule aligned, and
    /// have no page mapped yet.
    fn map(&self, _ptr: DevicePtr, _size: usize) -> BackendResult<()> {
        Err(BackendError::Unsupported("page mapping"))
    }
    /// Unmap every page of `[ptr, ptr + size)` and free its physical memory. Every page
    /// in the range must be mapped, and the range must hold whole chunks (see
    /// [`map_chunks`](Backend::map_chunks); a page mapped by [`map`](Backend::map) is a
    /// chunk of its own).
    fn unmap(&self, _ptr: DevicePtr, _size: usize) -> BackendResult<()> {
        Err(BackendError::Unsupported("page mapping"))
    }
    /// Back `[ptr, ptr + sum of chunks)` with one physical allocation per chunk,
    /// laid out one after the other from `ptr` (each a multiple of the granularity),
    /// and make the whole range accessible in one step. Fewer, larger physical
    /// allocations cost the driver far less than one per page; the price is that a
    /// chunk can later be unmapped only whole. The same rules as
    /// [`map`](Backend::map) apply to the range. One call, counted as one map call.
    ///
    /// The default maps one allocation per page, which is always allowed.
    ///
    /// Physical memory is freed when its last mapping goes (see
    /// [`alias`](Backend::alias)).
    fn map_chunks(&self, ptr: DevicePtr, chunks: &[usize]) -> BackendResult<()> {
        let total = chunks
            .iter()
            .try_fold(0usize, |a, &c| a.checked_add(c))
            .ok_or(BackendError::InvalidArgument {
                call: "map_chunks",
                detail: "sizes overflow".into(),
            })?;
        self.map(ptr, total)
    }

    /// Map the physical memory behind each range of `from` (whole chunks) a second
    /// time, the ranges one after the other from `to` (a reserved range with nothing
    /// mapped there), and make it accessible in one step. No memory is taken: the
    /// chunks are now mapped twice, and live on at `to` once their first mappings
    /// are unmapped. This is how a pool reuses memory it holds at other addresses
    /// without releasing and creating it again (`cuMemRetainAllocationHandle` +
    /// `cuMemMap` per chunk, one `cuMemSetAccess`). Work queued before on the stream
    /// that owns the memory may still use it through the old addresses; work queued
    /// later through `to` runs after it, in stream order. One call, counted as a map
    /// call.
    fn alias(&self, _to: DevicePtr, _from: &[(DevicePtr, usize)]) -> BackendResult<()> {
        Err(BackendError::Unsupported("aliasing mapped memory"))
    }

    /// Create a stream.
    fn create_stream(&self) -> BackendResult<StreamId>;
    /// Destroy a stream made by [`create_stream`](Backend::create_stream).
    fn destroy_stream(&self, stream: StreamId) -> BackendResult<()>;
    /// Block the host until all work queued on `stream` is done.
    fn synchronize(&self, stream: StreamId) -> BackendResult<()>;
    /// Block the host until all work queued on the device is done (`cuCtxSynchronize`).
    /// Backends that cannot say so return `Unsupported`, and callers synchronize the
    /// streams they know instead.
    fn synchronize_device(&self) -> BackendResult<()> {
        Err(BackendError::Unsupported("device synchronization"))
    }

    /// Create an event.
    fn create_event(&self) -> BackendResult<EventId>;
    /// Destroy an event.
    fn destroy_event(&self, event: EventId) -> BackendResult<()>;
    /// Record `event` on `stream`: it completes when the work queued so far does.
    fn record_event(&self, event: EventId, stream: StreamId) -> BackendResult<()>;
    /// Whether the work before the event's last record has completed.
    fn event_done(&self, event: EventId) -> BackendResult<bool>;
    /// Block the host until the event completes.
    fn wait_event(&self, event: EventId) -> BackendResult<()>;

    /// Fill `len` bytes at `ptr` with `value`, queued on `stream`.
    fn memset(
        &self,
        _ptr: DevicePtr,
        _value: u8,
        _len: usize,
        _stream: StreamId,
    ) -> BackendResult<()> {
        Err(BackendError::Unsupported("memset"))
    }
    /// Copy host bytes to the device; returns when the copy is done.
    fn copy_to_device(&self, _dst: DevicePtr, _src: &[u8], _stream: StreamId) -> BackendResult<()> {
        Err(BackendError::Unsupported("copies"))
    }
    /// Copy device bytes to the host; returns when the copy is done.
    fn copy_to_host(
        &self,
        _dst: &mut [u8],
        _src: DevicePtr,
        _stream: StreamId,
    ) -> BackendResult<()> {
        Err(BackendError::Unsupported("copies"))
    }

    /// Let `peer`'s device read and write this device's memory: memory this backend
    /// holds now and maps later (for virtual ranges, access is granted to both
    /// devices). Without it, a peer's kernels and copies must not touch this memory.
    fn enable_peer_access(&self, _peer: DeviceId) -> BackendResult<()> {
        Err(BackendError::Unsupported("peer access"))
    }
    /// Whether [`enable_peer_access`](Backend::enable_peer_access) was granted to `peer`.
    fn peer_access_enabled(&self, _peer: DeviceId) -> bool {
        false
    }
    /// Copy `len` bytes from `src` on `src_backend`'s device into `dst` on this
    /// device; returns when the copy is done. Needs peer access to `src` from this
    /// device (`src_backend.enable_peer_access(self.device())`).
    fn copy_from_peer(
        &self,
        _dst: DevicePtr,
        _src_backend: &dyn Backend,
        _src: DevicePtr,
        _len: usize,
        _stream: StreamId,
    ) -> BackendResult<()> {
        Err(BackendError::Unsupported("peer copies"))
    }

    /// The backend's own counts of calls and bytes.
    fn counters(&self) -> BackendCounters;

    /// Set the peak of [`BackendCounters::bytes_in_use`] back to its current value
    /// (what PyTorch's `reset_peak_memory_stats` asks of an allocator). Backends that
    /// keep no peak do nothing.
    fn reset_peak_bytes(&self) {}
}

/// Regions of up to half a page are counted in units of this many bytes: the driver
/// packs them into pages it shares between small allocations.
pub const SMALL_REGION_ROUNDING: usize = 512;

/// Device bytes the CUDA driver takes for a `cuMemAlloc` region of `size` bytes on a
/// device whose page size is `granularity`: a region of more than half a page gets
/// whole pages of its own (1 MiB + 1 B takes 2 MiB of an H200's memory); one of half a
/// page or less is packed with others into shared pages and counted in
/// [`SMALL_REGION_ROUNDING`] units. Measured on an H200 (driver 580, 2026-12-01, GPU
/// test `region_bytes_match_cumemgetinfo`): 16 regions of 1 B, 4 KiB or 100000 B took
/// one 2 MiB page between them, 16 of 256 KiB + 1 B three pages, 16 of 1 MiB - 1 B and
/// 16 of 1 MiB eight pages (two to a page), 16 of 1 MiB + 1 B sixteen pages. The mock backend takes the same, so the
/// `cudaMalloc` baseline (`direct`) is measured fairly on both. `None` when the
/// rounding overflows.
///
/// ```
/// use devpool_core::driver_region_bytes;
/// let page = 2 << 20;
/// assert_eq!(driver_region_bytes(1000, page), Some(1024));
/// assert_eq!(driver_region_bytes(1 << 20, page), Some(1 << 20));
/// assert_eq!(driver_region_bytes((1 << 20) + 1, page), Some(page));
/// assert_eq!(driver_region_bytes(page + 1, page), Some(2 * page));
/// assert_eq!(driver_region_bytes(usize::MAX, page), None);
/// ```
pub fn driver_region_bytes(size: usize, granularity: usize) -> Option<usize> {
    if size > granularity / 2 {
        crate::align_up(size, granularity)
    } else {
        crate::align_up(size, SMALL_REGION_ROUNDING)
    }
}

/// Anything that can be turned into a shared `dyn Backend`: an `Arc` of a concrete
/// backend, or an `Arc<dyn Backend>` already. Constructors take `impl IntoBackend` so
/// both work.
pub trait IntoBackend {
    /// The shared backend.
    fn into_backend(self) -> std::sync::Arc<dyn Backend>;
}

impl<B: Backend + 'static> IntoBackend for std::sync::Arc<B> {
    fn into_backend(self) -> std::sync::Arc<dyn Backend> {
        self
    }
}

impl IntoBackend for std::sync::Arc<dyn Backend> {
    fn into_backend(self) -> std::sync::Arc<dyn Backend> {
        self
    }
}

/// What a backend has done: calls made and device bytes held.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct BackendCounters {
    /// Device bytes held now and at peak: regions plus mapped pages.
    pub bytes_in_use: crate::stats::Gauge,
    /// Regions allocated.
    pub region_allocs: u64,
    /// Regions freed.
    pub region_frees: u64,
    /// Address ranges reserved.
    pub reserves: u64,
    /// Address ranges released.
    pub unreserves: u64,
    /// Calls to [`Backend::map`].
    pub map_calls: u64,
    /// Pages mapped.
    pub pages_mapped: u64,
    /// Calls to [`Backend::unmap`].
    pub unmap_calls: u64,
    /// Pages unmapped.
    pub pages_unmapped: u64,
    /// Physical allocations made by map calls (one per page for
    /// [`Backend::map`], one per chunk for [`Backend::map_chunks`]).
    pub chunks_created: u64,
    /// Physical allocations freed.
    pub chunks_released: u64,
    /// Calls to [`Backend::alias`] (also counted in `map_calls`).
    pub alias_calls: u64,
    /// Events created.
    pub events_created: u64,
    /// Events recorded.
    pub event_records: u64,
    /// Calls that failed.
    pub failures: u64,
}

impl BackendCounters {
    /// Calls that take or give back memory: region allocs and frees, map and unmap calls.
    pub fn memory_calls(&self) -> u64 {
        self.region_allocs + self.region_frees + self.map_calls + self.unmap_calls
    }
}

/// Atomic form of [`BackendCounters`], for backend implementations.
#[allow(missing_docs)]
#[derive(Debug, Default)]
pub struct BackendCounterCell {
    pub bytes_in_use: AtomicGauge,
    pub region_allocs: AtomicU64,
    pub region_frees: AtomicU64,
    pub reserves: AtomicU64,
    pub unreserves: AtomicU64,
    pub map_calls: AtomicU64,
    pub pages_mapped: AtomicU64,
    pub unmap_calls: AtomicU64,
    pub pages_unmapped: AtomicU64,
    pub chunks_created: AtomicU64,
    pub chunks_released: AtomicU64,
    pub alias_calls: AtomicU64,
    pub events_created: AtomicU64,
    pub event_records: AtomicU64,
    pub failures: AtomicU64,
}

impl BackendCounterCell {
    /// Add one to a counter.
    #[inline]
    pub fn bump(c: &AtomicU64) {
        c.fetch_add(1, Relaxed);
    }

    /// Count `pages` pages mapped in `chunks` physical allocations.
    #[inline]
    pub fn on_mapped(&self, pages: u64, chunks: u64) {
        self.pages_mapped.fetch_add(pages, Relaxed);
        self.chunks_created.fetch_add(chunks, Relaxed);
    }

    /// A snapshot.
    pub fn snapshot(&self) -> BackendCounters {
        BackendCounters {
            bytes_in_use: self.bytes_in_use.get(),
            region_allocs: self.region_allocs.load(Relaxed),
            region_frees: self.region_frees.load(Relaxed),
            reserves: self.reserves.load(Relaxed),
            unreserves: self.unreserves.load(Relaxed),
            map_calls: self.map_calls.load(Relaxed),
            pages_mapped: self.pages_mapped.load(Relaxed),
            unmap_calls: self.unmap_calls.load(Relaxed),
            pages_unmapped: self.pages_unmapped.load(Relaxed),
            chunks_created: self.chunks_created.load(Relaxed),
            chunks_released: self.chunks_released.load(Relaxed),
            alias_calls: self.alias_calls.load(Relaxed),
            events_created: self.events_created.load(Relaxed),
            event_records: self.event_records.load(Relaxed),
            failures: self.failures.load(Relaxed),
        }
    }
}
