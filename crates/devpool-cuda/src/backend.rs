//! [`CudaBackend`]: device memory, streams and events of one device from the CUDA
//! driver.

use crate::driver::{self, check, raw_event, raw_stream, Context};
use crate::peer::Peer;
use crate::timing::{Call, DriverCallTime, DriverClock};
use cudarc::driver::sys::{self, CUresult};
use devpool_core::{
    Backend, BackendCounterCell, BackendCounters, BackendError, BackendResult, DeviceId, DevicePtr,
    EventId, StreamId,
};
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ffi::{c_int, c_uint};
use std::sync::{Arc, OnceLock};

/// Page size assumed for region alignment when the device has no virtual memory
/// management (it then never maps pages).
const FALLBACK_GRANULARITY: usize = 2 << 20;

/// A region handed out by `alloc_region`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Region {
    /// What `cuMemAlloc` returned (the handed-out pointer, or below it when the
    /// region had to be over-allocated to be page aligned).
    pub(crate) base: u64,
    /// Bytes held from the driver: what was asked of `cuMemAlloc`, rounded as the
    /// driver rounds it ([`driver_region_bytes`](devpool_core::driver_region_bytes)).
    pub(crate) bytes: usize,
    /// Bytes asked for.
    pub(crate) size: usize,
}

/// Reserved address ranges, mapped pages, mappings and the physical allocations
/// behind them.
#[derive(Debug, Default)]
pub(crate) struct VmTable {
    /// Start -> size of every reserved range.
    pub(crate) ranges: devpool_core::ReservedRanges,
    /// Address of every mapped page (and of pages being mapped or unmapped now).
    pub(crate) pages: BTreeSet<u64>,
    /// Start -> (bytes, physical allocation) of every mapping.
    pub(crate) maps: BTreeMap<u64, (usize, u64)>,
    /// Physical allocation -> (bytes, mappings of it).
    pub(crate) phys: HashMap<u64, (usize, u32)>,
    /// The next physical allocation's number.
    pub(crate) next_phys: u64,
}

/// The CUDA driver as a [`Backend`] for one device.
///
/// - Regions come from `cuMemAlloc` / `cuMemFree`. Regions of at least
///   [`granularity`](Backend::granularity) bytes are aligned to it; smaller ones to
///   at least 256 bytes, as `cuMemAlloc` guarantees.
/// - Virtual ranges come from `cuMemAddressReserve`; [`map`](Backend::map) backs each
///   granule page with its own `cuMemCreate` allocation, [`map_chunks`](Backend::map_chunks)
///   each chunk, and both make the whole range readable and writable with one
///   `cuMemSetAccess`; [`alias`](Backend::alias) maps held memory a second time;
///   [`unmap`](Backend::unmap) waits for nothing (see the `vmm` module).
/// - Streams are non-blocking `CUstream`s; a [`StreamId`] is the raw handle, and
///   [`StreamId::DEFAULT`] (0) is the legacy default stream. A stream handle of this
///   device's primary context made elsewhere (PyTorch's, say) comes in through the
///   `unsafe` [`StreamId::from_raw`], whose caller vouches for it: safe code cannot
///   hand the driver a made-up handle.
/// - Events are `CUevent`s without timing.
/// - [`enable_peer_access`](Backend::enable_peer_access) lets another device use this
///   one's regions and pages (see the `peer` module); copies between devices go
///   through unified addressing.
///
/// Every call makes the device's primary context current on the calling thread
/// first (one cheap check when it already is), and puts back any other context the
/// thread had current. The backend tracks what it hands out, so a wrong pointer,
/// size or event gives an error instead of reaching the driver, and whatever is still
/// held when the backend drops is given back to the driver.
///
/// ```
/// use devpool_core::Backend;
/// match devpool_cuda::CudaBackend::new(0) {
///     Ok(gpu) => {
///         let p = gpu.alloc_region(3 << 20).unwrap();
///         // Counted as the driver takes it: whole pages.
///         assert_eq!(gpu.counters().bytes_in_use.current, 4 << 20);
///         gpu.free_region(p, 3 << 20).unwrap();
///     }
///     Err(e) => println!("no GPU here: {e}"),
/// }
/// ```
pub struct CudaBackend {
    ordinal: u32,
    device: sys::CUdevice,
    ctx: Context,
    device_name: String,
    granularity: usize,
    virtual_memory: bool,
    pub(crate) regions: Mutex<HashMap<u64, Region>>,
    pub(crate) vm: Mutex<VmTable>,
    events: RwLock<HashSet<u64>>,
    streams: Mutex<HashSet<u64>>,
    /// Devices given access to this one's memory. Held for reading through every
    /// `map`, so a new peer is never missed by a page being mapped.
    pub(crate) peers: RwLock<Vec<Peer>>,
    pub(crate) counters: BackendCounterCell,
    /// Time spent in the driver's calls, per entry point.
    pub(crate) clock: DriverClock,
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaBackend")
            .field("ordinal", &self.ordinal)
            .field("device_name", &self.device_name)
            .field("granularity", &self.granularity)
            .field("virtual_memory", &self.virtual_memory)
            .finish_non_exhaustive()
    }
}

