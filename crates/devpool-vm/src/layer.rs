//! [`PageLayer`]: the state every virtual-memory strategy keeps about its pages, and
//! the calls a placement makes when it hands out and takes back a block.

use crate::config::VmConfig;
use crate::policy::CachePolicy;
use crate::queue::Retire;
use crate::range::Range;
use crate::uses::Footprint;
use devpool_core::{align_up, Backend, DevicePtr, Error, Gauge, Result, StreamId};
use std::sync::Arc;

/// A reserved range of a [`PageLayer`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RangeId(pub(crate) u32);

impl RangeId {
    /// The range's index among the layer's ranges (stable while it lives).
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Page counts, kept in step with the ranges' bitmaps.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counts {
    /// Pages mapped (retiring ones included).
    pub mapped: u64,
    /// Pages some live block touches.
    pub used: u64,
    /// Pages mapped, untouched and not retiring: the cache.
    pub unused: u64,
    /// Pages waiting to be unmapped.
    pub retiring: u64,
    /// Retiring pages whose memory moved to another address.
    pub moved: u64,
}

/// Backend calls made.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Calls {
    pub maps: u64,
    pub chunks: u64,
    pub unmaps: u64,
    pub moves: u64,
    pub reserves: u64,
    pub unreserves: u64,
    pub events: u64,
    pub waits: u64,
    pub streams_dropped: u64,
}

/// Range `r` of `ranges`, which the caller checked.
#[inline]
pub(crate) fn at(ranges: &mut [Option<Range>], r: RangeId) -> &mut Range {
    ranges[r.index()]
        .as_mut()
        .expect("callers checked the range")
}

/// Operations between two looks at the retiring queue on the free path.
pub(crate) const POLL_EVERY: u32 = 8;

/// The page layer: reserved ranges, which pages are mapped and used, the physical
/// chunks behind them, and the policy of when to map and unmap. See the
/// [crate docs](crate).
///
/// A placement (TLSF, buddy) reserves ranges with [`reserve`](Self::reserve), and
/// calls [`acquire`](Self::acquire) for each block it hands out and
/// [`release`](Self::release) for each block it takes back; the layer maps what a
/// block needs and decides what to unmap. It is not thread-safe by itself: a pool
/// keeps it under its own lock.
///
/// ```
/// use devpool_core::{Backend, StreamId};
/// use devpool_testing::MockBackend;
/// use devpool_vm::{PageLayer, VmConfig};
/// let mock = MockBackend::shared();
/// let mut vm = PageLayer::new(mock.clone(), VmConfig::default().map_batch_pages(1));
/// let page = vm.page_size();
/// let r = vm.reserve(64 * page as usize, page as usize).unwrap();
/// let base = vm.base(r);
/// // A block of three pages and a bit, then its neighbour sharing its last page.
/// vm.acquire(r, (base, base + 3 * page + 100), (base, base + 64 * page)).unwrap();
/// vm.acquire(r, (base + 3 * page + 100, base + 5 * page), (base + 3 * page + 100, base + 64 * page)).unwrap();
/// assert_eq!(mock.counters().bytes_in_use.current, 5 * page);
/// vm.release(r, (base, base + 3 * page + 100), StreamId::DEFAULT);
/// assert_eq!(vm.detail().unused_pages, 3, "kept mapped as a cache; page 3 is still used");
/// vm.release(r, (base + 3 * page + 100, base + 5 * page), StreamId::DEFAULT);
/// vm.trim().unwrap();
/// assert_eq!(mock.counters().bytes_in_use.current, 0);
/// ```
pub struct PageLayer {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) cfg: VmConfig,
    pub(crate) shift: u32,
    pub(crate) ranges: Vec<Option<Range>>,
    pub(crate) policy: CachePolicy,
    pub(crate) n: Counts,
    pub(crate) retire: Retire,
    /// Streams whose blocks were released here: the streams whose queued work may
    /// still touch an unused page.
    pub(crate) streams: Vec<StreamId>,
    pub(crate) held: Gauge,
    /// The last growth past the most held, for growth in bursts.
    pub(crate) burst: crate::map::Burst,
    pub(crate) calls: Calls,
    pub(crate) since_poll: u32,
    /// A window ended: the cache is brought within its bound at the next free.
    pub(crate) window_due: bool,
    /// Whether the backend can map memory it holds at a second address.
    pub(crate) can_alias: bool,
    /// Whether the reserve ([`VmConfig::reserve`]) was mapped (or tried): once, in
    /// the first range.
    pub(crate) reserved_ahead: bool,
    /// A release whose page work waits for the next call ([`release_deferred`]).
    ///
    /// [`release_deferred`]: Self::release_deferred
    pub(crate) deferred: Option<crate::deferred::Deferred>,
    /// Moves on whenever a page may have become mapped or usable again here, or a
    /// range came or went ([`map_epoch`](Self::map_epoch)).
    pub(crate) epoch: u64,
}

