//! [`Limit`]: a cap on the granted bytes of live blocks.

use devpool_core::{align_up, Allocator, Block, Error, Request, Result, StreamId, MIN_ALIGN};
use std::sync::atomic::{AtomicU64, Ordering};

/// Refuses allocations that would take the granted bytes of live blocks past a cap.
///
/// The bytes are claimed with a compare-and-swap *before* the wrapped allocator is
/// called and given back if it fails, so concurrent threads can never together be
/// admitted past the cap. The claim is the request rounded up to 256 bytes, the
/// least any allocator grants; when the block comes back larger, the difference is
/// claimed the same way, and if that would pass the cap the block is freed again and
/// the request refused.
///
/// ```
/// use devpool_adaptors::Limit;
/// use devpool_core::{direct, Allocator, Error};
/// use devpool_testing::MockBackend;
/// let a = Limit::new(direct(MockBackend::shared()), 1 << 20);
/// let b = a.alloc(768 << 10).unwrap();
/// let e = a.alloc(512 << 10).unwrap_err();
/// assert!(matches!(e, Error::Limit(_)), "{e}");
/// a.free(b).unwrap();
/// assert!(a.alloc(512 << 10).is_ok());
/// ```
pub struct Limit<A> {
    inner: A,
    name: String,
    cap: u64,
    live: AtomicU64,
}

impl<A: Allocator> Limit<A> {
    /// At most `cap` granted bytes live in `inner` through this adaptor.
    pub fn new(inner: A, cap: u64) -> Self {
        Limit {
            name: format!("limit({})", inner.name()),
            inner,
            cap,
            live: AtomicU64::new(0),
        }
    }

    /// The cap in bytes.
    pub fn cap(&self) -> u64 {
        self.cap
    }

    /// Granted bytes of live blocks admitted now (plus claims in flight).
    pub fn live(&self) -> u64 {
        self.live.load(Ordering::Acquire)
    }

    /// The wrapped allocator.
    pub fn inner(&self) -> &A {
        &self.inner
    }

    /// The wrapped allocator, unwrapped.
    pub fn into_inner(self) -> A {
        self.inner
    }

    /// Claim `bytes` under the cap, or say why not.
    fn claim(&self, bytes: u64, requested: usize) -> Result<()> {
        self.live
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |live| {
                live.checked_add(bytes).filter(|&n| n <= self.cap)
            })
            .map(|_| ())
            .map_err(|live| {
                Error::Limit(format!(
                    "request of {requested} B ({bytes} B more granted) would pass the cap of {} B \
                     of {}: {live} B are live",
                    self.cap, self.name
                ))
            })
    }

    fn release(&self, bytes: u64) {
        self.live.fetch_sub(bytes, Ordering::AcqRel);
    }
}

impl<A: Allocator> Allocator for Limit<A> {
    devpool_core::forward_allocator!(|a| &a.inner; backend, record_stream, stats, trim, parts, reuse);

    fn name(&self) -> &str {
        &self.name
    }

    fn allocate(&self, req: Request) -> Result<Block> {
        let first = align_up(req.effective_size(), MIN_ALIGN).map_or(u64::MAX, |v| v as u64);
        self.claim(first, req.size)?;
        let block = match self.inner.allocate(req) {
            Ok(b) => b,
            Err(e) => {
                self.release(first);
                return Err(e);
            }
        };
        let granted = block.size as u64;
        if granted > first {
            if let Err(e) = self.claim(granted - first, req.size) {
                // The inner allocator handed out this block a moment ago: it takes it
                // back, and if it cannot, its error says more than ours.
                let freed = self.inner.deallocate(block, block.stream);
                self.release(first);
                freed?;
                return Err(e);
            }
        } else {
            self.release(first - granted);
        }
        Ok(block)
    }

    fn deallocate(&self, block: Block, stream: StreamId) -> Result<()> {
        self.inner.deallocate(block, stream)?;
        self.release(block.size as u64);
        Ok(())
    }
}