/// The device handle of `ordinal`, after initializing the driver.
pub(crate) fn device_handle(ordinal: u32) -> BackendResult<sys::CUdevice> {
    driver::init()?;
    let count = crate::info::device_count()?;
    if ordinal >= count {
        return Err(BackendError::Unavailable(format!(
            "no CUDA device {ordinal}: the driver sees {count}"
        )));
    }
    let mut dev: sys::CUdevice = 0;
    // SAFETY: the driver is initialized and the ordinal is below the device count
    // (so it fits a c_int); cuDeviceGet writes one handle.
    check("cuDeviceGet", unsafe {
        sys::cuDeviceGet(&mut dev, ordinal as c_int)
    })?;
    Ok(dev)
}

/// One attribute of a device.
pub(crate) fn attribute(dev: sys::CUdevice, attr: sys::CUdevice_attribute) -> BackendResult<i32> {
    let mut v: c_int = 0;
    // SAFETY: `dev` came from cuDeviceGet; cuDeviceGetAttribute writes one int.
    check("cuDeviceGetAttribute", unsafe {
        sys::cuDeviceGetAttribute(&mut v, attr, dev)
    })?;
    Ok(v)
}

/// The device's name.
pub(crate) fn name_of(dev: sys::CUdevice) -> BackendResult<String> {
    let mut buf = [0 as std::ffi::c_char; 256];
    // SAFETY: the buffer holds `len` bytes; the driver writes a NUL-terminated name.
    check("cuDeviceGetName", unsafe {
        sys::cuDeviceGetName(buf.as_mut_ptr(), buf.len() as c_int, dev)
    })?;
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Properties of one pinned page of device memory on `dev`.
pub(crate) fn page_prop(dev: sys::CUdevice) -> sys::CUmemAllocationProp {
    sys::CUmemAllocationProp {
        type_: sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED,
        requestedHandleTypes: sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_NONE,
        location: sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: dev,
        },
        win32HandleMetaData: std::ptr::null_mut(),
        allocFlags: sys::CUmemAllocationProp_st__bindgen_ty_1 {
            compressionType: 0,
            gpuDirectRDMACapable: 0,
            usage: 0,
            reserved: [0; 4],
        },
    }
}

/// The minimum page size of virtual mappings on `dev`.
pub(crate) fn granularity_of(dev: sys::CUdevice) -> BackendResult<usize> {
    let prop = page_prop(dev);
    let mut g: usize = 0;
    // SAFETY: `prop` describes pinned memory on a valid device; the driver writes one
    // size.
    check("cuMemGetAllocationGranularity", unsafe {
        sys::cuMemGetAllocationGranularity(
            &mut g,
            &prop,
            sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
        )
    })?;
    if g == 0 || !g.is_power_of_two() {
        return Err(BackendError::Driver {
            call: "cuMemGetAllocationGranularity",
            detail: format!("granularity {g} is not a power of two"),
        });
    }
    Ok(g)
}

