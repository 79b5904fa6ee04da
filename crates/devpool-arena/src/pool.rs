//! [`ArenaPool`]: the single-stream bump pool.
//!
//! # How it works
//!
//! - **Bump.** The cursor is one atomic word: the epoch, the slot of the current chunk
//!   and the offset in it. An allocation reads the chunk's address and size from the
//!   slot, aligns, and moves the offset with one compare-and-swap. Only when the chunk
//!   is full does it take the pool's lock, to move to a spare chunk or take a new one
//!   from the backend.
//! - **Ledger.** A second word counts the live blocks of the epoch. An allocation
//!   counts itself there (for the epoch its bump was in) before it is handed out; a
//!   free uncounts itself after it is done. A new epoch begins only by changing that
//!   word, so no block can be handed out in an epoch that has ended: a bump that loses
//!   that race is simply made again in the new epoch.
//! - **Records.** Each block gets a record (address, requested size, epoch, live
//!   flag) at an index written in its handle, so a free is checked in O(1): a pointer
//!   that is not the block's, a forged size, a second free, or a block of an epoch
//!   that ended are errors that change nothing.
//! - **Frees** are checked and counted at once (the live figures drop), but their
//!   memory is reused only when a new epoch begins, with one exception: freeing the
//!   block bumped last in the current chunk moves the cursor back over it
//!   ([`ArenaConfig::reuse_last`]), so temporaries freed in stack order cost nothing.
//!   That keeps allocation a bump and a free a few atomic operations, which is the
//!   point of an arena; a workload that needs freed memory back in any order
//!   mid-frame wants a general pool instead.
//! - **Epochs.** A new epoch begins, in O(chunks), at [`reset`](ArenaPool::reset)
//!   (live blocks are reclaimed), at a rewind (the last live block was freed, see
//!   [`ArenaConfig::rewind_when_empty`]), and when [`trim`](Pool::trim) finds nothing
//!   live. The chunks are then rearranged largest first and the cursor starts at the
//!   start of the largest.
//!
//! The cursor carries 20 bits of the epoch: a thread would have to stall between two
//! instructions of one bump for a million epochs, while the chunks were rearranged, to
//! be fooled by an old cursor value.

use crate::chunks::{Chunk, Chunks, Desc};
use crate::config::ArenaConfig;
use crate::fence::Fence;
use crate::records::{self, Record, Records};
use crate::stats::{ArenaStats, PoolStats};
use crate::word::{self, MAX_CHUNK_BYTES, NO_SLOT};
use devpool_core::{
    align_up, human_bytes, Backend, BackendError, Block, DeviceId, DevicePtr, Error, Pool, Request,
    Result, Stats, StreamId, MIN_ALIGN,
};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::Arc;

/// The largest alignment served: 1 GiB.
pub const MAX_ALIGN: usize = 1 << 30;

const FIRST_EPOCH: u64 = 1;

/// What is done to the chunks when a new epoch begins.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Turn {
    /// Keep every chunk.
    Rewind,
    /// Keep the largest `keep_chunks`.
    Reset,
    /// Give every chunk back.
    TrimAll,
}

/// What only the lock holder touches.
struct Inner {
    epoch: u64,
    chunks: Chunks,
    /// Bytes bumped this epoch in chunks the cursor has left.
    retired: u64,
    fence: Fence,
}

/// A single-stream linear arena: allocation bumps a pointer, a new epoch hands every
/// byte back at once. See the [module docs](self) for how.
///
/// Used alone it serves one stream; [`arena`](crate::arena) gives each stream its own.
///
/// ```
/// use devpool_arena::{ArenaConfig, ArenaPool};
/// use devpool_core::{MockBackend, Pool, Request};
/// let pool = ArenaPool::new(MockBackend::shared(), ArenaConfig::default());
/// let a = pool.allocate(&Request::new(1000)).unwrap();
/// let b = pool.allocate(&Request::new(1000)).unwrap();
/// assert_eq!(b.ptr.0, a.ptr.0 + 1024); // bumped
/// pool.reset().unwrap(); // frame over: everything comes back
/// assert!(pool.deallocate(&a).is_err()); // blocks of the last frame are gone
/// assert_eq!(pool.allocate(&Request::new(64)).unwrap().ptr, a.ptr); // reused
/// ```
pub struct ArenaPool {
    backend: Arc<dyn Backend>,
    cfg: ArenaConfig,
    device: DeviceId,
    granularity: u64,
    cursor: AtomicU64,
    ledger: AtomicU64,
    next_record: AtomicU64,
    epoch: AtomicU64,
    /// The last block was freed but a fence held the rewind back: the next allocation
    /// tries again.
    rewind_due: AtomicBool,
    descs: Box<[Desc]>,
    records: Records,
    stats: PoolStats,
    inner: Mutex<Inner>,
}