impl PageLayer {
    /// A layer over `backend` (which must support virtual memory for
    /// [`reserve`](Self::reserve) to succeed). Settings out of range are brought into
    /// range.
    pub fn new(backend: impl devpool_core::IntoBackend, cfg: VmConfig) -> Self {
        let backend = backend.into_backend();
        let page = backend.page_size();
        let mut cfg = cfg.normalized();
        // The reserve is whole pages, for the policy's floor as for the mapping.
        cfg.reserve = align_up(cfg.reserve, page).unwrap_or(usize::MAX & !(page - 1));
        let can_alias = cfg.move_memory;
        PageLayer {
            backend,
            shift: page.trailing_zeros(),
            ranges: Vec::new(),
            policy: CachePolicy::new(&cfg),
            cfg,
            n: Counts::default(),
            retire: Retire::default(),
            streams: Vec::new(),
            held: Gauge::default(),
            burst: crate::map::Burst::default(),
            calls: Calls::default(),
            since_poll: 0,
            window_due: false,
            can_alias,
            reserved_ahead: false,
            deferred: None,
            epoch: 0,
        }
    }

    /// The page size: the backend's granularity.
    #[inline]
    pub fn page_size(&self) -> u64 {
        1 << self.shift
    }

    /// The settings in force.
    pub fn config(&self) -> &VmConfig {
        &self.cfg
    }

    /// The cache policy's state.
    pub fn policy(&self) -> &CachePolicy {
        &self.policy
    }

    /// Device bytes held now and at peak: every mapped page, retiring ones included,
    /// but not pages whose memory moved to another address (counted there).
    pub fn held(&self) -> Gauge {
        self.held
    }

    /// Bring the held gauge in step with the counts.
    #[inline]
    pub(crate) fn sync_held(&mut self) {
        self.held.current = (self.n.mapped - self.n.moved) << self.shift;
        self.held.peak = self.held.peak.max(self.held.current);
        self.policy.on_held(self.held.current);
    }

    /// A count that moves on whenever a page of this layer may have become mapped
    /// (a map, memory moved in) or usable again (a retiring page taken back, or left
    /// mapped by a failed unmap), or a range was reserved or given back. Between two
    /// equal readings mapped pages only go (unmaps, memory moved away, pages chosen
    /// to retire), so a place found needing mapping still needs it, and a free room
    /// found without a run of unused pages is still without one: what a placement
    /// search may remember ([`PageLayer::missing`], [`PageLayer::unused_run`]).
    #[inline]
    pub fn map_epoch(&self) -> u64 {
        self.epoch
    }

    /// Backend calls made: maps, unmaps, reserves and unreserves.
    pub fn backend_calls(&self) -> u64 {
        let c = &self.calls;
        c.maps + c.moves + c.unmaps + c.reserves + c.unreserves
    }

    /// Reserve `size` bytes of address space (rounded up to a page), aligned to
    /// `align` (at least a page).
    pub fn reserve(&mut self, size: usize, align: usize) -> Result<RangeId> {
        self.finish_deferred();
        let page = self.page_size() as usize;
        let size = align_up(size.max(1), page).ok_or(Error::too_large(size))?;
        let align = align.max(page).checked_next_power_of_two().unwrap_or(page);
        let base = self.backend.reserve(size, align)?;
        self.calls.reserves += 1;
        self.epoch += 1;
        let range = Range::new(
            base.0,
            size as u64,
            size >> self.shift,
            self.cfg.chunk_pages,
        );
        let i = match self.ranges.iter().position(Option::is_none) {
            Some(i) => {
                self.ranges[i] = Some(range);
                i
            }
            None => {
                self.ranges.push(Some(range));
                self.ranges.len() - 1
            }
        };
        let r = RangeId(i as u32);
        if !self.reserved_ahead && self.cfg.reserve > 0 {
            self.reserved_ahead = true;
            self.map_reserve(r);
        }
        Ok(r)
    }