impl CudaBackend {
    /// A backend for device `ordinal`, with its own counters, sharing the device's
    /// primary context with every other user of the device in the process.
    ///
    /// Errors: [`BackendError::Unavailable`] when there is no driver, the driver is
    /// too old, or there is no such device; [`BackendError::Driver`] when a driver
    /// call fails. Never panics.
    pub fn new(ordinal: u32) -> Result<Arc<CudaBackend>, BackendError> {
        let device = device_handle(ordinal)?;
        let mut ctx: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: `device` came from cuDeviceGet; the driver writes one context handle
        // and counts one more reference to the primary context.
        check("cuDevicePrimaryCtxRetain", unsafe {
            sys::cuDevicePrimaryCtxRetain(&mut ctx, device)
        })?;
        let release = |e: BackendError| {
            // SAFETY: balances the retain above; nothing else uses the context yet.
            let _ = unsafe { sys::cuDevicePrimaryCtxRelease_v2(device) };
            e
        };
        // Some queries below want a current context.
        let _cx = Context(ctx).enter().map_err(release)?;
        let device_name = name_of(device).map_err(release)?;
        let virtual_memory = attribute(
            device,
            sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_VIRTUAL_ADDRESS_MANAGEMENT_SUPPORTED,
        )
        .map_err(release)?
            != 0;
        let granularity = if virtual_memory {
            granularity_of(device).map_err(release)?
        } else {
            FALLBACK_GRANULARITY
        };
        drop(_cx);
        Ok(Arc::new(CudaBackend {
            ordinal,
            device,
            ctx: Context(ctx),
            device_name,
            granularity,
            virtual_memory,
            regions: Mutex::new(HashMap::new()),
            vm: Mutex::new(VmTable::default()),
            events: RwLock::new(HashSet::new()),
            streams: Mutex::new(HashSet::new()),
            peers: RwLock::new(Vec::new()),
            counters: BackendCounterCell::default(),
            clock: DriverClock::default(),
        }))
    }

    /// The process-wide backend of device `ordinal`, made on first use and shared
    /// from then on (its counters count every user of it).
    ///
    /// ```
    /// if let Ok(a) = devpool_cuda::CudaBackend::get(0) {
    ///     let b = devpool_cuda::CudaBackend::get(0).unwrap();
    ///     assert!(std::sync::Arc::ptr_eq(&a, &b));
    /// }
    /// ```
    pub fn get(ordinal: u32) -> Result<Arc<CudaBackend>, BackendError> {
        static REGISTRY: OnceLock<Mutex<HashMap<u32, Arc<CudaBackend>>>> = OnceLock::new();
        let mut reg = REGISTRY.get_or_init(Default::default).lock();
        if let Some(b) = reg.get(&ordinal) {
            return Ok(b.clone());
        }
        let b = CudaBackend::new(ordinal)?;
        reg.insert(ordinal, b.clone());
        Ok(b)
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> u32 {
        self.ordinal
    }

    /// The device's name, as the driver gives it ("NVIDIA H200").
    pub fn device_name(&self) -> &str {
        &self.device_name
    }

    /// Time spent inside the driver's memory, event and stream-wait calls of this
    /// backend since it was made (or since [`reset_driver_times`](Self::reset_driver_times)),
    /// per entry point, most time first; entry points never called are left out.
    ///
    /// ```
    /// if let Ok(gpu) = devpool_cuda::CudaBackend::new(0) {
    ///     use devpool_core::Backend;
    ///     let p = gpu.alloc_region(1 << 20).unwrap();
    ///     gpu.free_region(p, 1 << 20).unwrap();
    ///     let t = gpu.driver_times();
    ///     assert!(t.iter().any(|c| c.call == "cuMemAlloc" && c.calls == 1));
    /// }
    /// ```
    pub fn driver_times(&self) -> Vec<DriverCallTime> {
        self.clock.snapshot()
    }

    /// Start the times of [`driver_times`](Self::driver_times) again from zero.
    pub fn reset_driver_times(&self) {
        self.clock.reset()
    }

    /// The driver's device handle.
    pub(crate) fn raw_device(&self) -> sys::CUdevice {
        self.device
    }

    /// The device's primary context.
    pub(crate) fn context(&self) -> Context {
        self.ctx
    }

    /// Make the primary context current on this thread for the guard's life.
    #[inline]
    pub(crate) fn enter(&self) -> BackendResult<driver::Entered> {
        self.ctx.enter().map_err(|e| self.fail(e))
    }

    /// Count a failed call and pass its error on.
    #[inline]
    pub(crate) fn fail(&self, e: BackendError) -> BackendError {
        BackendCounterCell::bump(&self.counters.failures);
        e
    }

    /// A failed call: out of memory (with the device's free and total bytes) when the
    /// driver says so, else the driver's error.
    pub(crate) fn driver_fail(
        &self,
        call: &'static str,
        r: CUresult,
        requested: usize,
    ) -> BackendError {
        if r == CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            let (free, total) = self.mem_info().unwrap_or((0, 0));
            return self.fail(BackendError::OutOfMemory {
                requested,
                free,
                total,
            });
        }
        self.fail(driver::error(call, r))
    }

