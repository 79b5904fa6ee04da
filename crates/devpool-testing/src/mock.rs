//! [`MockBackend`]: a CPU stand-in for a GPU's memory, the embedded default.
//!
//! It hands out fake but realistic device addresses from a simulated address space,
//! enforces a capacity and the driver's granularity and alignment rules, counts
//! every call and byte, injects faults on request, and completes events when the
//! test says so. In host-backed mode every region and mapped page gets real host
//! bytes, so tests can write patterns through [`Backend::memset`] and
//! [`Backend::copy_to_device`] and read them back: two blocks that overlap, or a
//! block that runs past its memory, show up as wrong data or an error.

use devpool_core::{
    Backend, BackendCounterCell, BackendCounters, BackendError, BackendResult, DeviceId, DevicePtr,
    EventId, StreamId, GIB,
};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// Address space of each mock device (1 PiB): room for hundreds of per-stream pools
/// that each reserve a range as large as the device.
const VA_WINDOW: u64 = 1 << 50;

/// When recorded events complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventPolicy {
    /// At once: the simulated device is infinitely fast.
    Immediate,
    /// Only when the test calls [`MockBackend::complete_stream`] or
    /// [`MockBackend::complete_all`]: work queued on a stream stays "running".
    Manual,
}

/// Which calls an injected fault hits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultOn {
    /// Any call that takes memory: `alloc_region`, `reserve` and `map`.
    AnyAcquire,
    /// `alloc_region` only.
    Region,
    /// `map` only.
    Map,
    /// `reserve` only.
    Reserve,
    /// `unmap` only: a call that gives memory back, never hit by
    /// [`AnyAcquire`](Self::AnyAcquire) or [`fail_all`](MockBackend::fail_all). The
    /// call is refused after its checks pass, and changes nothing.
    Unmap,
}

/// Settings of a [`MockBackend`].
#[derive(Clone, Debug)]
pub struct MockConfig {
    /// Device ordinal.
    pub device: DeviceId,
    /// Device memory in bytes (default 141 GiB, like an H200).
    pub capacity: u64,
    /// Page size of virtual mappings and alignment of regions (default 2 MiB).
    pub granularity: usize,
    /// Whether virtual ranges and mapping are offered (default true).
    pub virtual_memory: bool,
    /// When events complete.
    pub events: EventPolicy,
    /// Whether memory has real host bytes behind it (default false).
    pub host_backed: bool,
}

impl Default for MockConfig {
    fn default() -> Self {
        MockConfig {
            device: DeviceId(0),
            capacity: 141 * GIB,
            granularity: 2 << 20,
            virtual_memory: true,
            events: EventPolicy::Immediate,
            host_backed: false,
        }
    }
}

impl MockConfig {
    devpool_core::setters! {
        /// Another capacity.
        capacity: u64,
    }
    /// Another device ordinal.
    pub fn device(mut self, ordinal: u32) -> Self {
        self.device = DeviceId(ordinal);
        self
    }
    /// Real host bytes behind every region and page.
    pub fn host_backed(mut self) -> Self {
        self.host_backed = true;
        self
    }
    /// Events complete only when the test says so.
    pub fn manual_events(mut self) -> Self {
        self.events = EventPolicy::Manual;
        self
    }
    /// No virtual memory: only regions.
    pub fn without_virtual(mut self) -> Self {
        self.virtual_memory = false;
        self
    }
}

#[derive(Debug)]
struct Region {
    size: usize,
    counted: u64,
    data: Option<Vec<u8>>,
}

/// A mapped page: the chunk behind it and the page's offset in the chunk.
#[derive(Debug, Clone, Copy)]
struct Page {
    chunk: u64,
    offset: usize,
}

/// One physical allocation (a page for `map`, a chunk for `map_chunks`), mapped at
/// one address or more (see `alias`).
#[derive(Debug)]
struct Chunk {
    bytes: usize,
    /// Mappings of it.
    maps: u32,
    /// Host bytes (host-backed mocks only).
    data: Vec<u8>,
}

#[derive(Debug, Default)]
struct EventState {
    /// (stream, sequence number of the record) of the last record.
    target: Option<(u64, u64)>,
}

#[derive(Debug, Default)]
struct StreamState {
    submitted: u64,
    completed: u64,
}

#[derive(Debug)]
struct Fault {
    on: FaultOn,
    remaining: u64,
}

#[derive(Debug)]
struct State {
    capacity: u64,
    used: u64,
    next_va: u64,
    limit_va: u64,
    /// Address ranges given back and free for reuse: start -> end.
    holes: BTreeMap<u64, u64>,
    regions: BTreeMap<u64, Region>,
    /// Reserved ranges: start -> size.
    ranges: devpool_core::ReservedRanges,
    /// Mapped pages: page address -> its chunk.
    pages: HashMap<u64, Page>,
    /// Physical allocations of the mapped pages.
    chunks: HashMap<u64, Chunk>,
    next_chunk: u64,
    streams: HashMap<u64, StreamState>,
    next_stream: u64,
    /// Streams made by `create_stream` and destroyed since: recording on one fails,
    /// as the driver refuses a destroyed stream.
    destroyed: std::collections::HashSet<u64>,
    /// Mapped pages that work queued on a stream writes: page -> (stream, sequence
    /// number of that work). The work may still touch the page until the stream's
    /// completed count reaches the number.
    busy: HashMap<u64, (u64, u64)>,
    /// Unmaps refused because queued work could still touch a page.
    busy_unmaps: u64,
    events: HashMap<u64, EventState>,
    next_event: u64,
    fault: Option<Fault>,
    fail_all: bool,
    /// Faults injected so far (calls failed by `fail_nth` or `fail_all`).
    injected: u64,
    peers: Vec<DeviceId>,
}

