//! [`RingPool`]: one stream's ring: a lock around the [`Placement`] of its ring (or
//! rings, while an old one drains after a growth), their memory, the events of blocks
//! freed on other streams, and the statistics.

use crate::config::{RingConfig, RingMode, WhenFull};
use crate::events::Events;
use crate::place::{SEQ_BITS, SEQ_MASK};
use crate::stats::RingDetail;
use crate::unit::{Source, Unit};
use devpool_core::{
    align_up, Backend, Block, Counters, DeviceId, DevicePtr, Error, Gauge, IntoBackend, OomInfo,
    Pool, Request, Result, Stats, StreamId, Tally, MIN_ALIGN,
};
use devpool_vm::{PageLayer, VmConfig};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The largest alignment served (1 GiB).
pub const MAX_ALIGN: usize = 1 << 30;

/// Rings one pool holds at once: the current one and those still draining.
const MAX_RINGS: usize = 16;

/// The most bytes one request may ask for.
const MAX_REQUEST: u64 = isize::MAX as u64 / 4;

#[inline]
fn handle(tag: u8, seq: u64) -> u64 {
    ((tag as u64) << SEQ_BITS) | seq
}

/// The ring tag and sequence number in a handle; the top two bits stay clear for
/// routers.
#[inline]
fn split(handle: u64) -> Option<(u8, u64)> {
    (handle >> devpool_core::POOL_HANDLE_BITS == 0)
        .then_some(((handle >> SEQ_BITS) as u8, handle & SEQ_MASK))
}

/// The index of `block`'s ring and the block's sequence number, or `NotOwned`.
#[inline]
fn unit_of(g: &Inner, block: &Block) -> Result<(usize, u64)> {
    let not_owned = || Error::NotOwned { ptr: block.ptr };
    let (tag, seq) = split(block.handle).ok_or_else(not_owned)?;
    let ui = g
        .units
        .iter()
        .position(|u| u.tag == tag)
        .ok_or_else(not_owned)?;
    Ok((ui, seq))
}

/// The same, once the block is checked live.
#[inline]
fn lookup(g: &Inner, block: &Block) -> Result<(usize, u64)> {
    let (ui, seq) = unit_of(g, block)?;
    g.units[ui]
        .place
        .find(seq, block.ptr.0, block.size as u64, block.requested as u64)?;
    Ok((ui, seq))
}

/// What only the lock holder touches.
#[derive(Default)]
struct Inner {
    /// The rings; the last one takes new blocks, the others drain.
    units: Vec<Unit>,
    /// The page layer of the rings in virtual memory (made with the first one).
    vm: Option<PageLayer>,
    next_tag: u8,
    tally: Tally,
    events: Events,
    /// Streams each live block was declared used on, by handle.
    recorded: HashMap<u64, Vec<StreamId>>,
    /// Jumps of the rings given back.
    old_jumps: u64,
    grows: u64,
    pins: u64,
    full: u64,
    refused: u64,
    /// The last request was refused because the ring was full.
    last_refused: bool,
}

