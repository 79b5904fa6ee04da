//! `Limit`: the cap holds under concurrency, claims are given back, errors say why.
mod common;

use devpool_adaptors::{Limit, Statistics};
use devpool_core::{
    direct, Allocator, Backend, Block, Error, Request, Result, Rng, Stats, StreamId,
};
use devpool_testing::{MockBackend, MockConfig};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

#[test]
fn never_over_admits_under_eight_threads() {
    let cap: u64 = 4 << 20;
    // The statistics inside the limit see every block the limit lets through, and
    // their peak is exact: it must never pass the cap.
    let a = Arc::new(Limit::new(
        Statistics::new(direct(MockBackend::shared())),
        cap,
    ));
    let refused = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..8u64)
        .map(|t| {
            let (a, refused) = (a.clone(), refused.clone());
            std::thread::spawn(move || {
                let mut rng = Rng::new(100 + t);
                let mut live: Vec<Block> = Vec::new();
                for _ in 0..3000 {
                    if live.len() < 6 && rng.below(3) != 0 {
                        let req = Request::new(rng.log_uniform(4 << 10, 2 << 20))
                            .on_stream(devpool_testing::MockBackend::stream(t % 2));
                        match a.allocate(req) {
                            Ok(b) => live.push(b),
                            Err(Error::Limit(_)) => {
                                refused.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => panic!("unexpected {e}"),
                        }
                        assert!(a.live() <= cap);
                    } else if !live.is_empty() {
                        let b = live.swap_remove(rng.below(live.len() as u64) as usize);
                        a.free(b).unwrap();
                    }
                }
                for b in live {
                    a.free(b).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let s = a.inner().snapshot();
    assert!(
        refused.load(Ordering::Relaxed) > 0,
        "the cap was reached: the test means something"
    );
    assert!(
        s.granted_bytes.peak <= cap,
        "granted live bytes reached {} over the cap {cap}",
        s.granted_bytes.peak
    );
    assert!(s.granted_bytes.peak > cap / 2, "the threads filled the cap");
    assert_eq!(a.live(), 0, "every claim was given back");
    assert_eq!(s.granted_bytes.current, 0);
}

/// An allocator that grants far more than asked (1 MiB units), like a coarse
/// strategy, to exercise the second claim.
struct Coarse<A>(A);

impl<A: Allocator> Allocator for Coarse<A> {
    fn name(&self) -> &str {
        "coarse"
    }
    fn backend(&self) -> &Arc<dyn Backend> {
        self.0.backend()
    }
    fn allocate(&self, req: Request) -> Result<Block> {
        let size =
            devpool_core::align_up(req.effective_size(), 1 << 20).ok_or(Error::TooLarge {
                size: req.size,
                max: 0,
            })?;
        let mut b = self.0.allocate(Request { size, ..req })?;
        b.requested = req.size;
        Ok(b)
    }
    fn deallocate(&self, mut block: Block, stream: StreamId) -> Result<()> {
        block.requested = block.size;
        self.0.deallocate(block, stream)
    }
    fn record_stream(&self, block: &Block, stream: StreamId) -> Result<()> {
        self.0.record_stream(block, stream)
    }
    fn stats(&self) -> Stats {
        self.0.stats()
    }
    fn trim(&self) -> Result<usize> {
        self.0.trim()
    }
}

#[test]
fn rounding_past_the_cap_is_refused_and_given_back() {
    let mock = MockBackend::shared();
    let a = Limit::new(Coarse(direct(mock.clone())), 3 << 20);
    let blocks: Vec<Block> = (0..3).map(|_| a.alloc(1).unwrap()).collect();
    assert_eq!(a.live(), 3 << 20);
    let e = a.alloc(1).unwrap_err();
    assert!(matches!(e, Error::Limit(_)), "{e}");
    assert_eq!(a.live(), 3 << 20, "the refused claim was given back");
    assert_eq!(
        a.stats().live_blocks.current,
        3,
        "the block granted past the cap went back to the inner allocator"
    );
    assert_eq!(
        mock.counters().bytes_in_use.current,
        3 * mock.region_bytes(1 << 20).unwrap() as u64,
        "three regions of 1 MiB, as the driver takes them"
    );
    for b in blocks {
        a.free(b).unwrap();
    }
    assert_eq!(a.live(), 0);
}

#[test]
fn error_names_request_live_and_cap() {
    let a = Limit::new(direct(MockBackend::shared()), 10_000);
    let b = a.alloc(6000).unwrap();
    let e = a.alloc(5000).unwrap_err();
    let msg = e.to_string();
    for want in ["5000", &b.size.to_string(), "10000"] {
        assert!(msg.contains(want), "{msg} should say {want}");
    }
    a.free(b).unwrap();
    assert!(a.alloc(5000).is_ok());
}

#[test]
fn inner_failures_give_the_claim_back() {
    let mock = MockBackend::shared_with(MockConfig::default().capacity(8 << 20));
    let a = Limit::new(direct(mock), 1 << 40);
    let b = a.alloc(4 << 20).unwrap();
    let before = a.live();
    assert!(a.alloc(16 << 20).unwrap_err().is_oom());
    assert!(matches!(
        a.allocate(Request::new(10).with_align(3)),
        Err(Error::InvalidAlignment { .. })
    ));
    assert!(a.alloc(usize::MAX).is_err());
    assert_eq!(a.live(), before);
    // Rejected frees give nothing back either.
    assert!(a.free(Block { size: 1 << 30, ..b }).is_err());
    assert_eq!(a.live(), before);
    a.free(b).unwrap();
    assert_eq!(a.live(), 0);
    assert_eq!(a.name(), "limit(direct)");
}

#[test]
fn composes_with_reuse() {
    // A caching pool below the limit: frees go to its cache, the cap counts live only.
    let a = Limit::new(common::reuse(MockBackend::shared()), 1 << 20);
    for _ in 0..100 {
        let b = a.alloc(900 << 10).unwrap();
        a.free(b).unwrap();
    }
    assert_eq!(a.live(), 0);
    assert!(a.trim().unwrap() > 0, "trim is forwarded to the cache");
}