/// The CPU mock of a GPU's memory. Cheap to share: wrap it in an [`Arc`].
///
/// ```
/// use devpool_core::Backend;
/// use devpool_testing::{MockBackend, MockConfig};
/// let mock = MockBackend::new(MockConfig::default().capacity(1 << 30));
/// let p = mock.alloc_region(4096).unwrap();
/// assert!(p.is_aligned(256));
/// assert_eq!(mock.counters().bytes_in_use.current, 4096);
/// let q = mock.alloc_region(3 << 20).unwrap(); // as the driver does: whole 2 MiB pages
/// assert_eq!(mock.counters().bytes_in_use.current, 4096 + (4 << 20));
/// mock.free_region(q, 3 << 20).unwrap();
/// mock.free_region(p, 4096).unwrap();
/// assert!(mock.alloc_region(2 << 30).is_err()); // larger than the capacity
/// ```
#[derive(Debug)]
pub struct MockBackend {
    cfg: MockConfig,
    state: Mutex<State>,
    counters: BackendCounterCell,
}

impl Default for MockBackend {
    fn default() -> Self {
        MockBackend::new(MockConfig::default())
    }
}

impl MockBackend {
    /// The mock's stream numbered `n` (0: the default stream). The mock keeps any
    /// number as a stream, made on first use, so tests name streams by number; a
    /// stream for another backend comes from its `create_stream`.
    pub fn stream(n: u64) -> StreamId {
        // SAFETY: a stream of the mock, which takes any number as a stream of its own
        // and never hands one to a driver.
        unsafe { StreamId::from_raw(n) }
    }

    /// A mock with these settings.
    pub fn new(cfg: MockConfig) -> Self {
        assert!(cfg.granularity.is_power_of_two() && cfg.granularity >= 4096);
        // Each device gets its own window of addresses.
        let base = 0x7f00_0000_0000u64 + (cfg.device.0 as u64) * VA_WINDOW;
        let state = State {
            capacity: cfg.capacity,
            used: 0,
            next_va: base,
            limit_va: base + VA_WINDOW,
            holes: BTreeMap::new(),
            regions: BTreeMap::new(),
            ranges: Default::default(),
            pages: HashMap::new(),
            chunks: HashMap::new(),
            next_chunk: 1,
            streams: HashMap::new(),
            next_stream: 1,
            destroyed: Default::default(),
            busy: HashMap::new(),
            busy_unmaps: 0,
            events: HashMap::new(),
            next_event: 1,
            fault: None,
            fail_all: false,
            injected: 0,
            peers: Vec::new(),
        };
        MockBackend {
            cfg,
            state: Mutex::new(state),
            counters: BackendCounterCell::default(),
        }
    }

    /// A shared mock with default settings (141 GiB, 2 MiB pages, events at once).
    pub fn shared() -> Arc<MockBackend> {
        Arc::new(MockBackend::default())
    }

    /// A shared mock with these settings.
    pub fn shared_with(cfg: MockConfig) -> Arc<MockBackend> {
        Arc::new(MockBackend::new(cfg))
    }

    /// `n` mocks with these settings, one per device ordinal `0..n`, each in its own
    /// window of addresses: a machine with several GPUs.
    pub fn devices(n: u32, cfg: MockConfig) -> Vec<Arc<MockBackend>> {
        (0..n)
            .map(|d| MockBackend::shared_with(cfg.clone().device(d)))
            .collect()
    }

    /// The settings.
    pub fn config(&self) -> &MockConfig {
        &self.cfg
    }

    /// Change the capacity (shrink it to simulate other users of the device). Memory
    /// already held stays held.
    pub fn set_capacity(&self, bytes: u64) {
        self.state.lock().capacity = bytes;
    }

    /// Make the `n`th next call of kind `on` fail (`n = 1`: the very next one). The
    /// fault fires once.
    pub fn fail_nth(&self, on: FaultOn, n: u64) {
        assert!(n >= 1);
        self.state.lock().fault = Some(Fault { on, remaining: n });
    }

    /// Make every call that takes memory fail until turned off.
    pub fn fail_all(&self, on: bool) {
        self.state.lock().fail_all = on;
    }

    /// Clear any pending fault.
    pub fn clear_faults(&self) {
        let mut s = self.state.lock();
        s.fault = None;
        s.fail_all = false;
    }

    /// Complete all work queued so far on `stream` (events recorded on it complete).
    pub fn complete_stream(&self, stream: StreamId) {
        let mut s = self.state.lock();
        let st = s.streams.entry(stream.raw()).or_default();
        st.completed = st.submitted;
    }

    /// Complete all work queued so far on every stream.
    pub fn complete_all(&self) {
        Self::complete_all_locked(&mut self.state.lock());
    }

    fn complete_all_locked(s: &mut State) {
        for st in s.streams.values_mut() {
            st.completed = st.submitted;
        }
    }

    /// Calls failed so far by an injected fault ([`fail_nth`](Self::fail_nth),
    /// [`fail_all`](Self::fail_all)): a fault-injection test asserts that its faults
    /// fired.
    pub fn injected_faults(&self) -> u64 {
        self.state.lock().injected
    }

    /// Events that exist now (created and not destroyed).
    pub fn live_events(&self) -> usize {
        self.state.lock().events.len()
    }

    /// Pages mapped now.
    pub fn mapped_pages(&self) -> usize {
        self.state.lock().pages.len()
    }

    /// Unmaps refused so far because work queued on a stream (a memset not yet
    /// completed, with manual events) could still touch one of the pages: a pool
    /// that gives pages back before the streams that used them have passed shows
    /// up here, and its unmap fails.
    pub fn unmaps_while_busy(&self) -> u64 {
        self.state.lock().busy_unmaps
    }

    /// Physical chunks mapped now (a page mapped by `map` is a chunk of its own).
    pub fn mapped_chunks(&self) -> usize {
        self.state.lock().chunks.len()
    }