/// The bytes granted for `size` requested bytes.
#[inline]
fn granted(size: usize) -> Option<usize> {
    align_up(size.max(1), MIN_ALIGN)
}

/// Granted bytes and alignment of a request, checked.
#[inline]
fn measure(req: &Request) -> Result<(u64, u64)> {
    let align = req.effective_align()?;
    if align > MAX_ALIGN {
        return Err(Error::InvalidAlignment { align: req.align });
    }
    let pad = (align - MIN_ALIGN) as u64;
    let max = MAX_CHUNK_BYTES - pad;
    match granted(req.size) {
        Some(g) if g as u64 <= max => Ok((g as u64, align as u64)),
        _ => Err(Error::TooLarge {
            size: req.size,
            max: max as usize,
        }),
    }
}

impl ArenaPool {
    /// A pool over `backend`; `cfg` is brought into range with
    /// [`ArenaConfig::normalized`]. No memory is taken until the first allocation.
    pub fn new(backend: Arc<dyn Backend>, cfg: ArenaConfig) -> Self {
        let cfg = cfg.normalized();
        let n = cfg.max_chunks;
        ArenaPool {
            device: backend.device(),
            granularity: (backend.granularity() as u64).max(MIN_ALIGN as u64),
            backend,
            cursor: AtomicU64::new(word::cursor(FIRST_EPOCH, NO_SLOT, 0)),
            ledger: AtomicU64::new(word::counted(FIRST_EPOCH, 0)),
            next_record: AtomicU64::new(word::counted(FIRST_EPOCH, 0)),
            epoch: AtomicU64::new(FIRST_EPOCH),
            rewind_due: AtomicBool::new(false),
            descs: (0..n).map(|_| Desc::default()).collect(),
            records: Records::default(),
            stats: PoolStats::default(),
            inner: Mutex::new(Inner {
                epoch: FIRST_EPOCH,
                chunks: Chunks::new(n),
                retired: 0,
                fence: Fence::default(),
            }),
            cfg,
        }
    }

    /// The settings in force.
    pub fn config(&self) -> &ArenaConfig {
        &self.cfg
    }

