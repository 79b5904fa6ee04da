//! `OomRetry`: the callback, the trim and the retries, and what the final error says.
mod common;

use common::CountTrims;
use devpool_adaptors::OomRetry;
use devpool_core::{
    direct, Allocator, Backend, BackendError, Block, Error, Pool, Request, Result, Stats, StreamId,
};
use devpool_testing::{MockBackend, MockConfig};
use parking_lot::Mutex;
use std::sync::Arc;

fn small(bytes: u64) -> Arc<MockBackend> {
    MockBackend::shared_with(MockConfig::default().capacity(bytes))
}

#[test]
fn callback_raises_capacity_and_the_retry_succeeds() {
    let mock = small(64 << 20);
    let m = mock.clone();
    let calls: Arc<Mutex<Vec<(u32, bool)>>> = Arc::default();
    let c = calls.clone();
    let a = OomRetry::new(CountTrims::new(direct(mock.clone()))).on_oom(move |e, attempt| {
        c.lock().push((attempt, e.is_oom()));
        m.set_capacity(256 << 20);
        true
    });
    let keep = a.alloc(32 << 20).unwrap();
    let b = a
        .alloc(100 << 20)
        .expect("fits once the capacity is raised");
    assert_eq!(*calls.lock(), vec![(1, true)]);
    assert_eq!(a.inner().trims(), 1, "the wrapped allocator was trimmed");
    assert_eq!((a.retries(), a.recovered()), (1, 1));
    a.free(b).unwrap();
    a.free(keep).unwrap();
}

#[test]
fn trim_frees_the_cache_that_blocked_the_request() {
    let mock = small(16 << 20);
    let a = OomRetry::new(CountTrims::new(NoRetry::new(mock.clone())));
    let blocks: Vec<Block> = (0..3).map(|_| a.alloc(4 << 20).unwrap()).collect();
    for b in blocks {
        a.free(b).unwrap();
    }
    // 12 MiB cached in 4 MiB pieces: 8 MiB cannot be served until they are trimmed.
    let b = a.alloc(8 << 20).expect("served after the trim");
    assert_eq!(a.inner().trims(), 1);
    assert_eq!(a.recovered(), 1);
    a.free(b).unwrap();
}

/// A single caching pool used as an allocator, with no retry of its own: it fails
/// as soon as the backend does, cache or not.
struct NoRetry(devpool_testing::fixtures::CachingPool, Arc<dyn Backend>);

impl NoRetry {
    fn new(mock: Arc<MockBackend>) -> Self {
        let b: Arc<dyn Backend> = mock;
        NoRetry(devpool_testing::fixtures::CachingPool::new(b.clone()), b)
    }
}

impl Allocator for NoRetry {
    fn name(&self) -> &str {
        "no-retry"
    }
    fn backend(&self) -> &Arc<dyn Backend> {
        &self.1
    }
    fn allocate(&self, req: Request) -> Result<Block> {
        self.0.allocate(&req)
    }
    fn deallocate(&self, block: Block, _: StreamId) -> Result<()> {
        self.0.deallocate(&block)
    }
    fn record_stream(&self, block: &Block, _: StreamId) -> Result<()> {
        self.0.check(block)
    }
    fn stats(&self) -> Stats {
        self.0.stats()
    }
    fn trim(&self) -> Result<usize> {
        self.0.trim()
    }
}

#[test]
fn without_callback_it_retries_once() {
    let mock = small(64 << 20);
    let a = OomRetry::new(CountTrims::new(direct(mock)));
    let e = a.alloc(128 << 20).unwrap_err();
    assert!(e.is_oom());
    assert_eq!((a.inner().trims(), a.retries(), a.recovered()), (1, 1, 0));
}

#[test]
fn callback_saying_no_stops_at_once() {
    let a = OomRetry::new(CountTrims::new(direct(small(64 << 20)))).on_oom(|_, _| false);
    assert!(a.alloc(128 << 20).unwrap_err().is_oom());
    assert_eq!((a.inner().trims(), a.retries()), (0, 0));
}