    /// The mappings that tile `[ptr, ptr + size)`, in address order, as (bytes of the
    /// chunk, mappings of it now): what an unmap or alias of that range would touch.
    /// A range that is not page aligned, has unmapped pages or cuts a mapping is an
    /// error, as for `unmap`.
    pub fn mappings_in(&self, ptr: DevicePtr, size: usize) -> BackendResult<Vec<(usize, u32)>> {
        let s = self.state.lock();
        let ids = self.whole_chunks(&s, "mappings_in", ptr, size)?;
        Ok(ids
            .iter()
            .map(|id| {
                let c = &s.chunks[id];
                (c.bytes, c.maps)
            })
            .collect())
    }

    /// Regions held now.
    pub fn live_regions(&self) -> usize {
        self.state.lock().regions.len()
    }

    fn check_fault(&self, s: &mut State, kind: FaultOn, call: &'static str) -> BackendResult<()> {
        let acquires = kind != FaultOn::Unmap;
        if s.fail_all && acquires {
            s.injected += 1;
            return Err(self.fail(BackendError::Injected { call }));
        }
        if let Some(f) = &mut s.fault {
            if f.on == kind || (f.on == FaultOn::AnyAcquire && acquires) {
                f.remaining -= 1;
                if f.remaining == 0 {
                    s.fault = None;
                    s.injected += 1;
                    return Err(self.fail(BackendError::Injected { call }));
                }
            }
        }
        Ok(())
    }

    fn fail(&self, e: BackendError) -> BackendError {
        BackendCounterCell::bump(&self.counters.failures);
        e
    }

    fn take_va(&self, s: &mut State, size: usize, align: usize) -> BackendResult<u64> {
        // A guard gap after each allocation so that neighbours never touch.
        let need = (size as u64)
            .checked_add(self.cfg.granularity as u64)
            .ok_or_else(|| self.va_exhausted(size))?;
        let align = align as u64;
        // Reuse freed addresses first (lowest that fits), as the driver does.
        let fit = s.holes.iter().find_map(|(&start, &end)| {
            let at = start.checked_add(align - 1)? & !(align - 1);
            (at.checked_add(need)? <= end).then_some((start, end, at))
        });
        if let Some((start, end, at)) = fit {
            s.holes.remove(&start);
            if at > start {
                s.holes.insert(start, at);
            }
            if at + need < end {
                s.holes.insert(at + need, end);
            }
            return Ok(at);
        }
        let start = s
            .next_va
            .checked_add(align - 1)
            .map(|v| v & !(align - 1))
            .ok_or_else(|| self.va_exhausted(size))?;
        let end = start
            .checked_add(need)
            .ok_or_else(|| self.va_exhausted(size))?;
        if end > s.limit_va {
            return Err(self.va_exhausted(size));
        }
        s.next_va = end;
        Ok(start)
    }

    fn give_va(&self, s: &mut State, start: u64, size: usize) {
        let mut start = start;
        let mut end = start + size as u64 + self.cfg.granularity as u64;
        if let Some((&ps, &pe)) = s.holes.range(..start).next_back() {
            if pe == start {
                s.holes.remove(&ps);
                start = ps;
            }
        }
        if let Some(ne) = s.holes.remove(&end) {
            end = ne;
        }
        if end == s.next_va {
            s.next_va = start;
        } else {
            s.holes.insert(start, end);
        }
    }

    fn va_exhausted(&self, size: usize) -> BackendError {
        self.fail(BackendError::OutOfMemory {
            requested: size,
            free: 0,
            total: self.cfg.capacity,
        })
    }

    fn take_bytes(&self, s: &mut State, bytes: u64, requested: usize) -> BackendResult<()> {
        if s.used.checked_add(bytes).is_none_or(|u| u > s.capacity) {
            return Err(self.fail(BackendError::OutOfMemory {
                requested,
                free: s.capacity.saturating_sub(s.used),
                total: s.capacity,
            }));
        }
        s.used += bytes;
        self.counters.bytes_in_use.add(bytes);
        Ok(())
    }

    fn give_bytes(&self, s: &mut State, bytes: u64) {
        s.used -= bytes;
        self.counters.bytes_in_use.sub(bytes);
    }

    fn invalid(&self, call: &'static str, detail: String) -> BackendError {
        self.fail(BackendError::InvalidArgument { call, detail })
    }

    /// Apply `f` to each host-byte span of `[ptr, ptr+len)`, which must lie in one
    /// region or in mapped pages.
    fn with_bytes(
        &self,
        call: &'static str,
        ptr: DevicePtr,
        len: usize,
        mut f: impl FnMut(&mut [u8], usize),
    ) -> BackendResult<()> {
        if !self.cfg.host_backed {
            return Err(BackendError::Unsupported(
                "data access on a mock without host_backed",
            ));
        }
        let mut s = self.state.lock();
        let end = ptr
            .0
            .checked_add(len as u64)
            .ok_or_else(|| self.invalid(call, "range overflows".into()))?;
        if let Some((&start, r)) = s.regions.range_mut(..=ptr.0).next_back() {
            if end <= start + r.size as u64 {
                let off = (ptr.0 - start) as usize;
                let data = r.data.as_mut().expect("host-backed region has bytes");
                f(&mut data[off..off + len], 0);
                return Ok(());
            }
        }
        let g = self.cfg.granularity as u64;
        let mut at = ptr.0;
        let mut done = 0usize;
        while at < end {
            let page = at & !(g - 1);
            let Some(&Page { chunk, offset }) = s.pages.get(&page) else {
                return Err(self.invalid(
                    call,
                    format!("{ptr}+{len} touches unmapped memory at {:#x}", at),
                ));
            };
            let bytes = &mut s
                .chunks
                .get_mut(&chunk)
                .expect("a mapped page has its chunk")
                .data;
            let off = offset + (at - page) as usize;
            let n = ((page + g).min(end) - at) as usize;
            f(&mut bytes[off..off + n], done);
            done += n;
            at += n as u64;
        }
        Ok(())
    }
}

