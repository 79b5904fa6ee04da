//! [`Guarded`]: guard bytes around every block, checked at free.

use devpool_core::{
    align_up, Allocator, Block, Counters, DevicePtr, Error, Request, Result, Stats, StreamId,
    MIN_ALIGN,
};
use parking_lot::Mutex;
use std::collections::HashMap;

/// The byte written into guards.
pub const GUARD_PATTERN: u8 = 0xFD;

/// Guard bytes on each side by default.
pub const DEFAULT_GUARD: usize = 256;

#[derive(Clone, Copy)]
struct Entry {
    inner: Block,
    user: Block,
    front: usize,
}

/// A debug mode that surrounds each block with guard bytes.
///
/// Each request of `n` bytes takes `front + n + guard` bytes from the wrapped
/// allocator, where `front` is the guard rounded up to the request's alignment. The
/// caller gets the middle (aligned as asked, `size` = `n`, at least one byte); both
/// guards are filled with [`GUARD_PATTERN`] through the backend's `memset` on the
/// block's stream. At free, both guards are read back with `copy_to_host` on the
/// freeing stream; if either was overwritten the memory is still freed (nothing
/// leaks) and the free returns [`Error::Corrupted`] naming the first bad byte.
///
/// This needs a backend that can set and copy memory: CUDA, or the mock in
/// host-backed mode (elsewhere every allocation fails with the backend's
/// `Unsupported` error). [`stats`](Allocator::stats) reports live and granted bytes
/// as the caller sees them; guards count as cached memory.
///
/// ```
/// use devpool_adaptors::Guarded;
/// use devpool_core::{direct, Allocator, Backend, Error};
/// use devpool_testing::{MockBackend, MockConfig};
/// let mock = MockBackend::shared_with(MockConfig::default().host_backed());
/// let a = Guarded::new(direct(mock.clone()));
/// let b = a.alloc(1000).unwrap();
/// mock.copy_to_device(b.ptr.offset(1000), &[0], b.stream).unwrap(); // one byte too far
/// assert!(matches!(a.free(b), Err(Error::Corrupted { .. })));
/// assert_eq!(a.stats().live_blocks.current, 0, "freed all the same");
/// ```
pub struct Guarded<A> {
    inner: A,
    name: String,
    guard: usize,
    live: Mutex<HashMap<u64, Entry>>,
    counters: Counters,
}

impl<A: Allocator> Guarded<A> {
    /// Guard the blocks of `inner` with [`DEFAULT_GUARD`] bytes on each side.
    pub fn new(inner: A) -> Self {
        Guarded {
            name: format!("guarded({})", inner.name()),
            inner,
            guard: DEFAULT_GUARD,
            live: Mutex::new(HashMap::new()),
            counters: Counters::default(),
        }
    }

    /// Guard with `guard` bytes on each side: a non-zero multiple of 256.
    pub fn with_guard(inner: A, guard: usize) -> Result<Self> {
        if guard == 0 || !guard.is_multiple_of(MIN_ALIGN) {
            return Err(Error::Unsupported(
                "guard size must be a non-zero multiple of 256 bytes",
            ));
        }
        let mut g = Self::new(inner);
        g.guard = guard;
        Ok(g)
    }

    /// Guard bytes on each side.
    pub fn guard(&self) -> usize {
        self.guard
    }

    /// The wrapped allocator.
    pub fn inner(&self) -> &A {
        &self.inner
    }

    fn fill(&self, e: &Entry) -> Result<()> {
        let b = self.inner.backend();
        let s = e.inner.stream;
        b.memset(e.inner.ptr, GUARD_PATTERN, e.front, s)?;
        b.memset(e.user.ptr.offset(e.user.size), GUARD_PATTERN, self.guard, s)?;
        Ok(())
    }