/// One stream's ring buffer of device memory.
///
/// Used alone it serves one stream (its blocks are freed on that stream, and
/// [`free_on`](RingPool::free_on) handles the others); [`ring`](crate::ring) gives
/// each stream its own.
///
/// # How it works
///
/// - **Memory.** A virtual range as large as the device, whose pages are mapped from
///   the bottom as the ring first needs them, or a region ([`RingMode`]). Nothing is
///   mapped or allocated on the steady path.
/// - **Allocation** carves at the head, up to the next obstacle; a block that does not
///   fit before it starts a new run in the smallest gap that fits, such as the room
///   the tail has left at the bottom (never split). Then, in order, when room is
///   short: the tail retires what it can (asking the backend
///   whether the events of blocks freed on other streams have completed); it passes
///   live blocks at the tail, up to [`RingConfig::max_pinned`], so that what was freed
///   behind them comes back; pages are mapped at the top while the ring holds less
///   than its capacity; and then [`WhenFull`] decides: map beyond the capacity or
///   start a larger second ring, wait, or fail with the ring's state in the message.
/// - **Frees** are checked in O(1) against the block's record (foreign pointer, forged
///   size, second free are errors that change nothing). A block freed on its own
///   stream with no other stream declared is reusable by this stream at once, when
///   the tail reaches it (or at once, if it was the newest block). Otherwise its bytes
///   wait for an event on each other stream (see [`free_on`](RingPool::free_on)).
/// - **Metadata** stays on the host: the pool never touches the memory it manages.
///
/// ```
/// use devpool_core::{Pool, Request};
/// use devpool_testing::MockBackend;
/// use devpool_ring::{RingConfig, RingPool};
/// let pool = RingPool::new(MockBackend::shared(), RingConfig::default());
/// let a = pool.allocate(&Request::new(1000)).unwrap();
/// let b = pool.allocate(&Request::new(1000)).unwrap();
/// assert_eq!(b.ptr.0, a.ptr.0 + 1024); // carved at the head
/// pool.deallocate(&a).unwrap(); // the tail moves on
/// assert!(pool.deallocate(&a).is_err()); // a second free is caught
/// pool.deallocate(&b).unwrap();
/// ```
pub struct RingPool {
    backend: Arc<dyn Backend>,
    cfg: RingConfig,
    /// The mode in force: virtual only where the backend has virtual memory.
    mode: RingMode,
    page: u64,
    capacity: u64,
    reserve: u64,
    device: DeviceId,
    /// The stream this pool serves: the last to use pages the ring lets go.
    stream: StreamId,
    /// Regions held and backend calls for them (the page layer counts its own).
    counters: Counters,
    inner: Mutex<Inner>,
}

impl RingPool {
    /// A ring over `backend` for the default stream. Out-of-range settings are
    /// brought into range (see [`RingConfig::validate`]); no memory is taken until the
    /// first allocation.
    pub fn new(backend: impl IntoBackend, cfg: RingConfig) -> Self {
        Self::for_stream(backend, cfg, StreamId::DEFAULT)
    }