impl MockBackend {
    /// Work writing `[ptr, ptr + len)` was queued on `stream`: the mapped pages it
    /// touches are busy until the stream completes it.
    fn queue_work(&self, ptr: DevicePtr, len: usize, stream: StreamId) {
        let mut s = self.state.lock();
        let immediate = self.cfg.events == EventPolicy::Immediate;
        let st = s.streams.entry(stream.raw()).or_default();
        st.submitted += 1;
        let seq = st.submitted;
        if immediate {
            st.completed = seq;
            return;
        }
        let g = self.cfg.granularity as u64;
        let end = ptr.0.saturating_add(len.max(1) as u64);
        let mut p = ptr.0 & !(g - 1);
        while p < end {
            if s.pages.contains_key(&p) {
                s.busy.insert(p, (stream.raw(), seq));
            }
            p += g;
        }
    }

    /// The chunks mapped in `[ptr, ptr + size)`, each once, if every page there is
    /// mapped and the range cuts no chunk's mapping.
    fn whole_chunks(
        &self,
        s: &State,
        call: &'static str,
        ptr: DevicePtr,
        size: usize,
    ) -> BackendResult<Vec<u64>> {
        let g = self.cfg.granularity as u64;
        if size == 0 || !(size as u64).is_multiple_of(g) || !ptr.0.is_multiple_of(g) {
            return Err(self.invalid(call, format!("{ptr}+{size} is not page aligned")));
        }
        let end = ptr
            .0
            .checked_add(size as u64)
            .ok_or_else(|| self.invalid(call, format!("{ptr}+{size} overflows")))?;
        let mut chunks = Vec::new();
        for p in (ptr.0..end).step_by(g as usize) {
            let Some(page) = s.pages.get(&p) else {
                return Err(
                    self.invalid(call, format!("{ptr}+{size} has pages that are not mapped"))
                );
            };
            let c = &s.chunks[&page.chunk];
            let start = p - page.offset as u64;
            if start < ptr.0 || start + c.bytes as u64 > end {
                return Err(self.invalid(
                    call,
                    format!(
                        "{ptr}+{size} cuts the chunk mapped at {start:#x} ({} bytes): chunks go whole",
                        c.bytes
                    ),
                ));
            }
            if page.offset == 0 {
                chunks.push(page.chunk);
            }
        }
        Ok(chunks)
    }

    /// Map `chunks` (sizes in bytes) one after the other from `ptr`: one physical
    /// allocation each, one call.
    fn map_impl(&self, call: &'static str, ptr: DevicePtr, chunks: &[usize]) -> BackendResult<()> {
        if !self.cfg.virtual_memory {
            return Err(BackendError::Unsupported("page mapping"));
        }
        BackendCounterCell::bump(&self.counters.map_calls);
        let mut s = self.state.lock();
        self.check_fault(&mut s, FaultOn::Map, call)?;
        let g = self.cfg.granularity;
        let size = chunks
            .iter()
            .try_fold(0usize, |a, &c| a.checked_add(c))
            .ok_or_else(|| self.invalid(call, "sizes overflow".into()))?;
        if size == 0
            || !ptr.0.is_multiple_of(g as u64)
            || chunks.iter().any(|&c| c == 0 || !c.is_multiple_of(g))
        {
            return Err(self.invalid(call, format!("{ptr}+{size} is not page aligned")));
        }
        let end = ptr
            .0
            .checked_add(size as u64)
            .ok_or_else(|| self.invalid(call, format!("{ptr}+{size} overflows")))?;
        if !s.ranges.covers(ptr.0, end) {
            return Err(self.invalid(call, format!("{ptr}+{size} is not inside a reserved range")));
        }
        if (ptr.0..end).step_by(g).any(|p| s.pages.contains_key(&p)) {
            return Err(self.invalid(call, format!("{ptr}+{size} overlaps mapped pages")));
        }
        self.take_bytes(&mut s, size as u64, size)?;
        let mut at = ptr.0;
        for &bytes in chunks {
            let id = s.next_chunk;
            s.next_chunk += 1;
            let data = if self.cfg.host_backed {
                vec![0u8; bytes]
            } else {
                Vec::new()
            };
            s.chunks.insert(
                id,
                Chunk {
                    bytes,
                    maps: 1,
                    data,
                },
            );
            for offset in (0..bytes).step_by(g) {
                s.pages
                    .insert(at + offset as u64, Page { chunk: id, offset });
            }
            at += bytes as u64;
        }
        self.counters
            .on_mapped((size / g) as u64, chunks.len() as u64);
        Ok(())
    }
}

impl Backend for MockBackend {
    fn name(&self) -> &str {
        "mock"
    }

    fn device(&self) -> DeviceId {
        self.cfg.device
    }

    fn granularity(&self) -> usize {
        self.cfg.granularity
    }

    fn mem_info(&self) -> BackendResult<(u64, u64)> {
        let s = self.state.lock();
        Ok((s.capacity.saturating_sub(s.used), s.capacity))
    }

    fn alloc_region(&self, size: usize) -> BackendResult<DevicePtr> {
        BackendCounterCell::bump(&self.counters.region_allocs);
        let mut s = self.state.lock();
        self.check_fault(&mut s, FaultOn::Region, "alloc_region")?;
        if size == 0 {
            return Err(self.invalid("alloc_region", "size 0".into()));
        }
        // Counted as the driver takes it: whole pages for a large region.
        let counted = self
            .region_bytes(size)
            .ok_or_else(|| self.va_exhausted(size))? as u64;
        self.take_bytes(&mut s, counted, size)?;
        let va = match self.take_va(&mut s, size, self.cfg.granularity) {
            Ok(va) => va,
            Err(e) => {
                self.give_bytes(&mut s, counted);
                return Err(e);
            }
        };
        let data = self.cfg.host_backed.then(|| vec![0u8; size]);
        s.regions.insert(
            va,
            Region {
                size,
                counted,
                data,
            },
        );
        Ok(DevicePtr(va))
    }