    /// The current epoch (it starts at 1 and grows by one at every reset or rewind).
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Acquire)
    }

    /// End the frame: every block handed out so far is reclaimed at once and later
    /// frees of those blocks are errors; the `keep_chunks` largest chunks stay for the
    /// next frame and the others go back to the backend. O(chunks).
    ///
    /// The call is the caller's promise that the device work of the frame that used
    /// this memory has completed, or that the next frame's work is queued on the same
    /// stream behind it: memory is handed out again at once. Frees still waiting for
    /// other streams are dropped under the same promise.
    ///
    /// A reset racing with allocations on other threads is safe (no block of the new
    /// frame overlaps another), but the racing blocks may belong to the frame that
    /// ended. An error means a chunk could not be given back; it stays held and the
    /// reset itself is done.
    pub fn reset(&self) -> Result<()> {
        let mut g = self.inner.lock();
        let prev = self.ledger.swap(word::counted(g.epoch + 1, 0), AcqRel);
        self.stats.reclaimed.fetch_add(word::count(prev), Relaxed);
        self.stats.resets.fetch_add(1, Relaxed);
        g.fence.forget();
        self.turn(&mut g, Turn::Reset).map(drop)
    }

    /// Free `block`, whose memory is also used by the work queued so far on `streams`:
    /// the block is freed at once, and the arena does not rewind over its memory
    /// before that work completes. (A [`reset`](ArenaPool::reset) does not wait.)
    pub fn deallocate_after(&self, block: &Block, streams: &[StreamId]) -> Result<()> {
        self.free(block, streams)
    }

    /// The arena's own figures.
    pub fn arena_stats(&self) -> ArenaStats {
        let g = self.inner.lock();
        let next = self.next_record.load(Acquire);
        ArenaStats {
            chunks: g.chunks.held(),
            chunk_bytes: g.chunks.bytes(),
            epoch_used_bytes: self.consumed(&g),
            epoch_blocks: if word::count_epoch(next) == word::short(g.epoch) {
                word::count(next)
            } else {
                0
            },
            resets: self.stats.resets.load(Relaxed),
            rewinds: self.stats.rewinds.load(Relaxed),
            reclaimed_blocks: self.stats.reclaimed.load(Relaxed),
        }
    }

    /// The sizes of the chunks held, in slot order (the largest first after a new
    /// epoch begins).
    pub fn chunk_sizes(&self) -> Vec<usize> {
        let g = self.inner.lock();
        g.chunks.iter().map(|(_, c)| c.size as usize).collect()
    }

    /// Host bytes of metadata: block records and chunk slots.
    pub fn host_bytes(&self) -> usize {
        self.records.host_bytes() + std::mem::size_of_val(&*self.descs)
    }

    /// Bump in the current chunk: the address and the short epoch of the bump.
    #[inline]
    fn bump(&self, size: u64, align: u64) -> Option<(u64, u64)> {
        let mut c = self.cursor.load(Acquire);
        loop {
            let (e, slot, off) = word::split_cursor(c);
            if slot == NO_SLOT {
                return None;
            }
            let (base, cap) = self.descs[slot].get();
            let start = (base + off).next_multiple_of(align) - base;
            let end = start + size;
            if end > cap {
                return None;
            }
            match self
                .cursor
                .compare_exchange_weak(c, word::cursor(e, slot, end), AcqRel, Acquire)
            {
                Ok(_) => return Some((base + start, e)),
                Err(now) => c = now,
            }
        }
    }

    /// Count a bumped block in the ledger, record it and hand it out; `None` when its
    /// epoch ended meanwhile (the bump is then void and must be made again).
    #[inline]
    fn commit(&self, ptr: u64, short: u64, req: &Request, size: u64) -> Result<Option<Block>> {
        let mut l = self.ledger.load(Acquire);
        loop {
            if word::count_epoch(l) != short {
                return Ok(None);
            }
            match self.ledger.compare_exchange_weak(l, l + 1, AcqRel, Acquire) {
                Ok(_) => break,
                Err(now) => l = now,
            }
        }
        let live_blocks = word::count(l) + 1;
        let r = self.next_record.fetch_add(1, AcqRel);
        if word::count_epoch(r) != short {
            self.uncount(short);
            return Ok(None);
        }
        let index = word::count(r);
        let rec = match self
            .records
            .slot(index)
            .filter(|_| index <= word::MAX_INDEX)
        {
            Some(rec) => rec,
            None => {
                self.uncount(short);
                return Err(Error::Limit(format!(
                    "an arena epoch holds at most {} blocks",
                    records::CAPACITY
                )));
            }
        };
        let epoch = word::full_epoch(self.epoch.load(Acquire), short);
        rec.write(epoch, ptr, req.size as u64);
        self.stats
            .on_alloc(epoch, req.size, size as usize, live_blocks);
        Ok(Some(Block {
            ptr: DevicePtr(ptr),
            size: size as usize,
            requested: req.size,
            stream: req.stream,
            device: self.device,
            handle: word::handle(epoch, index),
        }))
    }

    /// Take one block out of the ledger of the epoch `short`, if it is still current;
    /// returns the count before.
    fn uncount(&self, short: u64) -> Option<u64> {
        let mut l = self.ledger.load(Acquire);
        loop {
            if word::count_epoch(l) != short || word::count(l) == 0 {
                return None;
            }
            match self.ledger.compare_exchange_weak(l, l - 1, AcqRel, Acquire) {
                Ok(_) => return Some(word::count(l)),
                Err(now) => l = now,
            }
        }
    }

    /// Bytes bumped this epoch.
    fn consumed(&self, g: &Inner) -> u64 {
        let (e, slot, off) = word::split_cursor(self.cursor.load(Acquire));
        let current = if slot != NO_SLOT && e == word::short(g.epoch) {
            off
        } else {
            0
        };
        g.retired + current
    }

    /// The slow path: the current chunk is full.
    #[cold]
    fn refill(&self, size: u64, align: u64) -> Result<(u64, u64)> {
        let mut g = self.inner.lock();
        if let Some(x) = self.bump(size, align) {
            return Ok(x);
        }
        if self.cfg.rewind_when_empty && self.consumed(&g) > 0 && self.try_rewind(&mut g) {
            if let Some(x) = self.bump(size, align) {
                return Ok(x);
            }
        }
        let epoch = g.epoch;
        let slot = match g.chunks.best_spare(epoch, size, align) {
            Some(s) => s,
            None => self.grow(&mut g, size, align)?,
        };
        let (_, cslot, coff) = word::split_cursor(self.cursor.load(Acquire));
        let room = match cslot {
            NO_SLOT => 0,
            s => self.descs[s].get().1.saturating_sub(coff),
        };
        let chunk = g
            .chunks
            .get_mut(slot)
            .ok_or(Error::Unsupported("arena slot emptied under its lock"))?;
        let (start, end) = chunk
            .place(size, align)
            .ok_or(Error::Unsupported("arena chunk smaller than placed"))?;
        chunk.used_in = epoch;
        let ptr = chunk.base + start;
        if cslot != NO_SLOT && chunk.size - end < room {
            // A block that would leave less room in its chunk than the current one has
            // gets that chunk to itself; the cursor stays where the room is.
            g.retired += end;
        } else {
            let prev = self.cursor.swap(word::cursor(epoch, slot, end), AcqRel);
            let (_, ps, poff) = word::split_cursor(prev);
            if ps != NO_SLOT {
                g.retired += poff;
            }
        }
        Ok((ptr, word::short(epoch)))
    }

    /// Take a new chunk for a block of `size` bytes at `align`; its slot.
    fn grow(&self, g: &mut Inner, size: u64, align: u64) -> Result<usize> {
        let slot = g.chunks.free_slot().ok_or_else(|| {
            Error::Limit(format!(
                "an arena pool holds at most {} chunks",
                self.cfg.max_chunks
            ))
        })?;
        // Room for the block wherever a 256-byte aligned region starts.
        let need = size + (align - MIN_ALIGN as u64);
        let regular = self.cfg.chunk_for(g.chunks.held()) as u64;
        let want = if need <= regular {
            regular
        } else {
            need.next_multiple_of(self.granularity)
                .min(MAX_CHUNK_BYTES)
                .max(need)
        };
        let (base, bytes) = match self.backend.alloc_region(want as usize) {
            Ok(p) => (p.0, want),
            Err(BackendError::OutOfMemory { .. }) if need < want => {
                (self.backend.alloc_region(need as usize)?.0, need)
            }
            Err(e) => return Err(e.into()),
        };
        self.stats.backend.on_reserve(bytes as usize);
        if !base.is_multiple_of(MIN_ALIGN as u64) {
            if self
                .backend
                .free_region(DevicePtr(base), bytes as usize)
                .is_ok()
            {
                self.stats.backend.on_release(bytes as usize);
            }
            return Err(Error::Unsupported(
                "the backend returned a region not aligned to 256 bytes",
            ));
        }
        g.chunks.insert(
            slot,
            Chunk {
                base,
                size: bytes,
                used_in: 0,
            },
            &self.descs,
        );
        Ok(slot)
    }

    /// Close the epoch if nothing is live in it.
    fn close_if_empty(&self, g: &Inner) -> bool {
        self.ledger
            .compare_exchange(
                word::counted(g.epoch, 0),
                word::counted(g.epoch + 1, 0),
                AcqRel,
                Acquire,
            )
            .is_ok()
    }

    /// Rewind if nothing is live and no other stream may still use freed memory.
    fn try_rewind(&self, g: &mut Inner) -> bool {
        if word::count(self.ledger.load(Acquire)) != 0
            || !g.fence.settle(&*self.backend, false).unwrap_or(false)
            || !self.close_if_empty(g)
        {
            return false;
        }
        self.stats.rewinds.fetch_add(1, Relaxed);
        // A rewind gives nothing back to the backend, so it cannot fail.
        let _ = self.turn(g, Turn::Rewind);
        true
    }

    /// Begin the next epoch; the ledger has already been moved to it.
    fn turn(&self, g: &mut Inner, how: Turn) -> Result<usize> {
        let (old, new) = (g.epoch, g.epoch + 1);
        // Bumps of the old epoch fail from here; new ones wait for the lock.
        self.cursor.store(word::cursor(new, NO_SLOT, 0), Release);
        let prev = self.next_record.swap(word::counted(new, 0), AcqRel);
        let handed_out = if word::count_epoch(prev) == word::short(old) {
            word::count(prev)
        } else {
            0
        };
        self.stats.turn(old, new, handed_out);
        g.epoch = new;
        g.retired = 0;
        self.epoch.store(new, Release);
        let (released, err) = match how {
            Turn::Rewind => (0, None),
            Turn::Reset => {
                let extra = g.chunks.beyond(self.cfg.keep_chunks);
                self.release(g, extra)
            }
            Turn::TrimAll => {
                let all = g.chunks.beyond(0);
                self.release(g, all)
            }
        };
        g.chunks.arrange(&self.descs);
        if let Some(first) = g.chunks.get_mut(0) {
            first.used_in = new;
            self.cursor.store(word::cursor(new, 0, 0), Release);
        }
        err.map_or(Ok(released), Err)
    }

    /// Give the chunks in `slots` back; bytes released and the first error (a chunk
    /// that could not be given back stays).
    fn release(&self, g: &mut Inner, slots: Vec<usize>) -> (usize, Option<Error>) {
        let (mut released, mut first_err) = (0, None);
        for slot in slots {
            let Some(c) = g.chunks.remove(slot, &self.descs) else {
                continue;
            };
            match self.backend.free_region(DevicePtr(c.base), c.size as usize) {
                Ok(()) => {
                    self.stats.backend.on_release(c.size as usize);
                    released += c.size as usize;
                }
                Err(e) => {
                    g.chunks.insert(slot, c, &self.descs);
                    first_err.get_or_insert(Error::from(e));
                }
            }
        }
        (released, first_err)
    }

    /// The error for a block whose handle names another epoch.
    #[cold]
    fn stale(&self, block: &Block) -> Error {
        if self.inner.lock().chunks.owns(block.ptr.0) {
            // Its memory is ours: the block was reclaimed by a reset or freed before a
            // rewind.
            Error::DoubleFree { ptr: block.ptr }
        } else {
            Error::NotOwned { ptr: block.ptr }
        }
    }

    /// Check that `block` is live in the current epoch: its epoch and record.
    #[inline]
    fn validate(&self, block: &Block) -> Result<(u64, &Record)> {
        let not_owned = || Error::NotOwned { ptr: block.ptr };
        if block.device != self.device {
            return Err(Error::WrongDevice {
                ptr: block.ptr,
                block_device: block.device,
                allocator_device: self.device,
            });
        }
        let (h_epoch, index) = word::split_handle(block.handle).ok_or_else(not_owned)?;
        let epoch = self.epoch.load(Acquire);
        if !word::handle_epoch_matches(h_epoch, epoch) {
            return Err(self.stale(block));
        }
        let rec = self.records.get(index).ok_or_else(not_owned)?;
        let (tag, ptr, requested) = rec.read();
        if ptr != block.ptr.0
            || requested != block.requested as u64
            || granted(block.requested) != Some(block.size)
        {
            return Err(not_owned());
        }
        if tag == records::live(epoch) {
            Ok((epoch, rec))
        } else if tag == records::dead(epoch) {
            Err(Error::DoubleFree { ptr: block.ptr })
        } else {
            Err(not_owned())
        }
    }

    /// Free a block, fencing the rewind behind `streams`.
    fn free(&self, block: &Block, streams: &[StreamId]) -> Result<()> {
        let (epoch, rec) = self.validate(block)?;
        if !streams.is_empty() {
            let mut g = self.inner.lock();
            for &s in streams {
                g.fence.add(&*self.backend, s)?;
            }
        }
        if !rec.kill(epoch) {
            return Err(Error::DoubleFree { ptr: block.ptr });
        }
        self.stats.on_free(epoch, block.requested, block.size);
        if streams.is_empty() && self.cfg.reuse_last {
            self.roll_back(block, epoch);
        }
        if self.uncount(word::short(epoch)) == Some(1)
            && self.cfg.rewind_when_empty
            && self.cursor.load(Acquire) != word::cursor(epoch, 0, 0)
        {
            let mut g = self.inner.lock();
            if g.epoch == epoch && !self.try_rewind(&mut g) {
                self.rewind_due.store(true, Relaxed);
            }
        }
        Ok(())
    }

    /// If the freed block of `epoch` is the last one bumped in the current chunk, move
    /// the cursor back to its start: its room is reused at once, in stack order.
    #[inline]
    fn roll_back(&self, block: &Block, epoch: u64) {
        let c = self.cursor.load(Acquire);
        let (e, slot, off) = word::split_cursor(c);
        if e != word::short(epoch) || slot == NO_SLOT {
            return;
        }
        let (base, _) = self.descs[slot].get();
        let (start, end) = (block.ptr.0, block.ptr.0 + block.size as u64);
        if start >= base && end == base + off {
            // Fails, harmlessly, if another block was bumped meanwhile.
            let _ = self.cursor.compare_exchange(
                c,
                word::cursor(epoch, slot, start - base),
                AcqRel,
                Acquire,
            );
        }
    }

    /// Try the rewind a fence held back, before the allocation that ends the chance.
    #[cold]
    fn rewind_if_due(&self) {
        let mut g = self.inner.lock();
        self.rewind_due.store(false, Relaxed);
        if self.cfg.rewind_when_empty {
            self.try_rewind(&mut g);
        }
    }
}