    pub(crate) fn invalid(&self, call: &'static str, detail: String) -> BackendError {
        self.fail(BackendError::InvalidArgument { call, detail })
    }

    /// Make work queued later on `stream` wait for the work before `event`'s last
    /// record (`cuStreamWaitEvent`).
    pub(crate) fn stream_wait_event(&self, stream: StreamId, event: EventId) -> BackendResult<()> {
        let events = self.events.read();
        if !events.contains(&event.0) {
            return Err(self.invalid("stream_wait_event", format!("unknown event {:#x}", event.0)));
        }
        let _cx = self.enter()?;
        // SAFETY: the event is live (checked under the lock, held for the call); the
        // stream is a handle of this context supplied by the caller.
        let r = self.clock.time(Call::StreamWaitEvent, || unsafe {
            sys::cuStreamWaitEvent(raw_stream(stream), raw_event(event), 0)
        });
        check("cuStreamWaitEvent", r).map_err(|e| self.fail(e))
    }

    fn raw_alloc(&self, bytes: usize) -> BackendResult<u64> {
        let mut p: sys::CUdeviceptr = 0;
        // SAFETY: the context is current (caller holds the guard); cuMemAlloc writes
        // one device pointer.
        let r = self.clock.time(Call::MemAlloc, || unsafe {
            sys::cuMemAlloc_v2(&mut p, bytes)
        });
        if r != CUresult::CUDA_SUCCESS {
            return Err(self.driver_fail("cuMemAlloc", r, bytes));
        }
        Ok(p)
    }

    fn raw_free(&self, base: u64) -> BackendResult<()> {
        // SAFETY: `base` came from cuMemAlloc and is freed once (the callers take it
        // out of the region table first, or never put it in); the context is current.
        let r = self
            .clock
            .time(Call::MemFree, || unsafe { sys::cuMemFree_v2(base) });
        check("cuMemFree", r).map_err(|e| self.fail(e))
    }
}

impl Backend for CudaBackend {
    fn name(&self) -> &str {
        "cuda"
    }

    fn device(&self) -> DeviceId {
        DeviceId(self.ordinal)
    }

    fn granularity(&self) -> usize {
        self.granularity
    }

    fn mem_info(&self) -> BackendResult<(u64, u64)> {
        let _cx = self.enter()?;
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: the context is current; the driver writes two sizes.
        check("cuMemGetInfo", unsafe {
            sys::cuMemGetInfo_v2(&mut free, &mut total)
        })
        .map_err(|e| self.fail(e))?;
        Ok((free as u64, total as u64))
    }

    fn alloc_region(&self, size: usize) -> BackendResult<DevicePtr> {
        BackendCounterCell::bump(&self.counters.region_allocs);
        if size == 0 {
            return Err(self.invalid("alloc_region", "size 0".into()));
        }
        let g = self.granularity;
        let _cx = self.enter()?;
        let mut base = self.raw_alloc(size)?;
        let mut bytes = size;
        let mut ptr = base;
        if size >= g && !base.is_multiple_of(g as u64) {
            // Rare: a large region that is not page aligned. Take one page more and
            // hand out the aligned address inside it.
            self.raw_free(base)?;
            bytes = size
                .checked_add(g)
                .ok_or_else(|| self.invalid("alloc_region", format!("size {size} overflows")))?;
            base = self.raw_alloc(bytes)?;
            ptr = base.next_multiple_of(g as u64);
        }
        // Counted as the driver takes it (whole pages for a large region), which is
        // what cuMemGetInfo shows; `bytes` is what was asked of cuMemAlloc.
        let held = self.region_bytes(bytes).unwrap_or(bytes);
        self.regions.lock().insert(
            ptr,
            Region {
                base,
                bytes: held,
                size,
            },
        );
        self.counters.bytes_in_use.add(held as u64);
        Ok(DevicePtr(ptr))
    }