    fn free_region(&self, ptr: DevicePtr, size: usize) -> BackendResult<()> {
        BackendCounterCell::bump(&self.counters.region_frees);
        let mut s = self.state.lock();
        // Like cuMemFree, the free waits for the device: work queued so far completes.
        Self::complete_all_locked(&mut s);
        match s.regions.get(&ptr.0) {
            Some(r) if r.size == size => {
                let counted = r.counted;
                s.regions.remove(&ptr.0);
                self.give_va(&mut s, ptr.0, size);
                self.give_bytes(&mut s, counted);
                Ok(())
            }
            Some(r) => {
                let have = r.size;
                Err(self.invalid("free_region", format!("{ptr} has size {have}, not {size}")))
            }
            None => Err(self.invalid("free_region", format!("{ptr} is not a region"))),
        }
    }

    fn supports_virtual(&self) -> bool {
        self.cfg.virtual_memory
    }

    fn reserve(&self, size: usize, align: usize) -> BackendResult<DevicePtr> {
        if !self.cfg.virtual_memory {
            return Err(BackendError::Unsupported("virtual address ranges"));
        }
        BackendCounterCell::bump(&self.counters.reserves);
        let mut s = self.state.lock();
        self.check_fault(&mut s, FaultOn::Reserve, "reserve")?;
        let g = self.cfg.granularity;
        if size == 0 || !size.is_multiple_of(g) || !align.is_power_of_two() {
            return Err(self.invalid(
                "reserve",
                format!("size {size} / align {align} not granular"),
            ));
        }
        let va = self.take_va(&mut s, size, align.max(g))?;
        s.ranges.insert(va, size);
        Ok(DevicePtr(va))
    }

    fn unreserve(&self, ptr: DevicePtr, size: usize) -> BackendResult<()> {
        BackendCounterCell::bump(&self.counters.unreserves);
        let mut s = self.state.lock();
        if !s.ranges.is_range(ptr.0, size) {
            return Err(self.invalid("unreserve", format!("{ptr}+{size} is not a reserved range")));
        }
        let g = self.cfg.granularity as u64;
        if (ptr.0..ptr.0 + size as u64)
            .step_by(g as usize)
            .any(|p| s.pages.contains_key(&p))
        {
            return Err(self.invalid("unreserve", format!("{ptr}+{size} still has mapped pages")));
        }
        s.ranges.remove(ptr.0, size);
        self.give_va(&mut s, ptr.0, size);
        Ok(())
    }

    fn map(&self, ptr: DevicePtr, size: usize) -> BackendResult<()> {
        let g = self.cfg.granularity;
        if !self.cfg.virtual_memory {
            return Err(BackendError::Unsupported("page mapping"));
        }
        if size == 0 || !size.is_multiple_of(g) {
            BackendCounterCell::bump(&self.counters.map_calls);
            return Err(self.invalid("map", format!("{ptr}+{size} is not page aligned")));
        }
        self.map_impl("map", ptr, &vec![g; size / g])
    }

    fn map_chunks(&self, ptr: DevicePtr, chunks: &[usize]) -> BackendResult<()> {
        self.map_impl("map_chunks", ptr, chunks)
    }

    fn unmap(&self, ptr: DevicePtr, size: usize) -> BackendResult<()> {
        BackendCounterCell::bump(&self.counters.unmap_calls);
        let mut s = self.state.lock();
        // Unlike a region free, an unmap waits for nothing (neither does
        // cuMemUnmap): work still queued on a page would fault. The mock refuses.
        let g = self.cfg.granularity as u64;
        if size > 0 && ptr.0.is_multiple_of(g) {
            for p in (ptr.0..ptr.0.saturating_add(size as u64)).step_by(g as usize) {
                if let Some(&(stream, seq)) = s.busy.get(&p) {
                    if s.streams.get(&stream).is_some_and(|st| st.completed < seq) {
                        s.busy_unmaps += 1;
                        return Err(self.invalid(
                            "unmap",
                            format!(
                                "page {p:#x} may still be used by work queued on stream {stream:#x}"
                            ),
                        ));
                    }
                }
            }
        }
        if size == 0 || !(size as u64).is_multiple_of(g) || !ptr.0.is_multiple_of(g) {
            return Err(self.invalid("unmap", format!("{ptr}+{size} is not page aligned")));
        }
        let end = ptr.0 + size as u64;
        let chunks = self.whole_chunks(&s, "unmap", ptr, size)?;
        self.check_fault(&mut s, FaultOn::Unmap, "unmap")?;
        for p in (ptr.0..end).step_by(g as usize) {
            s.pages.remove(&p);
            s.busy.remove(&p);
        }
        let mut freed = 0usize;
        let mut bytes = 0u64;
        for c in &chunks {
            let chunk = s.chunks.get_mut(c).expect("a mapped chunk exists");
            chunk.maps -= 1;
            if chunk.maps == 0 {
                bytes += chunk.bytes as u64;
                freed += 1;
                s.chunks.remove(c);
            }
        }
        self.give_bytes(&mut s, bytes);
        self.counters
            .pages_unmapped
            .fetch_add(size as u64 / g, Relaxed);
        self.counters
            .chunks_released
            .fetch_add(freed as u64, Relaxed);
        Ok(())
    }