    /// A ring for `stream`: pages the ring lets go are given back once the work
    /// queued on `stream` has passed.
    pub fn for_stream(backend: impl IntoBackend, cfg: RingConfig, stream: StreamId) -> Self {
        let backend = backend.into_backend();
        let page = (backend.granularity() as u64).max(MIN_ALIGN as u64);
        let round = |b: u64| b.div_ceil(page).saturating_mul(page).min(MAX_REQUEST);
        let capacity = round((cfg.capacity as u64).max(1));
        let device_bytes = backend.mem_info().map(|(_, t)| t).unwrap_or(1 << 40);
        let reserve = round(if cfg.reserve > 0 {
            cfg.reserve as u64
        } else {
            device_bytes
        })
        .max(capacity);
        RingPool {
            mode: if cfg.mode == RingMode::Virtual && backend.supports_virtual() {
                RingMode::Virtual
            } else {
                RingMode::Region
            },
            device: backend.device(),
            backend,
            cfg,
            page,
            capacity,
            reserve,
            stream,
            counters: Counters::default(),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// The settings in force.
    pub fn config(&self) -> &RingConfig {
        &self.cfg
    }

    /// The memory in use: [`RingMode::Virtual`] only where the backend has it.
    pub fn mode(&self) -> RingMode {
        self.mode
    }

    /// Whether the ring lives in virtual memory.
    #[inline]
    fn virt(&self) -> bool {
        self.mode == RingMode::Virtual
    }

    #[inline]
    fn round(&self, b: u64) -> u64 {
        b.div_ceil(self.page).saturating_mul(self.page)
    }

    /// Open a ring large enough for a block of `size` bytes at `align`: the first one
    /// or, when growing, one larger than the last.
    fn open(&self, g: &mut Inner, size: u64, align: u64) -> Result<()> {
        let need = self.round(size + align);
        let mut tag = g.next_tag;
        while g.units.iter().any(|u| u.tag == tag) {
            tag = tag.wrapping_add(1);
        }
        let unit = if self.virt() {
            let vm = g.vm.get_or_insert_with(|| {
                // Pages are mapped exactly as the ring reaches them, in physical
                // chunks of up to 16 pages, and kept until trim lets them go.
                let cfg = VmConfig::default()
                    .map_batch_pages(1)
                    .chunk_pages(16)
                    .chunk_divisor(1)
                    .cache(usize::MAX / 4, 1.0);
                PageLayer::new(self.backend.clone(), cfg)
            });
            Unit::reserve(vm, tag, self.reserve.max(need))?
        } else {
            // Growing, each ring is at least twice the last; otherwise the capacity
            // is all there is.
            let bytes = if self.cfg.when_full == WhenFull::Grow {
                let last = g.units.last().map_or(0, |u| u.size.saturating_mul(2));
                self.capacity.max(last).max(need)
            } else {
                self.capacity
            };
            Unit::region(&*self.backend, &self.counters, tag, bytes)?
        };
        g.next_tag = tag.wrapping_add(1);
        g.units.push(unit);
        Ok(())
    }

    /// Carve in the current ring.
    #[inline]
    fn carve(g: &mut Inner, size: u64, requested: u64, align: u64) -> Option<(u8, u64, u64)> {
        let u = g.units.last_mut()?;
        let (p, seq) = u.place.carve(size, requested, align)?;
        Some((u.tag, p, seq))
    }

    /// Map pages at the top of the current ring so that the block fits there, if that
    /// keeps the bytes held within `cap`. False when it does not.
    fn grow_top(&self, g: &mut Inner, size: u64, align: u64, cap: Option<u64>) -> Result<bool> {
        let held: u64 = g.units.iter().map(|u| u.held).sum();
        let (Some(u), Some(vm)) = (g.units.last_mut(), g.vm.as_mut()) else {
            return Ok(false);
        };
        if !matches!(u.source, Source::Pages(_)) {
            return Ok(false);
        }
        let top = u.place.top();
        let Some(end) =
            align_up(top as usize, align as usize).and_then(|p| (p as u64).checked_add(size))
        else {
            return Ok(false);
        };
        let want = self.round(end - u.base);
        if end > u.end() || cap.is_some_and(|c| held - u.held + want > c) {
            return Ok(false);
        }
        let before = u.held;
        if !u.map_to(vm, end)? {
            return Ok(false);
        }
        if u.held > before {
            g.grows += 1;
        }
        Ok(true)
    }

    /// Find room for a block, holding more only as the policy allows; `None` when the
    /// ring is full.
    fn place(
        &self,
        g: &mut Inner,
        size: u64,
        req: u64,
        align: u64,
    ) -> Result<Option<(u8, u64, u64)>> {
        if g.units.is_empty() {
            self.open(g, size, align)?;
        }
        if let Some(x) = Self::carve(g, size, req, align) {
            return Ok(Some(x));
        }
        // What the tail can retire now.
        let _ = self.settle(g, false);
        if let Some(x) = Self::carve(g, size, req, align) {
            return Ok(Some(x));
        }
        // Pass live blocks at the tail, so that what was freed behind them comes back.
        let max = self.cfg.max_pinned;
        while g.units.last().is_some_and(|u| u.place.can_pin(max)) {
            let n = g.units.last_mut().map_or(0, |u| u.place.pin_front(max));
            g.pins += n as u64;
            let last = g.units.len() - 1;
            self.retire(g, last, false, &mut None);
            if let Some(x) = Self::carve(g, size, req, align) {
                return Ok(Some(x));
            }
        }
        // Hold more: within the capacity, then as the policy says.
        let grow = self.cfg.when_full == WhenFull::Grow;
        if self.grow_top(g, size, align, Some(self.capacity))?
            || (grow && self.grow_top(g, size, align, None)?)
        {
            return Ok(Self::carve(g, size, req, align));
        }
        if grow && g.units.len() < MAX_RINGS {
            self.open(g, size, align)?;
            g.grows += 1;
            if self.virt() {
                if let Err(e) = self.grow_top(g, size, align, None) {
                    // Give the new ring back: nothing changed.
                    let _ = self.close_unit(g, g.units.len() - 1);
                    return Err(e);
                }
            }
            return Ok(Self::carve(g, size, req, align));
        }
        Ok(None)
    }

    /// Retire what the tail of ring `i` can: blocks freed, and blocks whose events
    /// completed (waiting for them if `wait`).
    fn retire(&self, g: &mut Inner, i: usize, wait: bool, err: &mut Option<Error>) -> usize {
        let Inner { units, events, .. } = g;
        let u = &mut units[i];
        if !u.place.has_waiting() {
            return u.place.retire(&mut |_| false);
        }
        let tag = u.tag;
        let backend = &*self.backend;
        u.place
            .retire(&mut |seq| events.done(backend, handle(tag, seq), wait, err))
    }

    /// Retire what every ring can and give back the older rings that drained. Returns
    /// the first error met.
    fn settle(&self, g: &mut Inner, wait: bool) -> Option<Error> {
        let mut err = None;
        for i in 0..g.units.len() {
            self.retire(g, i, wait, &mut err);
        }
        self.close_drained(g, &mut err);
        err
    }

    /// Give ring `i` back (it holds no block) and forget it; on error it stays.
    fn close_unit(&self, g: &mut Inner, i: usize) -> Result<()> {
        let Inner { units, vm, .. } = g;
        units[i].close(&*self.backend, &self.counters, vm.as_mut(), self.stream)?;
        g.old_jumps += g.units[i].place.jumps();
        g.units.remove(i);
        Ok(())
    }

    /// Give back the older rings that hold no block.
    fn close_drained(&self, g: &mut Inner, err: &mut Option<Error>) {
        let mut i = 0;
        while i + 1 < g.units.len() {
            if g.units[i].place.is_empty() {
                match self.close_unit(g, i) {
                    Ok(()) => continue,
                    Err(e) => {
                        err.get_or_insert(e);
                    }
                }
            }
            i += 1;
        }
    }

    /// Device bytes held now and at peak: the page layer's mapped pages (those still
    /// retiring included), or the regions.
    fn held(&self, g: &Inner) -> Gauge {
        match (&g.vm, self.virt()) {
            (Some(vm), true) => vm.held(),
            (None, true) => Gauge::default(),
            (_, false) => self.counters.snapshot().reserved_bytes,
        }
    }

    /// Backend calls that took or gave back memory or address space.
    fn backend_calls(&self, g: &Inner) -> u64 {
        self.counters.snapshot().backend_calls + g.vm.as_ref().map_or(0, |v| v.backend_calls())
    }

    /// Free `block`, whose last use was queued on `stream`.
    ///
    /// Freed on its own stream with no other stream declared, its bytes are reusable
    /// by this stream once the tail reaches them. Otherwise an event is recorded on
    /// each other stream (the freeing one and those declared with
    /// [`record_stream`](RingPool::record_stream)), and the tail passes the block only
    /// once the backend says every one completed. On error nothing changed.
    pub fn free_on(&self, block: &Block, stream: StreamId) -> Result<()> {
        block.check_device(self.device)?;
        let (ptr, size, req) = (block.ptr.0, block.size as u64, block.requested as u64);
        let mut guard = self.inner.lock();
        let g = &mut *guard;
        let (ui, seq) = unit_of(g, block)?;
        if stream == block.stream && g.recorded.is_empty() {
            g.units[ui].place.free(seq, ptr, size, req, false)?;
        } else {
            lookup(g, block)?;
            let mut waits = g.recorded.get(&block.handle).cloned().unwrap_or_default();
            if !waits.contains(&stream) {
                waits.push(stream);
            }
            waits.retain(|s| *s != block.stream);
            if !waits.is_empty() {
                g.events.record(&*self.backend, block.handle, &waits)?;
            }
            g.units[ui]
                .place
                .free(seq, ptr, size, req, !waits.is_empty())?;
            g.recorded.remove(&block.handle);
        }
        g.tally.on_free(req, size);
        if ui + 1 < g.units.len() && g.units[ui].place.is_empty() {
            // An older ring drained: give it back (a failure leaves it for later).
            self.close_drained(g, &mut None);
        }
        Ok(())
    }

    /// Declare that `block` is also used on `stream`: its free will wait for the work
    /// queued on `stream` at that time.
    pub fn record_stream(&self, block: &Block, stream: StreamId) -> Result<()> {
        block.check_device(self.device)?;
        let mut g = self.inner.lock();
        lookup(&g, block)?;
        if stream != block.stream {
            let v = g.recorded.entry(block.handle).or_default();
            if !v.contains(&stream) {
                v.push(stream);
            }
        }
        Ok(())
    }

    /// The ring's own figures.
    pub fn detail(&self) -> RingDetail {
        let g = self.inner.lock();
        self.detail_locked(&g)
    }

    fn detail_locked(&self, g: &Inner) -> RingDetail {
        let mut s = RingDetail {
            rings: g.units.len(),
            held_bytes: self.held(g).current,
            jumps: g.old_jumps,
            grows: g.grows,
            pins: g.pins,
            full: g.full,
            refused: g.refused,
            ..RingDetail::default()
        };
        for u in &g.units {
            let sh = u.place.shape();
            s.live_blocks += sh.live;
            s.freed_blocks += sh.freed;
            s.waiting_blocks += sh.waiting;
            s.pinned_blocks += sh.pinned;
            s.jumps += u.place.jumps();
        }
        if let Some(u) = g.units.last() {
            s.span_bytes = u.place.shape().span;
        }
        s
    }

    /// Check the invariants of every ring, and that the bytes held add up.
    pub fn verify(&self) -> std::result::Result<(), String> {
        let g = self.inner.lock();
        for u in &g.units {
            u.place.verify()?;
            let want = match u.source {
                Source::Pages(_) => u.place.hi() - u.base,
                Source::Region => u.size,
            };
            if u.held != want {
                return Err(format!("ring {} holds {} but serves {want}", u.tag, u.held));
            }
        }
        // Pages let go stay held until the page layer has unmapped them (a physical
        // chunk goes back only whole): the page layer's used pages are the rings'.
        let used: u64 = g.units.iter().map(|u| u.held).sum();
        let held = self.held(&g).current;
        match &g.vm {
            Some(vm) => {
                let d = vm.detail();
                if d.used_pages * d.page_size != used || d.mapped_pages * d.page_size != held {
                    return Err(format!("rings use {used} of {held} bytes held; {d:?}"));
                }
            }
            None if used != held => {
                return Err(format!("rings use {used} bytes, {held} are held"));
            }
            None => {}
        }
        Ok(())
    }

    fn policy(&self) -> String {
        match self.cfg.when_full {
            WhenFull::Grow => "grow".into(),
            WhenFull::Wait(t) => format!("wait up to {t:?}"),
            WhenFull::Fail => "fail".into(),
        }
    }

    /// The ring's state in words: whether it is full, its settings, its figures.
    fn describe(&self, g: &Inner) -> String {
        let what = if g.last_refused {
            "the ring is full"
        } else {
            "ring"
        };
        format!(
            "{what} ({:?} memory, capacity {}, when full: {}): {}",
            self.mode(),
            devpool_core::human_bytes(self.capacity),
            self.policy(),
            self.detail_locked(g)
        )
    }

    fn full_error(&self, g: &Inner, req: &Request) -> Error {
        let reserved = self.held(g).current;
        let (free, total) = self.backend.mem_info().unwrap_or((0, 0));
        Error::OutOfMemory(Box::new(OomInfo {
            requested: req.size,
            live: g.tally.live.current,
            cached: reserved.saturating_sub(g.tally.granted.current),
            reserved,
            backend_free: free,
            backend_total: total,
            note: self.describe(g),
        }))
    }
}

impl RingPool {
    /// Hand out the block carved at `ptr`, counting it.
    #[inline]
    fn hand_out(
        &self,
        g: &mut Inner,
        req: &Request,
        size: u64,
        (tag, ptr, seq): (u8, u64, u64),
    ) -> Block {
        g.tally.on_alloc(req.size as u64, size);
        g.last_refused = false;
        req.granted(DevicePtr(ptr), size as usize, self.device, handle(tag, seq))
    }

    /// The allocation path when the head has no room: retire, pass, grow, wait or
    /// fail, as the policy says.
    #[cold]
    #[inline(never)]
    fn allocate_slow(&self, req: &Request, size: u64, align: u64) -> Result<Block> {
        let requested = req.size as u64;
        let mut started: Option<Instant> = None;
        let mut nap = Duration::from_micros(20);
        loop {
            let mut g = self.inner.lock();
            if let Some(x) = self.place(&mut g, size, requested, align)? {
                return Ok(self.hand_out(&mut g, req, size, x));
            }
            let waited = match started {
                Some(t) => t.elapsed(),
                None => {
                    g.full += 1;
                    started = Some(Instant::now());
                    Duration::ZERO
                }
            };
            match self.cfg.when_full {
                WhenFull::Wait(limit) if waited < limit => {
                    drop(g);
                    std::thread::sleep(nap.min(limit - waited));
                    nap = (nap * 2).min(Duration::from_millis(1));
                }
                _ => {
                    g.refused += 1;
                    g.last_refused = true;
                    return Err(self.full_error(&g, req));
                }
            }
        }
    }
}

impl Pool for RingPool {
    #[inline]
    fn allocate(&self, req: &Request) -> Result<Block> {
        let align = req.effective_align()?;
        if align > MAX_ALIGN {
            return Err(Error::InvalidAlignment { align: req.align });
        }
        let size = match align_up(req.effective_size(), MIN_ALIGN) {
            Some(s) if s as u64 <= MAX_REQUEST => s as u64,
            _ => {
                return Err(Error::TooLarge {
                    size: req.size,
                    max: MAX_REQUEST as usize,
                })
            }
        };
        let mut g = self.inner.lock();
        if let Some(x) = Self::carve(&mut g, size, req.size as u64, align as u64) {
            return Ok(self.hand_out(&mut g, req, size, x));
        }
        drop(g);
        self.allocate_slow(req, size, align as u64)
    }

    #[inline]
    fn deallocate(&self, block: &Block) -> Result<()> {
        self.free_on(block, block.stream)
    }

    fn check(&self, block: &Block) -> Result<()> {
        block.check_device(self.device)?;
        lookup(&self.inner.lock(), block).map(drop)
    }

    fn stats(&self) -> Stats {
        let g = self.inner.lock();
        let mut s = Stats {
            reserved_bytes: self.held(&g),
            backend_calls: self.backend_calls(&g),
            ..Stats::default()
        };
        g.tally.fill(&mut s);
        s
    }

    /// Retire everything the tail can (waiting for the events of blocks freed on other
    /// streams), give back the older rings, and the pages above the highest block of
    /// the current one (all of them when it holds no block; a region when it holds no
    /// block).
    fn trim(&self) -> Result<usize> {
        let mut guard = self.inner.lock();
        let g = &mut *guard;
        let before = self.held(g).current;
        let mut err = self.settle(g, true);
        let last = g.units.len().checked_sub(1);
        if let Some(i) = last {
            let Inner { units, vm, .. } = &mut *g;
            match (units[i].source, vm.as_mut()) {
                (Source::Pages(_), Some(vm)) => {
                    // The reservation stays (address space only) for the next blocks.
                    units[i].release_above_top(vm, self.stream);
                    if let Err(e) = vm.trim() {
                        err.get_or_insert(e);
                    }
                }
                (Source::Region, _) if units[i].place.is_empty() => {
                    if let Err(e) = self.close_unit(g, i) {
                        err.get_or_insert(e);
                    }
                }
                _ => {}
            }
        }
        let released = before.saturating_sub(self.held(g).current);
        match err {
            Some(e) => Err(e),
            None => Ok(released as usize),
        }
    }

    fn describe_cache(&self) -> String {
        let g = self.inner.lock();
        self.describe(&g)
    }
}

impl Drop for RingPool {
    fn drop(&mut self) {
        let g = self.inner.get_mut();
        // The page layer, dropped with the pool, waits for the streams that used its
        // pages and gives everything back; regions go back here.
        for mut u in g.units.drain(..) {
            let _ = u.close(&*self.backend, &self.counters, None, self.stream);
        }
        g.events.destroy(&*self.backend);
    }
}
