//! [`ArenaPool`]: the single-stream bump pool; [`alloc`], [`free`] and [`epoch`] hold
//! its three parts.

mod alloc;
mod epoch;
mod free;

use crate::chunks::{Chunks, Desc};
use crate::config::ArenaConfig;
use crate::fence::Fence;
use crate::records::Records;
use crate::stats::{ArenaDetail, PoolStats};
use crate::word::{self, NO_SLOT};
use devpool_core::{
    human_bytes, Backend, Block, DeviceId, DevicePtr, Pool, Request, Result, Stats, StreamId,
    MIN_ALIGN,
};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::Arc;

pub use alloc::MAX_ALIGN;

const FIRST_EPOCH: u64 = 1;

/// What only the lock holder touches.
struct Inner {
    epoch: u64,
    chunks: Chunks,
    /// Bytes bumped this epoch in chunks the cursor has left.
    retired: u64,
    fence: Fence,
}

/// A single-stream linear arena: allocation bumps a pointer, a new epoch hands every
/// byte back at once.
///
/// Used alone it serves one stream; [`arena`](crate::arena) gives each stream its own.
///
/// # How it works
///
/// - **Bump.** The cursor is one atomic word: the epoch, the slot of the current chunk
///   and the offset in it. An allocation reads the chunk's address and size from the
///   slot, aligns, and moves the offset with one compare-and-swap. Only when the chunk
///   is full does it take the pool's lock, to move to a spare chunk or take a new one
///   from the backend.
/// - **Ledger.** A second word holds the blocks handed out and freed in the epoch. An
///   allocation counts itself there, which also gives it its record index, before it
///   is handed out; a free counts itself after it is done. A new epoch begins only by
///   changing that word, and a rewind only from a ledger with nothing live, so no
///   block is handed out in an epoch that has ended: an allocation that loses that
///   race bumps again in the new epoch.
/// - **Records.** Each block has a host-side record (address, requested size, epoch,
///   generation, live flag) at the index written in its handle, so a free is checked
///   in O(1): a pointer that is not the block's, a forged size, a second free, or a
///   block of an epoch that ended are errors that change nothing.
/// - **Frees** are checked and counted at once (the live figures drop), but their
///   memory is reused only when a new epoch begins, with one exception: freeing the
///   block bumped last in the current chunk moves the cursor back over it
///   ([`ArenaConfig::reuse_last`]) and gives its record back, so temporaries freed in
///   stack order cost nothing and hold nothing. That keeps allocation a bump and a
///   free a few atomic operations, which is the point of an arena; a workload that
///   needs freed memory back in any order mid-frame wants a general pool instead.
/// - **Epochs.** A new epoch begins, in O(chunks), at [`reset`](ArenaPool::reset)
///   (live blocks are reclaimed), at a rewind (the last live block was freed, see
///   [`ArenaConfig::rewind_when_empty`]), and when [`trim`](Pool::trim) finds nothing
///   live. The chunks are then rearranged largest first and the cursor starts at the
///   start of the largest.
///
/// The words carry 20 bits of the epoch. An allocation reads the full epoch before it
/// bumps and checks it again once it is counted, so an old word value that comes
/// back a million epochs later cannot fool it.
///
/// ```
/// use devpool_arena::{ArenaConfig, ArenaPool};
/// use devpool_core::{Pool, Request};
/// use devpool_testing::MockBackend;
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
    /// The bump cursor (loom's atomic under the model, see `bump`).
    cursor: crate::bump::AtomicU64,
    ledger: AtomicU64,
    epoch: AtomicU64,
    /// The last block was freed but a fence held the rewind back: the next allocation
    /// tries again.
    rewind_due: AtomicBool,
    descs: Box<[Desc]>,
    records: Records,
    stats: PoolStats,
    inner: Mutex<Inner>,
}

impl ArenaPool {
    /// A pool over `backend`; `cfg` is brought into range with
    /// [`ArenaConfig::normalized`]. No memory is taken until the first allocation.
    pub fn new(backend: impl devpool_core::IntoBackend, cfg: ArenaConfig) -> Self {
        let backend = backend.into_backend();
        let cfg = cfg.normalized();
        let n = cfg.max_chunks;
        ArenaPool {
            device: backend.device(),
            granularity: (backend.granularity() as u64).max(MIN_ALIGN as u64),
            backend,
            cursor: crate::bump::AtomicU64::new(word::cursor(FIRST_EPOCH, NO_SLOT, 0)),
            ledger: AtomicU64::new(word::ledger(FIRST_EPOCH, 0, 0)),
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
        let prev = self.ledger.swap(word::ledger(g.epoch + 1, 0, 0), AcqRel);
        if word::ledger_in(prev, g.epoch) {
            self.stats.reclaimed.fetch_add(word::live(prev), Relaxed);
        }
        self.stats.resets.fetch_add(1, Relaxed);
        g.fence.forget();
        self.turn(&mut g, epoch::Turn::Reset, prev).map(drop)
    }

    /// Free `block`, whose memory is also used by the work queued so far on `streams`:
    /// the block is freed at once, and the arena does not rewind over its memory
    /// before that work completes. (A [`reset`](ArenaPool::reset) does not wait.)
    pub fn deallocate_after(&self, block: &Block, streams: &[StreamId]) -> Result<()> {
        self.free(block, streams)
    }

    /// The arena's own figures.
    pub fn detail(&self) -> ArenaDetail {
        let g = self.inner.lock();
        let (handed, _) = self.counts(g.epoch);
        ArenaDetail {
            chunks: g.chunks.held(),
            chunk_bytes: g.chunks.bytes(),
            epoch_used_bytes: self.consumed(&g),
            epoch_blocks: handed,
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
    pub fn metadata_bytes(&self) -> usize {
        self.records.metadata_bytes() + std::mem::size_of_val(&*self.descs)
    }

    /// Blocks (handed out, live) in `epoch`, or zeros once it has ended.
    fn counts(&self, epoch: u64) -> (u64, u64) {
        let l = self.ledger.load(Acquire);
        if word::ledger_in(l, epoch) {
            let (_, handed, freed) = word::split_ledger(l);
            (handed, handed - freed)
        } else {
            (0, 0)
        }
    }
}

impl Pool for ArenaPool {
    #[inline]
    fn allocate(&self, req: &Request) -> Result<Block> {
        self.alloc(req)
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
        let (handed, live) = self.counts(epoch);
        self.stats.snapshot(epoch, handed, live)
    }

    /// Give back every chunk not used in the current epoch; when nothing is live,
    /// wait for fenced streams, begin a new epoch and give back every chunk.
    fn trim(&self) -> Result<usize> {
        let mut g = self.inner.lock();
        self.trim_locked(&mut g)
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
        for slot in g.chunks.beyond(0) {
            if let Some(c) = g.chunks.remove(slot, &self.descs) {
                let _ = self.backend.free_region(DevicePtr(c.base), c.size as usize);
            }
        }
    }
}