    fn alias(&self, to: DevicePtr, from: &[(DevicePtr, usize)]) -> BackendResult<()> {
        if !self.cfg.virtual_memory {
            return Err(BackendError::Unsupported("aliasing mapped memory"));
        }
        BackendCounterCell::bump(&self.counters.map_calls);
        BackendCounterCell::bump(&self.counters.alias_calls);
        let mut s = self.state.lock();
        self.check_fault(&mut s, FaultOn::Map, "alias")?;
        let g = self.cfg.granularity as u64;
        let size = from
            .iter()
            .try_fold(0usize, |a, &(_, n)| a.checked_add(n))
            .ok_or_else(|| self.invalid("alias", "sizes overflow".into()))?;
        if size == 0 || !to.0.is_multiple_of(g) {
            return Err(self.invalid("alias", format!("{to}+{size} is not page aligned")));
        }
        let mut chunks = Vec::new();
        for &(src, n) in from {
            chunks.extend(self.whole_chunks(&s, "alias", src, n)?);
        }
        let end =
            to.0.checked_add(size as u64)
                .ok_or_else(|| self.invalid("alias", format!("{to}+{size} overflows")))?;
        if !s.ranges.covers(to.0, end) {
            return Err(self.invalid(
                "alias",
                format!("{to}+{size} is not inside a reserved range"),
            ));
        }
        if (to.0..end)
            .step_by(g as usize)
            .any(|p| s.pages.contains_key(&p))
        {
            return Err(self.invalid("alias", format!("{to}+{size} overlaps mapped pages")));
        }
        let mut at = to.0;
        for &(src, n) in from {
            for off in (0..n as u64).step_by(g as usize) {
                let page = s.pages[&(src.0 + off)];
                s.pages.insert(at + off, page);
            }
            at += n as u64;
        }
        for c in chunks {
            s.chunks.get_mut(&c).expect("a mapped chunk exists").maps += 1;
        }
        self.counters
            .pages_mapped
            .fetch_add(size as u64 / g, Relaxed);
        Ok(())
    }

    fn create_stream(&self) -> BackendResult<StreamId> {
        let mut s = self.state.lock();
        let id = s.next_stream;
        s.next_stream += 1;
        s.streams.insert(id, StreamState::default());
        // SAFETY: a stream of this mock, just made; the mock's streams are numbers it
        // keeps in its own table and never hands to a driver.
        Ok(unsafe { StreamId::from_raw(id) })
    }

    fn destroy_stream(&self, stream: StreamId) -> BackendResult<()> {
        let mut s = self.state.lock();
        if stream == StreamId::DEFAULT || s.streams.remove(&stream.raw()).is_none() {
            return Err(self.invalid("destroy_stream", format!("{stream:?} was not created")));
        }
        s.destroyed.insert(stream.raw());
        Ok(())
    }

    fn synchronize(&self, stream: StreamId) -> BackendResult<()> {
        // The host waits until the stream's work is done: in the mock, that means the
        // work completes now.
        self.complete_stream(stream);
        Ok(())
    }

    fn synchronize_device(&self) -> BackendResult<()> {
        self.complete_all();
        Ok(())
    }

    fn create_event(&self) -> BackendResult<EventId> {
        BackendCounterCell::bump(&self.counters.events_created);
        let mut s = self.state.lock();
        let id = s.next_event;
        s.next_event += 1;
        s.events.insert(id, EventState::default());
        Ok(EventId(id))
    }

    fn destroy_event(&self, event: EventId) -> BackendResult<()> {
        let mut s = self.state.lock();
        match s.events.remove(&event.0) {
            Some(_) => Ok(()),
            None => Err(self.invalid("destroy_event", format!("unknown event {}", event.0))),
        }
    }

    fn record_event(&self, event: EventId, stream: StreamId) -> BackendResult<()> {
        BackendCounterCell::bump(&self.counters.event_records);
        let mut s = self.state.lock();
        if s.destroyed.contains(&stream.raw()) {
            return Err(self.invalid("record_event", format!("{stream:?} was destroyed")));
        }
        let st = s.streams.entry(stream.raw()).or_default();
        st.submitted += 1;
        let seq = st.submitted;
        if self.cfg.events == EventPolicy::Immediate {
            st.completed = seq;
        }
        match s.events.get_mut(&event.0) {
            Some(e) => {
                e.target = Some((stream.raw(), seq));
                Ok(())
            }
            None => Err(self.invalid("record_event", format!("unknown event {}", event.0))),
        }
    }

    fn event_done(&self, event: EventId) -> BackendResult<bool> {
        let s = self.state.lock();
        match s.events.get(&event.0) {
            Some(EventState { target: None }) => Ok(true),
            Some(EventState {
                target: Some((stream, seq)),
            }) => Ok(s.streams.get(stream).is_some_and(|st| st.completed >= *seq)),
            None => Err(self.invalid("event_done", format!("unknown event {}", event.0))),
        }
    }

    fn wait_event(&self, event: EventId) -> BackendResult<()> {
        let mut s = self.state.lock();
        let target = match s.events.get(&event.0) {
            Some(e) => e.target,
            None => return Err(self.invalid("wait_event", format!("unknown event {}", event.0))),
        };
        if let Some((stream, seq)) = target {
            let st = s.streams.entry(stream).or_default();
            st.completed = st.completed.max(seq);
        }
        Ok(())
    }

    /// The bytes are written at once; the memset is also work queued on `stream`
    /// (with manual events it stays queued until the test completes the stream),
    /// and the mapped pages it writes are busy until then: unmapping one earlier
    /// fails.
    fn memset(&self, ptr: DevicePtr, value: u8, len: usize, stream: StreamId) -> BackendResult<()> {
        self.with_bytes("memset", ptr, len, |b, _| b.fill(value))?;
        self.queue_work(ptr, len, stream);
        Ok(())
    }

    /// Returns when the copy is done: the stream's work so far completes.
    fn copy_to_device(&self, dst: DevicePtr, src: &[u8], stream: StreamId) -> BackendResult<()> {
        self.with_bytes("copy_to_device", dst, src.len(), |b, at| {
            b.copy_from_slice(&src[at..at + b.len()])
        })?;
        self.complete_stream(stream);
        Ok(())
    }

