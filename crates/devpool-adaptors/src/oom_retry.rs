//! [`OomRetry`]: on out of memory, ask a callback, trim, and try again.

use devpool_core::{human_bytes, Allocator, BackendError, Block, Error, OomInfo, Request, Result};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The most retries of one allocation when a callback keeps asking for more.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 8;

/// A failure callback: gets the out-of-memory error and the attempt number (from 1)
/// and returns whether to trim and try again.
pub type OomCallback = Box<dyn Fn(&Error, u32) -> bool + Send + Sync>;

/// Retries allocations that fail for lack of memory, as RMM's failure-callback
/// adaptor does.
///
/// On an out-of-memory error (see [`Error::is_oom`]) it calls the callback, if any,
/// with the error and the attempt number; if the callback returns `true` (a callback
/// may free memory of its own first, or wait for other work), it trims the wrapped
/// allocator so every strategy gives its cached memory back, and tries again. Without
/// a callback it trims and retries once; with one, as long as the callback says, up
/// to [`max_attempts`](OomRetry::with_max_attempts) times. Other errors pass through.
///
/// The final out-of-memory error says what a user needs: requested, live, cached and
/// reserved bytes, the device's free and total, and, in its note, how many retries
/// ran, what they trimmed and whether the unused memory sits in caches or in rounding
/// inside live blocks. A bare backend out-of-memory error is turned into such an error.
///
/// ```
/// use devpool_adaptors::OomRetry;
/// use devpool_core::{direct, Allocator};
/// use devpool_testing::{MockBackend, MockConfig};
/// let mock = MockBackend::shared_with(MockConfig::default().capacity(64 << 20));
/// let m = mock.clone();
/// let a = OomRetry::new(direct(mock.clone())).on_oom(move |_err, attempt| {
///     m.set_capacity(128 << 20); // e.g. another user of the device let go
///     attempt == 1
/// });
/// let b = a.alloc(100 << 20).unwrap();
/// assert_eq!(a.retries(), 1);
/// a.free(b).unwrap();
/// ```
pub struct OomRetry<A> {
    inner: A,
    name: String,
    callback: Option<OomCallback>,
    max_attempts: u32,
    retries: AtomicU64,
    recovered: AtomicU64,
}

impl<A: Allocator> OomRetry<A> {
    /// Retry allocations of `inner` once after a trim.
    pub fn new(inner: A) -> Self {
        OomRetry {
            name: format!("oom-retry({})", inner.name()),
            inner,
            callback: None,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            retries: AtomicU64::new(0),
            recovered: AtomicU64::new(0),
        }
    }

    /// Ask `f(error, attempt)` before each retry; `false` gives up.
    pub fn on_oom(mut self, f: impl Fn(&Error, u32) -> bool + Send + Sync + 'static) -> Self {
        self.callback = Some(Box::new(f));
        self
    }

    /// Retry at most `n` times per allocation (at least once).
    pub fn with_max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n.max(1);
        self
    }

    /// The wrapped allocator.
    pub fn inner(&self) -> &A {
        &self.inner
    }

    /// Retries made so far, over all allocations.
    pub fn retries(&self) -> u64 {
        self.retries.load(Relaxed)
    }

    /// Allocations that failed at first and succeeded on a retry.
    pub fn recovered(&self) -> u64 {
        self.recovered.load(Relaxed)
    }

    fn should_retry(&self, err: &Error, attempt: u32) -> bool {
        match &self.callback {
            Some(f) => attempt <= self.max_attempts && f(err, attempt),
            None => attempt == 1,
        }
    }

    /// The error to report after `retries` retries that trimmed `trimmed` bytes.
    fn enrich(&self, err: Error, req: &Request, retries: u32, trimmed: usize) -> Error {
        let stats = self.inner.stats();
        let mut info = match err {
            Error::OutOfMemory(info) => info,
            Error::Backend(BackendError::OutOfMemory { free, total, .. }) => {
                Box::new(OomInfo::from_stats(
                    req.size,
                    &stats,
                    (free, total),
                    format!("allocator {}", self.inner.name()),
                ))
            }
            other => return other,
        };
        let rounding = stats
            .allocated_bytes
            .current
            .saturating_sub(stats.live_bytes.current);
        let cached = stats.cached_bytes();
        let most = if cached >= rounding {
            "in caches"
        } else {
            "in rounding inside live blocks"
        };
        let extra = format!(
            "{retries} {} trimmed {}; unused memory: {} cached, {} rounding in {} live \
             blocks, most of it {most}",
            if retries == 1 { "retry" } else { "retries" },
            human_bytes(trimmed as u64),
            human_bytes(cached),
            human_bytes(rounding),
            stats.live_blocks.current
        );
        if info.note.is_empty() {
            info.note = extra;
        } else {
            info.note = format!("{}; {extra}", info.note);
        }
        Error::OutOfMemory(info)
    }
}

impl<A: Allocator> Allocator for OomRetry<A> {
    devpool_core::forward_allocator!(|a| &a.inner; backend, deallocate, record_stream, stats, trim, parts, reuse, reset);

    fn name(&self) -> &str {
        &self.name
    }

    fn allocate(&self, req: Request) -> Result<Block> {
        let mut err = match self.inner.allocate(req) {
            Ok(b) => return Ok(b),
            Err(e) if e.is_oom() => e,
            Err(e) => return Err(e),
        };
        let mut attempt = 1;
        let mut trimmed = 0usize;
        while self.should_retry(&err, attempt) {
            // A trim that fails still leaves the retry worth making.
            trimmed = trimmed.saturating_add(self.inner.trim().unwrap_or(0));
            self.retries.fetch_add(1, Relaxed);
            match self.inner.allocate(req) {
                Ok(b) => {
                    self.recovered.fetch_add(1, Relaxed);
                    return Ok(b);
                }
                Err(e) if e.is_oom() => err = e,
                Err(e) => return Err(e),
            }
            attempt += 1;
        }
        Err(self.enrich(err, &req, attempt - 1, trimmed))
    }
}