    fn free_region(&self, ptr: DevicePtr, size: usize) -> BackendResult<()> {
        BackendCounterCell::bump(&self.counters.region_frees);
        let region = {
            let mut t = self.regions.lock();
            match t.remove(&ptr.0) {
                Some(r) if r.size == size => r,
                Some(r) => {
                    let have = r.size;
                    t.insert(ptr.0, r);
                    return Err(
                        self.invalid("free_region", format!("{ptr} has size {have}, not {size}"))
                    );
                }
                None => return Err(self.invalid("free_region", format!("{ptr} is not a region"))),
            }
        };
        let undo = |e: BackendError| {
            self.regions.lock().insert(ptr.0, region);
            e
        };
        let _cx = self.enter().map_err(undo)?;
        self.raw_free(region.base).map_err(undo)?;
        self.counters.bytes_in_use.sub(region.bytes as u64);
        Ok(())
    }

    fn supports_virtual(&self) -> bool {
        self.virtual_memory
    }

    fn reserve(&self, size: usize, align: usize) -> BackendResult<DevicePtr> {
        self.vm_reserve(size, align)
    }

    fn unreserve(&self, ptr: DevicePtr, size: usize) -> BackendResult<()> {
        self.vm_unreserve(ptr, size)
    }

    fn map(&self, ptr: DevicePtr, size: usize) -> BackendResult<()> {
        self.vm_map(ptr, size)
    }

    fn map_chunks(&self, ptr: DevicePtr, chunks: &[usize]) -> BackendResult<()> {
        self.vm_map_chunks("map_chunks", ptr, chunks)
    }

    fn alias(&self, to: DevicePtr, from: &[(DevicePtr, usize)]) -> BackendResult<()> {
        self.vm_alias(to, from)
    }

    fn unmap(&self, ptr: DevicePtr, size: usize) -> BackendResult<()> {
        self.vm_unmap(ptr, size)
    }

    fn create_stream(&self) -> BackendResult<StreamId> {
        let _cx = self.enter()?;
        let mut s: sys::CUstream = std::ptr::null_mut();
        let flags = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as c_uint;
        // SAFETY: the context is current; the driver writes one stream handle.
        check("cuStreamCreate", unsafe {
            sys::cuStreamCreate(&mut s, flags)
        })
        .map_err(|e| self.fail(e))?;
        let id = s as usize as u64;
        self.streams.lock().insert(id);
        // SAFETY: a stream of this device's primary context, just made, alive until
        // destroy_stream.
        Ok(unsafe { StreamId::from_raw(id) })
    }

    fn destroy_stream(&self, stream: StreamId) -> BackendResult<()> {
        if !self.streams.lock().remove(&stream.raw()) {
            return Err(self.invalid(
                "destroy_stream",
                format!("{stream:?} was not made by this backend"),
            ));
        }
        let _cx = self.enter()?;
        // SAFETY: the stream was made by create_stream and is destroyed once (taken
        // out of the table above).
        check("cuStreamDestroy", unsafe {
            sys::cuStreamDestroy_v2(raw_stream(stream))
        })
        .map_err(|e| self.fail(e))
    }

    fn synchronize(&self, stream: StreamId) -> BackendResult<()> {
        let _cx = self.enter()?;
        // SAFETY: the context is current; the stream is one of its handles (or 0, the
        // legacy default stream).
        let r = self.clock.time(Call::StreamSynchronize, || unsafe {
            sys::cuStreamSynchronize(raw_stream(stream))
        });
        check("cuStreamSynchronize", r).map_err(|e| self.fail(e))
    }

    fn synchronize_device(&self) -> BackendResult<()> {
        self.device_synchronize()
    }