#[test]
fn retries_are_capped() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let c = calls.clone();
    let a = OomRetry::new(CountTrims::new(direct(small(64 << 20))))
        .on_oom(move |_, n| {
            c.lock().push(n);
            true
        })
        .with_max_attempts(5);
    let e = a.alloc(128 << 20).unwrap_err();
    assert_eq!(*calls.lock(), vec![1, 2, 3, 4, 5]);
    assert_eq!((a.inner().trims(), a.retries()), (5, 5));
    assert!(e.to_string().contains("5 retries"), "{e}");
}

#[test]
fn other_errors_pass_straight_through() {
    let calls = Arc::new(Mutex::new(0));
    let c = calls.clone();
    let a = OomRetry::new(direct(MockBackend::shared())).on_oom(move |_, _| {
        *c.lock() += 1;
        true
    });
    let e = a.allocate(Request::new(10).with_align(48)).unwrap_err();
    assert!(matches!(e, Error::InvalidAlignment { align: 48 }));
    assert_eq!(*calls.lock(), 0);
    assert_eq!(a.name(), "oom-retry(direct)");
}

#[test]
fn final_error_says_where_the_memory_is() {
    let mock = small(64 << 20);
    let held = mock.region_bytes(5 << 20).unwrap() as u64;
    let a = OomRetry::new(direct(mock));
    let keep = a.alloc(5 << 20).unwrap();
    let e = a.alloc(100 << 20).unwrap_err();
    let Error::OutOfMemory(info) = &e else {
        panic!("{e}")
    };
    assert_eq!(info.requested, 100 << 20);
    assert_eq!(info.live, 5 << 20);
    assert_eq!(info.reserved, held, "5 MiB as the driver takes it");
    assert_eq!(info.backend_total, 64 << 20);
    assert_eq!(info.backend_free, (64 << 20) - held);
    assert!(info.note.contains("1 retry"), "{}", info.note);
    assert!(info.note.contains("cached"), "{}", info.note);
    assert!(
        info.note.contains("allocator direct"),
        "core's note is kept: {}",
        info.note
    );
    let msg = e.to_string();
    let free = devpool_core::human_bytes((64 << 20) - held);
    for want in ["100.00 MiB", "5.00 MiB", "64.00 MiB", free.as_str()] {
        assert!(msg.contains(want), "{msg} should say {want}");
    }
    a.free(keep).unwrap();
}

/// Fails every allocation with a bare backend error, as a thin allocator would.
struct Bare(Arc<dyn Backend>);

impl Allocator for Bare {
    fn name(&self) -> &str {
        "bare"
    }
    fn backend(&self) -> &Arc<dyn Backend> {
        &self.0
    }
    fn allocate(&self, req: Request) -> Result<Block> {
        Err(BackendError::OutOfMemory {
            requested: req.size,
            free: 123,
            total: 456,
        }
        .into())
    }
    fn deallocate(&self, block: Block, _: StreamId) -> Result<()> {
        Err(Error::NotOwned { ptr: block.ptr })
    }
    fn record_stream(&self, block: &Block, _: StreamId) -> Result<()> {
        Err(Error::NotOwned { ptr: block.ptr })
    }
    fn stats(&self) -> Stats {
        Stats::default()
    }
    fn trim(&self) -> Result<usize> {
        Ok(0)
    }
}

#[test]
fn bare_backend_errors_become_full_reports() {
    let a = OomRetry::new(Bare(MockBackend::shared()));
    let e = a.alloc(1000).unwrap_err();
    let Error::OutOfMemory(info) = e else {
        panic!("{e}")
    };
    assert_eq!(
        (info.requested, info.backend_free, info.backend_total),
        (1000, 123, 456)
    );
    assert!(info.note.contains("allocator bare"), "{}", info.note);
}