    /// Read both guards back; `Ok(Some(detail))` when one was overwritten.
    fn check(&self, e: &Entry, stream: StreamId) -> Result<Option<String>> {
        let b = self.inner.backend();
        let mut front = vec![0u8; e.front];
        b.copy_to_host(&mut front, e.inner.ptr, stream)?;
        // The byte nearest the block is the likeliest to be hit: report it first.
        if let Some(i) = front.iter().rposition(|&x| x != GUARD_PATTERN) {
            return Ok(Some(format!(
                "front guard overwritten {} B before the start of the {}-byte block \
                 (found {:#04x}, expected {GUARD_PATTERN:#04x})",
                e.front - i,
                e.user.size,
                front[i]
            )));
        }
        let mut back = vec![0u8; self.guard];
        b.copy_to_host(&mut back, e.user.ptr.offset(e.user.size), stream)?;
        if let Some(i) = back.iter().position(|&x| x != GUARD_PATTERN) {
            return Ok(Some(format!(
                "back guard overwritten {i} B past the end of the {}-byte block \
                 (found {:#04x}, expected {GUARD_PATTERN:#04x})",
                e.user.size, back[i]
            )));
        }
        Ok(None)
    }

    /// An out-of-memory error of the wrapped allocator, told in the caller's terms.
    fn callers_oom(&self, e: Error, req: &Request, total: usize) -> Error {
        match e {
            Error::OutOfMemory(mut info) => {
                info.requested = req.size;
                info.live = self.counters.snapshot().live_bytes.current;
                info.note = format!(
                    "{}; {} B asked of the wrapped allocator, guards included",
                    info.note, total
                );
                Error::OutOfMemory(info)
            }
            other => other,
        }
    }

    /// The entry of `block`, taken out of the table when `take`.
    fn lookup(&self, block: &Block, take: bool) -> Result<Entry> {
        block.check_device(self.inner.device())?;
        let mut live = self.live.lock();
        match live.get(&block.ptr.0) {
            Some(e) if e.user == *block => {
                let e = *e;
                if take {
                    live.remove(&block.ptr.0);
                }
                Ok(e)
            }
            _ => Err(Error::NotOwned { ptr: block.ptr }),
        }
    }
}

impl<A: Allocator> Allocator for Guarded<A> {
    devpool_core::forward_allocator!(|a| &a.inner; backend, trim, parts, reuse);

    fn name(&self) -> &str {
        &self.name
    }

    fn allocate(&self, req: Request) -> Result<Block> {
        let align = req.effective_align()?;
        let front =
            align_up(self.guard, align).ok_or(Error::InvalidAlignment { align: req.align })?;
        let size = req.effective_size();
        let too_large = Error::TooLarge {
            size: req.size,
            max: usize::MAX.saturating_sub(front).saturating_sub(self.guard),
        };
        let total = front
            .checked_add(size)
            .and_then(|v| v.checked_add(self.guard))
            .ok_or(too_large)?;
        let inner = self
            .inner
            .allocate(Request { size: total, ..req })
            .map_err(|e| self.callers_oom(e, &req, total))?;
        let user = req.granted(
            DevicePtr(inner.ptr.0 + front as u64),
            size,
            inner.device,
            inner.handle,
        );
        let entry = Entry { inner, user, front };
        if let Err(e) = self.fill(&entry) {
            // Not handed out: give it straight back.
            let _ = self.inner.deallocate(inner, inner.stream);
            return Err(e);
        }
        self.live.lock().insert(user.ptr.0, entry);
        self.counters.on_alloc(req.size, size);
        Ok(user)
    }

    fn deallocate(&self, block: Block, stream: StreamId) -> Result<()> {
        let e = self.lookup(&block, true)?;
        let checked = self.check(&e, stream);
        if let Err(err) = self.inner.deallocate(e.inner, stream) {
            self.live.lock().insert(block.ptr.0, e);
            return Err(err);
        }
        self.counters.on_free(e.user.requested, e.user.size);
        match checked? {
            Some(detail) => Err(Error::Corrupted {
                ptr: block.ptr,
                detail,
            }),
            None => Ok(()),
        }
    }

    fn record_stream(&self, block: &Block, stream: StreamId) -> Result<()> {
        let e = self.lookup(block, false)?;
        self.inner.record_stream(&e.inner, stream)
    }

    fn stats(&self) -> Stats {
        let mine = self.counters.snapshot();
        Stats {
            live_bytes: mine.live_bytes,
            allocated_bytes: mine.allocated_bytes,
            ..self.inner.stats()
        }
    }
}