    fn create_event(&self) -> BackendResult<EventId> {
        BackendCounterCell::bump(&self.counters.events_created);
        let _cx = self.enter()?;
        let mut e: sys::CUevent = std::ptr::null_mut();
        let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as c_uint;
        // SAFETY: the context is current; the driver writes one event handle.
        let r = self.clock.time(Call::EventCreate, || unsafe {
            sys::cuEventCreate(&mut e, flags)
        });
        check("cuEventCreate", r).map_err(|e| self.fail(e))?;
        let id = e as usize as u64;
        self.events.write().insert(id);
        Ok(EventId(id))
    }

    fn destroy_event(&self, event: EventId) -> BackendResult<()> {
        if !self.events.write().remove(&event.0) {
            return Err(self.invalid("destroy_event", format!("unknown event {:#x}", event.0)));
        }
        let _cx = self.enter()?;
        // SAFETY: the event was made by create_event and is destroyed once (taken out
        // of the table above).
        let r = self.clock.time(Call::EventDestroy, || unsafe {
            sys::cuEventDestroy_v2(raw_event(event))
        });
        check("cuEventDestroy", r).map_err(|e| self.fail(e))
    }

    fn record_event(&self, event: EventId, stream: StreamId) -> BackendResult<()> {
        BackendCounterCell::bump(&self.counters.event_records);
        let events = self.events.read();
        if !events.contains(&event.0) {
            return Err(self.invalid("record_event", format!("unknown event {:#x}", event.0)));
        }
        let _cx = self.enter()?;
        // SAFETY: the event is live (the read lock keeps it from being destroyed
        // during the call); the stream is a handle of this context.
        let r = self.clock.time(Call::EventRecord, || unsafe {
            sys::cuEventRecord(raw_event(event), raw_stream(stream))
        });
        check("cuEventRecord", r).map_err(|e| self.fail(e))
    }

    fn event_done(&self, event: EventId) -> BackendResult<bool> {
        let events = self.events.read();
        if !events.contains(&event.0) {
            return Err(self.invalid("event_done", format!("unknown event {:#x}", event.0)));
        }
        let _cx = self.enter()?;
        // SAFETY: the event is live while the read lock is held.
        match self.clock.time(Call::EventQuery, || unsafe {
            sys::cuEventQuery(raw_event(event))
        }) {
            CUresult::CUDA_SUCCESS => Ok(true),
            CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            r => Err(self.fail(driver::error("cuEventQuery", r))),
        }
    }

    fn wait_event(&self, event: EventId) -> BackendResult<()> {
        let events = self.events.read();
        if !events.contains(&event.0) {
            return Err(self.invalid("wait_event", format!("unknown event {:#x}", event.0)));
        }
        let _cx = self.enter()?;
        // SAFETY: the event is live while the read lock is held.
        let r = self.clock.time(Call::EventSynchronize, || unsafe {
            sys::cuEventSynchronize(raw_event(event))
        });
        check("cuEventSynchronize", r).map_err(|e| self.fail(e))
    }

    fn memset(&self, ptr: DevicePtr, value: u8, len: usize, stream: StreamId) -> BackendResult<()> {
        if len == 0 {
            return Ok(());
        }
        let _cx = self.enter()?;
        // SAFETY: the context is current; the driver checks that the range is device
        // memory it knows (a bad range fails on the device, never on the host).
        check("cuMemsetD8Async", unsafe {
            sys::cuMemsetD8Async(ptr.0, value, len, raw_stream(stream))
        })
        .map_err(|e| self.fail(e))
    }

    fn copy_to_device(&self, dst: DevicePtr, src: &[u8], stream: StreamId) -> BackendResult<()> {
        if src.is_empty() {
            return Ok(());
        }
        let _cx = self.enter()?;
        // SAFETY: `src` is a live host slice of `src.len()` bytes, borrowed until the
        // stream synchronization below returns, after which the copy is complete.
        let r = unsafe {
            sys::cuMemcpyHtoDAsync_v2(dst.0, src.as_ptr().cast(), src.len(), raw_stream(stream))
        };
        check("cuMemcpyHtoDAsync", r).map_err(|e| self.fail(e))?;
        // SAFETY: as in `synchronize`.
        check("cuStreamSynchronize", unsafe {
            sys::cuStreamSynchronize(raw_stream(stream))
        })
        .map_err(|e| self.fail(e))
    }