impl Pool for ArenaPool {
    #[inline]
    fn allocate(&self, req: &Request) -> Result<Block> {
        let (size, align) = measure(req)?;
        if self.rewind_due.load(Relaxed) {
            self.rewind_if_due();
        }
        loop {
            let (ptr, short) = match self.bump(size, align) {
                Some(x) => x,
                None => self.refill(size, align)?,
            };
            if let Some(block) = self.commit(ptr, short, req, size)? {
                return Ok(block);
            }
        }
    }

    #[inline]
    fn deallocate(&self, block: &Block) -> Result<()> {
        self.free(block, &[])
    }

    fn check(&self, block: &Block) -> Result<()> {
        self.validate(block).map(drop)
    }

    fn stats(&self) -> Stats {
        let epoch = self.epoch.load(Acquire);
        let in_epoch = |w: u64| {
            if word::count_epoch(w) == word::short(epoch) {
                word::count(w)
            } else {
                0
            }
        };
        self.stats.snapshot(
            epoch,
            in_epoch(self.ledger.load(Acquire)),
            in_epoch(self.next_record.load(Acquire)),
        )
    }

    /// Give back every chunk not used in the current epoch; when nothing is live,
    /// wait for fenced streams, begin a new epoch and give back every chunk.
    fn trim(&self) -> Result<usize> {
        let mut g = self.inner.lock();
        let mut first_err = None;
        if word::count(self.ledger.load(Acquire)) == 0 {
            let settled = g.fence.settle(&*self.backend, true).unwrap_or_else(|e| {
                first_err = Some(e);
                true
            });
            if settled && self.close_if_empty(&g) {
                self.stats.rewinds.fetch_add(1, Relaxed);
                let r = self.turn(&mut g, Turn::TrimAll);
                return match first_err {
                    Some(e) => Err(e),
                    None => r,
                };
            }
        }
        let spares = g.chunks.spares(g.epoch);
        let (released, err) = self.release(&mut g, spares);
        match err.or(first_err) {
            Some(e) => Err(e),
            None => Ok(released),
        }
    }

    fn describe_cache(&self) -> String {
        let g = self.inner.lock();
        let spare: u64 = g
            .chunks
            .iter()
            .filter(|(_, c)| c.used_in != g.epoch)
            .map(|(_, c)| c.size)
            .sum();
        let (e, slot, off) = word::split_cursor(self.cursor.load(Acquire));
        let room = if slot != NO_SLOT && e == word::short(g.epoch) {
            self.descs[slot].get().1.saturating_sub(off)
        } else {
            0
        };
        format!(
            "arena of {} chunks ({}): {} free in the current chunk, {} in spare chunks; \
             freed blocks come back at the next reset",
            g.chunks.held(),
            human_bytes(g.chunks.bytes()),
            human_bytes(room),
            human_bytes(spare)
        )
    }
}

impl Drop for ArenaPool {
    fn drop(&mut self) {
        let g = self.inner.get_mut();
        g.fence.destroy(&*self.backend);
        let all = g.chunks.beyond(0);
        for slot in all {
            if let Some(c) = g.chunks.remove(slot, &self.descs) {
                let _ = self.backend.free_region(DevicePtr(c.base), c.size as usize);
            }
        }
    }
}