    /// Map the reserve at the bottom of range `r`, the layer's first, as unused
    /// pages in chunks of a map batch each (`map_batch_pages`, at most the largest
    /// chunk): a reserve is memory blocks of every size will share, so it must move
    /// and go back in pieces of about a block's size, not in the largest chunks a
    /// single run is cut into. Best effort: if the backend refuses (out of memory),
    /// nothing is mapped and the pool goes on without a reserve.
    #[cold]
    fn map_reserve(&mut self, r: RangeId) {
        let Ok(rg) = self.range(r) else { return };
        let pages = (self.cfg.reserve >> self.shift).min(rg.size as usize >> self.shift);
        let chunk = self.cfg.map_batch_pages.min(self.cfg.chunk_pages).max(1);
        let sizes: Vec<usize> = (0..pages)
            .step_by(chunk)
            .map(|p| (chunk.min(pages - p)) << self.shift)
            .collect();
        if !sizes.is_empty() {
            let _ = self.map_sizes(r, 0, &sizes);
        }
    }

    /// Give range `r` back, if no page of it is mapped or used; returns whether it
    /// went.
    pub fn unreserve(&mut self, r: RangeId) -> Result<bool> {
        self.finish_deferred();
        let rg = self.range(r)?;
        if rg.top > 0 {
            return Ok(false);
        }
        let (base, size) = (DevicePtr(rg.base), rg.size as usize);
        self.backend.unreserve(base, size)?;
        self.calls.unreserves += 1;
        self.epoch += 1;
        self.ranges[r.index()] = None;
        while matches!(self.ranges.last(), Some(None)) {
            self.ranges.pop();
        }
        Ok(true)
    }

    /// First address of range `r` (0 for a range that is gone).
    pub fn base(&self, r: RangeId) -> u64 {
        self.range(r).map_or(0, |rg| rg.base)
    }

    /// Bytes of range `r` (0 for a range that is gone).
    pub fn size(&self, r: RangeId) -> u64 {
        self.range(r).map_or(0, |rg| rg.size)
    }