    fn copy_to_host(&self, dst: &mut [u8], src: DevicePtr, stream: StreamId) -> BackendResult<()> {
        if dst.is_empty() {
            return Ok(());
        }
        let _cx = self.enter()?;
        // SAFETY: `dst` is a live, exclusively borrowed host slice of `dst.len()`
        // bytes, borrowed until the stream synchronization below returns.
        let r = unsafe {
            sys::cuMemcpyDtoHAsync_v2(
                dst.as_mut_ptr().cast(),
                src.0,
                dst.len(),
                raw_stream(stream),
            )
        };
        check("cuMemcpyDtoHAsync", r).map_err(|e| self.fail(e))?;
        // SAFETY: as in `synchronize`.
        check("cuStreamSynchronize", unsafe {
            sys::cuStreamSynchronize(raw_stream(stream))
        })
        .map_err(|e| self.fail(e))
    }

    fn enable_peer_access(&self, peer: DeviceId) -> BackendResult<()> {
        self.peer_enable(peer)
    }

    fn peer_access_enabled(&self, peer: DeviceId) -> bool {
        self.peer_enabled(peer)
    }

    fn copy_from_peer(
        &self,
        dst: DevicePtr,
        src_backend: &dyn Backend,
        src: DevicePtr,
        len: usize,
        stream: StreamId,
    ) -> BackendResult<()> {
        self.peer_copy(dst, src_backend, src, len, stream)
    }

    fn counters(&self) -> BackendCounters {
        self.counters.snapshot()
    }

    fn reset_peak_bytes(&self) {
        self.counters.bytes_in_use.reset_peak();
    }
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        // Give back whatever is still held; errors have nobody to go to.
        let mut prev: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: the driver is initialized; cuCtxGetCurrent writes one handle.
        if unsafe { sys::cuCtxGetCurrent(&mut prev) } != CUresult::CUDA_SUCCESS {
            return;
        }
        // SAFETY: the primary context is still retained by this backend.
        if unsafe { sys::cuCtxSetCurrent(self.ctx.0) } != CUresult::CUDA_SUCCESS {
            return;
        }
        for (start, (len, _)) in std::mem::take(&mut self.vm.get_mut().maps) {
            // SAFETY: each tracked mapping is live and unmapped once.
            let _ = unsafe { sys::cuMemUnmap(start, len) };
        }
        for (start, size) in std::mem::take(&mut self.vm.get_mut().ranges) {
            // SAFETY: a reserved range, now with no mapping left in it.
            let _ = unsafe { sys::cuMemAddressFree(start, size) };
        }
        for (_, r) in self.regions.get_mut().drain() {
            // SAFETY: a live cuMemAlloc allocation, freed once.
            let _ = unsafe { sys::cuMemFree_v2(r.base) };
        }
        for e in self.events.get_mut().drain() {
            // SAFETY: a live event made by this backend, destroyed once.
            let _ = unsafe { sys::cuEventDestroy_v2(e as usize as sys::CUevent) };
        }
        for s in self.streams.get_mut().drain() {
            // SAFETY: a live stream made by this backend, destroyed once.
            let _ = unsafe { sys::cuStreamDestroy_v2(s as usize as sys::CUstream) };
        }
        // Leave the thread as it was, except that the context being released is not
        // left current (other users of the device make it current again).
        let restore = if prev == self.ctx.0 {
            std::ptr::null_mut()
        } else {
            prev
        };
        // SAFETY: `restore` is null or a context that was current a moment ago.
        let _ = unsafe { sys::cuCtxSetCurrent(restore) };
        for p in self.peers.get_mut().drain(..) {
            // SAFETY: balances the retain of the peer's context in `enable_peer_access`.
            let _ = unsafe { sys::cuDevicePrimaryCtxRelease_v2(p.device) };
        }
        // SAFETY: balances the retain in `new`.
        let _ = unsafe { sys::cuDevicePrimaryCtxRelease_v2(self.device) };
    }
}
