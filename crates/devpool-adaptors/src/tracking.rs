//! [`Tracking`]: every live block, and a leak report.

use crate::leak::{Leak, LeakReport};
use devpool_core::{Allocator, Block, Request, Result, StreamId};
use parking_lot::Mutex;
use std::backtrace::Backtrace;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

const SHARDS: usize = 16;

/// How many blocks a report lists by default.
const REPORT_TOP: usize = 10;

/// What a [`Tracking`] allocator calls when it is dropped with blocks still live.
pub type LeakCallback = Box<dyn Fn(&LeakReport) + Send + Sync>;

struct Entry {
    block: Block,
    since: Instant,
    backtrace: Option<Arc<Backtrace>>,
}

/// Keeps every live block of the allocator it wraps: when it was allocated and,
/// if enabled, where (a captured [`Backtrace`]).
///
/// [`leak_report`](Tracking::leak_report) lists what is live; when the adaptor is
/// dropped with blocks still live it prints that report to stderr, or hands it to the
/// callback set with [`on_leak`](Tracking::on_leak). Frees are checked by the wrapped
/// allocator, which gives the error for a block it does not know.
///
/// ```
/// use devpool_adaptors::Tracking;
/// use devpool_core::{direct, Allocator};
/// use devpool_testing::MockBackend;
/// use std::sync::{Arc, Mutex};
/// let seen = Arc::new(Mutex::new(0));
/// let s = seen.clone();
/// let a = Tracking::new(direct(MockBackend::shared()))
///     .on_leak(move |r| *s.lock().unwrap() = r.count);
/// let _forgotten = a.alloc(4096).unwrap();
/// assert_eq!(a.leak_report().count, 1);
/// drop(a);
/// assert_eq!(*seen.lock().unwrap(), 1);
/// ```
pub struct Tracking<A> {
    inner: A,
    name: String,
    shards: [Mutex<HashMap<u64, Entry>>; SHARDS],
    backtraces: bool,
    on_leak: Option<LeakCallback>,
}

impl<A: Allocator> Tracking<A> {
    /// Track the blocks of `inner`, without backtraces.
    pub fn new(inner: A) -> Self {
        Tracking {
            name: format!("tracking({})", inner.name()),
            inner,
            shards: std::array::from_fn(|_| Mutex::new(HashMap::new())),
            backtraces: false,
            on_leak: None,
        }
    }

    /// Capture a backtrace at every allocation (slow: for debugging leaks).
    pub fn with_backtraces(mut self, on: bool) -> Self {
        self.backtraces = on;
        self
    }

    /// Call `f` instead of printing to stderr when dropped with blocks still live.
    pub fn on_leak(mut self, f: impl Fn(&LeakReport) + Send + Sync + 'static) -> Self {
        self.on_leak = Some(Box::new(f));
        self
    }

    /// The wrapped allocator.
    pub fn inner(&self) -> &A {
        &self.inner
    }

    #[inline]
    fn shard(&self, ptr: u64) -> &Mutex<HashMap<u64, Entry>> {
        &self.shards[(ptr >> 8) as usize % SHARDS]
    }

    /// Every live block, in no particular order.
    pub fn live_blocks(&self) -> Vec<Block> {
        self.shards
            .iter()
            .flat_map(|s| s.lock().values().map(|e| e.block).collect::<Vec<_>>())
            .collect()
    }

    /// How many blocks are live.
    pub fn live_count(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }

    /// The live blocks, listing the ten largest.
    pub fn leak_report(&self) -> LeakReport {
        self.leak_report_top(REPORT_TOP)
    }

    /// The live blocks, listing the `top` largest.
    pub fn leak_report_top(&self, top: usize) -> LeakReport {
        let now = Instant::now();
        let mut all: Vec<Leak> = Vec::new();
        for s in &self.shards {
            all.extend(s.lock().values().map(|e| Leak {
                block: e.block,
                age: now.saturating_duration_since(e.since),
                backtrace: e.backtrace.clone(),
            }));
        }
        report_from(&self.name, all, top)
    }
}

impl<A: Allocator> Allocator for Tracking<A> {
    devpool_core::forward_allocator!(|a| &a.inner; backend, record_stream, stats, trim, parts, reuse);

    fn name(&self) -> &str {
        &self.name
    }

    fn allocate(&self, req: Request) -> Result<Block> {
        let block = self.inner.allocate(req)?;
        let entry = Entry {
            block,
            since: Instant::now(),
            backtrace: self
                .backtraces
                .then(|| Arc::new(Backtrace::force_capture())),
        };
        self.shard(block.ptr.0).lock().insert(block.ptr.0, entry);
        Ok(block)
    }

    fn deallocate(&self, block: Block, stream: StreamId) -> Result<()> {
        let shard = self.shard(block.ptr.0);
        // Taken out before the free: once freed, the address may be handed out again
        // and tracked anew by another thread.
        let taken = shard.lock().remove(&block.ptr.0);
        match self.inner.deallocate(block, stream) {
            Ok(()) => Ok(()),
            Err(e) => {
                if let Some(entry) = taken {
                    shard.lock().insert(block.ptr.0, entry);
                }
                Err(e)
            }
        }
    }
}

impl<A> Drop for Tracking<A> {
    fn drop(&mut self) {
        // `leak_report` needs `A: Allocator`; build the report from the shards here.
        let now = Instant::now();
        let mut all: Vec<Leak> = Vec::new();
        for s in &mut self.shards {
            all.extend(s.get_mut().drain().map(|(_, e)| Leak {
                block: e.block,
                age: now.saturating_duration_since(e.since),
                backtrace: e.backtrace,
            }));
        }
        if all.is_empty() {
            return;
        }
        let report = report_from(&self.name, all, REPORT_TOP);
        match &self.on_leak {
            Some(f) => f(&report),
            None => eprintln!("{report}"),
        }
    }
}

/// A report of `all`, listing the `top` largest.
fn report_from(name: &str, mut all: Vec<Leak>, top: usize) -> LeakReport {
    let count = all.len();
    let bytes = all.iter().map(|l| l.block.requested as u64).sum();
    let granted = all.iter().map(|l| l.block.size as u64).sum();
    all.sort_by(|a, b| {
        b.block
            .requested
            .cmp(&a.block.requested)
            .then(b.age.cmp(&a.age))
    });
    all.truncate(top);
    LeakReport {
        allocator: name.to_string(),
        count,
        bytes,
        granted,
        largest: all,
    }
}