    /// Returns when the copy is done: the stream's work so far completes.
    fn copy_to_host(&self, dst: &mut [u8], src: DevicePtr, stream: StreamId) -> BackendResult<()> {
        let len = dst.len();
        self.with_bytes("copy_to_host", src, len, |b, at| {
            dst[at..at + b.len()].copy_from_slice(b)
        })?;
        self.complete_stream(stream);
        Ok(())
    }

    fn enable_peer_access(&self, peer: DeviceId) -> BackendResult<()> {
        if peer == self.cfg.device {
            return Err(self.invalid("enable_peer_access", format!("{peer} is this device")));
        }
        let mut s = self.state.lock();
        if !s.peers.contains(&peer) {
            s.peers.push(peer);
        }
        Ok(())
    }

    fn peer_access_enabled(&self, peer: DeviceId) -> bool {
        self.state.lock().peers.contains(&peer)
    }

    fn copy_from_peer(
        &self,
        dst: DevicePtr,
        src_backend: &dyn Backend,
        src: DevicePtr,
        len: usize,
        stream: StreamId,
    ) -> BackendResult<()> {
        let me = self.cfg.device;
        if src_backend.device() != me && !src_backend.peer_access_enabled(me) {
            return Err(self.invalid(
                "copy_from_peer",
                format!(
                    "{me} has no access to {}: enable peer access first",
                    src_backend.device()
                ),
            ));
        }
        let mut buf = vec![0u8; len];
        src_backend.copy_to_host(&mut buf, src, stream)?;
        self.copy_to_device(dst, &buf, stream)
    }

    fn counters(&self) -> BackendCounters {
        self.counters.snapshot()
    }