    /// Ranges reserved now.
    pub fn ranges(&self) -> impl Iterator<Item = RangeId> + '_ {
        self.ranges
            .iter()
            .enumerate()
            .filter(|(_, r)| r.is_some())
            .map(|(i, _)| RangeId(i as u32))
    }

    /// Whether range `r` has no page mapped or used.
    pub fn is_empty(&self, r: RangeId) -> bool {
        // Used pages are mapped: nothing mapped means nothing used.
        self.range(r).is_ok_and(|rg| rg.top == 0)
    }

    pub(crate) fn range(&self, r: RangeId) -> Result<&Range> {
        match self.ranges.get(r.index()) {
            Some(Some(rg)) => Ok(rg),
            _ => Err(Error::Unsupported("a range this page layer does not hold")),
        }
    }

    fn checked(&self, r: RangeId, lo: u64, hi: u64) -> Result<&Range> {
        let rg = self.range(r)?;
        if lo >= hi || !rg.holds(lo, hi) {
            return Err(Error::NotOwned { ptr: DevicePtr(lo) });
        }
        Ok(rg)
    }

    /// Pages that bytes `[lo, hi)` of range `r` touch, and how many of them are
    /// mapped here (retiring pages count: a block placed there keeps them; pages
    /// whose memory moved away do not). `(0, 0)` for bytes outside the range.
    #[inline]
    fn touched_mapped(&self, r: RangeId, lo: u64, hi: u64) -> (usize, usize) {
        match self.checked(r, lo, hi) {
            Ok(rg) => {
                let (a, b) = rg.touched(self.shift, lo, hi);
                let moved = if self.n.moved > 0 {
                    rg.moved.count(a, b)
                } else {
                    0
                };
                (b - a, rg.mapped.count(a, b) - moved)
            }
            Err(_) => (0, 0),
        }
    }

    /// Pages that bytes `[lo, hi)` of range `r` touch and that are not mapped
    /// (retiring pages count as mapped: a block placed there keeps them).
    #[inline]
    pub fn missing(&self, r: RangeId, lo: u64, hi: u64) -> usize {
        let (touched, mapped) = self.touched_mapped(r, lo, hi);
        touched - mapped
    }

    /// The first address in bytes `[lo, hi)` of range `r` (a free block of the
    /// placement) where `len` bytes lie wholly on mapped pages that no block uses,
    /// page aligned; `None` if there is none. For a placement whose first choice
    /// would need pages mapped: the memory is there, elsewhere in the free room.
    pub fn unused_run(&self, r: RangeId, lo: u64, hi: u64, len: u64) -> Option<u64> {
        debug_assert!(
            self.settled(),
            "finish a deferred release before reading pages"
        );
        let rg = self.checked(r, lo, hi).ok()?;
        let (f0, f1) = rg.inside(self.shift, lo, hi);
        // No page at or above `top` is mapped: the search stops there (a span's
        // free tail reaches far beyond it).
        let f1 = f1.min(rg.top);
        let need = len.div_ceil(self.page_size()) as usize;
        if need == 0 || f1 < f0 + need || self.n.unused < need as u64 {
            return None;
        }
        rg.mapped
            .first_run_only(&rg.used, &rg.retiring, f0, f1, need)
            .map(|s| rg.base + ((s as u64) << self.shift))
    }

    /// Pages that bytes `[lo, hi)` of range `r` touch and that are mapped.
    #[inline]
    pub fn mapped_in(&self, r: RangeId, lo: u64, hi: u64) -> usize {
        self.touched_mapped(r, lo, hi).1
    }

    /// A block now covers bytes `[lo, hi)` of range `r`, carved from free room
    /// `room` (which contains it): count its pages as used and map those missing,
    /// the last run rounded up to the map batch inside the room. On error nothing is
    /// counted (pages mapped on the way stay mapped, as cache).
    pub fn acquire(&mut self, r: RangeId, (lo, hi): (u64, u64), room: (u64, u64)) -> Result<()> {
        self.finish_deferred();
        let rg = self.checked(r, lo, hi)?;
        let pages = Footprint::of(rg, self.shift, lo, hi);
        if self.n.retiring > 0 && rg.retiring.count(pages.p0, pages.p1) > 0 {
            if rg.moved.count(pages.p0, pages.p1) > 0 {
                // Their memory lives elsewhere now: the old mappings must go first.
                self.flush_moved(r, pages.p0, pages.p1)?;
            }
            self.rescue(r, pages.p0, pages.p1);
        }
        let missing = self.add_uses(r, pages);
        if missing > 0 {
            if let Err(e) = self.grow(r, pages, room, missing, hi - lo) {
                self.take_uses(r, pages);
                return Err(e);
            }
        }
        self.policy.on_alloc(hi - lo);
        self.after_op(false);
        Ok(())
    }

    /// [`acquire`](Self::acquire) for a block whose pages are all mapped here and
    /// none retiring, the common case of a pool that reuses its memory: counts its
    /// pages as used, as `acquire` would, and returns true. Otherwise (pages to map,
    /// retiring pages to take back, bytes outside the range) changes nothing and
    /// returns false: call `acquire`. It looks at the block's bits, a word at a time,
    /// and never calls the backend.
    #[inline]
    pub fn acquire_mapped(&mut self, r: RangeId, (lo, hi): (u64, u64)) -> bool {
        if self.take_back_exact(r, lo, hi) {
            return true;
        }
        self.finish_deferred();
        let shift = self.shift;
        let Some(Some(rg)) = self.ranges.get_mut(r.index()) else {
            return false;
        };
        let Some(pages) = Footprint::within(rg, shift, lo, hi) else {
            return false;
        };
        // Moved pages are retiring too: no retiring page means none moved.
        if !rg.mapped.all(pages.p0, pages.p1)
            || (self.n.retiring > 0 && rg.retiring.any(pages.p0, pages.p1))
        {
            return false;
        }
        crate::uses::add_uses_mapped(rg, &mut self.n, pages);
        self.policy.on_alloc(hi - lo);
        self.after_op(false);
        true
    }

    /// The block at bytes `[lo, hi)` of range `r`, last used on `stream`, is gone:
    /// pages no other block touches become unused (still mapped, as cache). They are
    /// unmapped only once the work queued on `stream` before now has completed.
    #[inline]
    pub fn release(&mut self, r: RangeId, (lo, hi): (u64, u64), stream: StreamId) {
        self.finish_deferred();
        let shift = self.shift;
        let Some(Some(rg)) = self.ranges.get_mut(r.index()) else {
            return;
        };
        let Some(pages) = Footprint::within(rg, shift, lo, hi) else {
            return;
        };
        crate::uses::take_uses(rg, &mut self.n, pages);
        // A stream's pool releases its own blocks: the last stream is nearly always
        // the one, and the list holds only the streams that ever released here.
        if self.streams.last() != Some(&stream) && !self.streams.contains(&stream) {
            self.streams.push(stream);
        }
        self.policy.on_free(hi - lo);
        self.after_op(true);
    }

    /// Count one operation. The work that may call the backend (at the end of a
    /// window, bringing the cache within its bound and unmapping the old addresses
    /// of moved memory; now and then, unmapping retiring pages whose streams have
    /// passed) is done on the free path only (`freeing`), never when a block is
    /// handed out.
    #[inline]
    pub(crate) fn after_op(&mut self, freeing: bool) {
        if self.policy.tick() {
            self.window_ended();
        }
        if freeing && (self.window_due || !self.retire.is_empty() || !self.retire.moved.is_empty())
        {
            self.after_free();
        }
    }

    /// A window of operations ended: its work is done at the next free.
    #[cold]
    #[inline(never)]
    fn window_ended(&mut self) {
        self.window_due = true;
        // The new window's peak of held bytes starts from what is held now.
        self.policy.on_held(self.held.current);
    }

    /// The work of [`after_op`](Self::after_op) on a free when a window ended or
    /// something waits to be unmapped.
    #[inline(never)]
    fn after_free(&mut self) {
        if self.window_due {
            self.window_due = false;
            // A failing unmap leaves pages mapped and counted: nothing to undo. One
            // unused page always stays: a pool whose peak is under a page's worth of
            // bound (a loop of one small block) would otherwise unmap its only page
            // at every window's end and map it again at the next allocation.
            let _ = self.enforce(0, 1);
            let _ = self.sweep_moved(false);
        }
        // Now and then, unmap what waits for streams that have passed: retiring
        // chunks, and the old addresses of memory that moved (so that a block rarely
        // lands on one and has to unmap it first).
        if !self.retire.is_empty() || !self.retire.moved.is_empty() {
            self.since_poll += 1;
            if self.since_poll >= POLL_EVERY {
                let _ = self.poll(false);
                let _ = self.sweep_moved(false);
            }
        }
    }

    /// Give back every unused page, waiting for the streams that used them; returns
    /// the bytes unmapped.
    pub fn trim(&mut self) -> Result<usize> {
        self.finish_deferred();
        let before = self.n.mapped - self.n.moved;
        self.sweep_moved(true)?;
        self.retire_unused(u64::MAX)?;
        self.poll(true)?;
        Ok(((before - (self.n.mapped - self.n.moved)) << self.shift) as usize)
    }
}

impl Drop for PageLayer {
    fn drop(&mut self) {
        // Work queued on the streams that used these pages must be done before they
        // go back. Dropping the pool is no allocation or free: it may wait for the
        // device, which also spares naming streams the program may have destroyed
        // since. Errors have nobody to go to.
        if self.n.mapped > 0 {
            if let Err(devpool_core::BackendError::Unsupported(_)) =
                self.backend.synchronize_device()
            {
                for &s in &self.streams {
                    let _ = self.backend.synchronize(s);
                }
            }
        }
        let _ = self.poll(true);
        let _ = self.sweep_moved(true);
        for rg in self.ranges.drain(..).flatten() {
            let n = rg.pages();
            let mut p = 0;
            while p < n {
                let s = rg.mapped.next(p, n, true);
                if s >= n {
                    break;
                }
                let e = rg.mapped.next(s, n, false);
                let _ = self.backend.unmap(
                    DevicePtr(rg.base + ((s as u64) << self.shift)),
                    (e - s) << self.shift,
                );
                p = e;
            }
            let _ = self.backend.unreserve(DevicePtr(rg.base), rg.size as usize);
        }
        for e in self.retire.drain_events() {
            let _ = self.backend.destroy_event(e);
        }
    }
}

impl PageLayer {
    /// Start giving back every unused page without waiting: pages whose streams
    /// have passed are unmapped now, the others retire until they have. Returns the
    /// bytes unmapped now.
    pub fn trim_nowait(&mut self) -> Result<usize> {
        self.finish_deferred();
        let before = self.n.mapped - self.n.moved;
        self.sweep_moved(false)?;
        self.retire_unused(u64::MAX)?;
        Ok(((before - (self.n.mapped - self.n.moved)) << self.shift) as usize)
    }

    /// Unmap the retiring pages whose streams have passed; returns the bytes
    /// unmapped.
    pub fn poll_retiring(&mut self) -> Result<usize> {
        self.finish_deferred();
        let moved = self.sweep_moved(false)?;
        Ok(((self.poll(false)? + moved) << self.shift) as usize)
    }
}