    fn reset_peak_bytes(&self) {
        self.counters.bytes_in_use.reset_peak();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virtual_pages_count_and_hold_data() {
        let m = MockBackend::new(MockConfig::default().host_backed());
        let g = m.granularity();
        let va = m.reserve(8 * g, g).unwrap();
        assert_eq!(m.counters().bytes_in_use.current, 0);
        m.map(va, 2 * g).unwrap();
        assert_eq!(m.counters().bytes_in_use.current, 2 * g as u64);
        assert!(m.map(va.offset(g), g).is_err(), "double map is rejected");
        let data: Vec<u8> = (0..g + 100).map(|i| i as u8).collect();
        m.copy_to_device(va.offset(g - 50), &data[..150], StreamId::DEFAULT)
            .unwrap();
        let mut back = vec![0u8; 150];
        m.copy_to_host(&mut back, va.offset(g - 50), StreamId::DEFAULT)
            .unwrap();
        assert_eq!(&back[..], &data[..150]);
        assert!(
            m.memset(va.offset(2 * g - 10), 1, 20, StreamId::DEFAULT)
                .is_err(),
            "unmapped page"
        );
        assert!(m.unreserve(va, 8 * g).is_err(), "still mapped");
        m.unmap(va, 2 * g).unwrap();
        m.unreserve(va, 8 * g).unwrap();
        let c = m.counters();
        assert_eq!(
            (c.pages_mapped, c.pages_unmapped, c.bytes_in_use.current),
            (2, 2, 0)
        );
    }

    #[test]
    fn chunks_are_one_allocation_each_and_unmapped_only_whole() {
        let m = MockBackend::new(MockConfig::default().host_backed());
        let g = m.granularity();
        let va = m.reserve(16 * g, g).unwrap();
        m.map_chunks(va, &[g, 4 * g, 2 * g]).unwrap();
        let c = m.counters();
        assert_eq!((c.map_calls, c.pages_mapped, c.chunks_created), (1, 7, 3));
        assert_eq!(m.mapped_chunks(), 3);
        // Data runs across chunk borders.
        let data: Vec<u8> = (0..3 * g).map(|i| (i % 251) as u8).collect();
        m.copy_to_device(va.offset(g / 2), &data, StreamId::DEFAULT)
            .unwrap();
        let mut back = vec![0u8; 3 * g];
        m.copy_to_host(&mut back, va.offset(g / 2), StreamId::DEFAULT)
            .unwrap();
        assert_eq!(back, data);
        assert!(m.unmap(va.offset(g), 2 * g).is_err(), "half a chunk");
        assert!(m.unmap(va, 2 * g).is_err(), "a chunk and a half");
        assert_eq!(
            m.counters().bytes_in_use.current,
            7 * g as u64,
            "nothing moved"
        );
        m.unmap(va.offset(g), 4 * g).unwrap();
        m.unmap(va, g).unwrap();
        m.unmap(va.offset(5 * g), 2 * g).unwrap();
        let c = m.counters();
        assert_eq!((c.chunks_released, c.bytes_in_use.current), (3, 0));
        assert!(m.map_chunks(va, &[g, 0]).is_err(), "an empty chunk");
        assert!(m.map_chunks(va, &[g + 4096]).is_err(), "not granular");
        m.unreserve(va, 16 * g).unwrap();
    }

    #[test]
    fn aliased_memory_lives_until_its_last_mapping_goes() {
        let m = MockBackend::new(MockConfig::default().host_backed());
        let g = m.granularity();
        let va = m.reserve(16 * g, g).unwrap();
        m.map_chunks(va, &[2 * g, g]).unwrap();
        m.memset(va.offset(g), 9, 2 * g, StreamId::DEFAULT).unwrap();
        assert!(
            m.alias(va.offset(8 * g), &[(va.offset(g), 2 * g)]).is_err(),
            "half a chunk"
        );
        assert!(
            m.alias(va.offset(2 * g), &[(va, 3 * g)]).is_err(),
            "onto mapped pages"
        );
        // Two pieces, laid out one after the other: the second chunk first.
        m.alias(va.offset(8 * g), &[(va.offset(2 * g), g), (va, 2 * g)])
            .unwrap();
        let c = m.counters();
        assert_eq!(
            (c.map_calls, c.alias_calls, c.chunks_created),
            (4, 3, 2),
            "failed calls count"
        );
        assert_eq!(c.bytes_in_use.current, 3 * g as u64, "no memory taken");
        // Two chunks, each mapped twice now.
        assert_eq!(
            m.mappings_in(va.offset(8 * g), 3 * g).unwrap(),
            vec![(g, 2), (2 * g, 2)]
        );
        assert!(m.mappings_in(va.offset(g), g).is_err(), "cuts a mapping");
        // Page 8 is the old page 2, pages 9 and 10 the old pages 0 and 1.
        let mut back = vec![0u8; g];
        for (page, want) in [(8, 9u8), (9, 0), (10, 9)] {
            m.copy_to_host(&mut back, va.offset(page * g), StreamId::DEFAULT)
                .unwrap();
            assert!(back.iter().all(|&b| b == want), "page {page}");
        }
        m.unmap(va, 3 * g).unwrap();
        assert_eq!(
            m.counters().bytes_in_use.current,
            3 * g as u64,
            "alive at the alias"
        );
        assert_eq!(m.counters().chunks_released, 0);
        m.copy_to_host(&mut back, va.offset(10 * g), StreamId::DEFAULT)
            .unwrap();
        assert!(back.iter().all(|&b| b == 9));
        m.unmap(va.offset(8 * g), 3 * g).unwrap();
        let c = m.counters();
        assert_eq!((c.bytes_in_use.current, c.chunks_released), (0, 2));
        m.unreserve(va, 16 * g).unwrap();
    }

    #[test]
    fn an_unmap_under_queued_work_is_refused_and_counted() {
        let m = MockBackend::new(MockConfig::default().host_backed().manual_events());
        let g = m.granularity();
        let s = m.create_stream().unwrap();
        let va = m.reserve(4 * g, g).unwrap();
        m.map(va, 2 * g).unwrap();
        m.memset(va.offset(g + 100), 3, 10, s).unwrap();
        // Page 0 is idle; page 1 has a memset queued on s.
        m.unmap(va, g).unwrap();
        assert!(
            m.unmap(va.offset(g), g).is_err(),
            "queued work may still write it"
        );
        assert_eq!(m.unmaps_while_busy(), 1);
        assert_eq!(m.counters().bytes_in_use.current, g as u64, "nothing went");
        // Work on another stream does not help; stream s passing does.
        m.complete_stream(StreamId::DEFAULT);
        assert!(m.unmap(va.offset(g), g).is_err());
        m.complete_stream(s);
        m.unmap(va.offset(g), g).unwrap();
        assert_eq!(m.unmaps_while_busy(), 2);
        // A copy returns when done: it completes the stream's queue.
        m.map(va, g).unwrap();
        m.memset(va, 1, 10, s).unwrap();
        let mut b = [0u8; 1];
        m.copy_to_host(&mut b, va, s).unwrap();
        m.unmap(va, g).unwrap();
        m.unreserve(va, 4 * g).unwrap();
    }

    #[test]
    fn manual_events_complete_on_command() {
        let m = MockBackend::new(MockConfig::default().manual_events());
        let s = m.create_stream().unwrap();
        let e = m.create_event().unwrap();
        assert!(
            m.event_done(e).unwrap(),
            "an event never recorded is complete"
        );
        m.record_event(e, s).unwrap();
        assert!(!m.event_done(e).unwrap());
        m.complete_stream(StreamId::DEFAULT);
        assert!(!m.event_done(e).unwrap());
        m.complete_stream(s);
        assert!(m.event_done(e).unwrap());
    }

    #[test]
    fn faults_fire_once_and_capacity_shrinks() {
        let m = MockBackend::new(MockConfig::default().capacity(64 << 20));
        m.fail_nth(FaultOn::Region, 2);
        let a = m.alloc_region(1 << 20).unwrap();
        assert!(matches!(
            m.alloc_region(1 << 20),
            Err(BackendError::Injected { .. })
        ));
        let b = m.alloc_region(1 << 20).unwrap();
        m.set_capacity(2 << 20);
        assert!(matches!(
            m.alloc_region(1 << 20),
            Err(BackendError::OutOfMemory { .. })
        ));
        m.free_region(a, 1 << 20).unwrap();
        m.free_region(b, 1 << 20).unwrap();
        assert!(m.free_region(b, 1 << 20).is_err());
        assert_eq!(m.counters().bytes_in_use.current, 0);
        assert_eq!(m.counters().failures, 3);
        assert_eq!(
            m.injected_faults(),
            1,
            "the out-of-memory failures were not injected"
        );
    }
}

#[cfg(test)]
mod va_tests {
    use super::*;

    #[test]
    fn freed_addresses_are_reused_and_never_overlap_live_ones() {
        let m = MockBackend::default();
        let g = m.granularity();
        let a = m.alloc_region(3 * g).unwrap();
        let b = m.alloc_region(g).unwrap();
        m.free_region(a, 3 * g).unwrap();
        let c = m.alloc_region(g).unwrap();
        assert_eq!(c, a, "the lowest freed hole is reused");
        let d = m.reserve(8 * g, 8 * g).unwrap();
        assert!(d.0 >= b.0 + g as u64 || d.0 + 8 * g as u64 <= c.0);
        m.unreserve(d, 8 * g).unwrap();
        m.free_region(b, g).unwrap();
        m.free_region(c, g).unwrap();
        // Everything given back: the next allocation starts at the bottom again.
        assert_eq!(m.alloc_region(g).unwrap(), a);
    }

    #[test]
    fn long_runs_do_not_exhaust_the_address_space() {
        let m = MockBackend::default();
        for _ in 0..100_000 {
            let p = m.alloc_region(64 << 20).unwrap();
            m.free_region(p, 64 << 20).unwrap();
        }
        for _ in 0..2000 {
            let r = m.reserve(141 << 30, 2 << 20).unwrap();
            m.unreserve(r, 141 << 30).unwrap();
        }
    }
}
