//! Fault injection, recovery and a 16-thread stress run, written once and applied to
//! every strategy (and to adaptor stacks over them).
//!
//! All runs use the host-backed mock: every live block carries a tag (a byte pattern
//! plus a unique id at both ends), written through the backend and read back before
//! the block is freed, so a block handed out twice, or overlapping another, shows up
//! as lost data.
mod common;

use common::{check_tag, write_tag};
use devpool_core::{Allocator, Backend, Block, Error, Request, Rng};
use devpool_testing::conformance::{assert_empty, check_blocks};
use devpool_testing::{FaultOn, MockBackend, MockConfig};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A constructor of the allocator under test.
type Make = dyn Fn(Arc<MockBackend>) -> Box<dyn Allocator> + Sync;

/// A live block and its tag.
#[derive(Clone, Copy)]
struct Tagged {
    block: Block,
    tag: u8,
    id: u64,
}

fn tag_new(mock: &MockBackend, block: Block, id: u64) -> Tagged {
    let tag = (id % 251) as u8 + 1;
    write_tag(mock, &block, tag, id);
    Tagged { block, tag, id }
}

fn check(mock: &MockBackend, t: &Tagged) {
    check_tag(mock, &t.block, t.tag, t.id);
}

/// The allocator's reserved bytes must be exactly what the backend holds for it.
fn assert_reserved_exact(a: &dyn Allocator, mock: &MockBackend, at: &str) {
    assert_eq!(
        a.stats().reserved_bytes.current,
        mock.counters().bytes_in_use.current,
        "reserved bytes differ from the backend's count {at}"
    );
}

fn free_all(a: &dyn Allocator, mock: &MockBackend, live: Vec<Tagged>) {
    for t in live {
        check(mock, &t);
        a.free(t.block).expect("free of a live block");
    }
}

/// Allocate `req`; on failure check that the error is a clean one (out of memory, a
/// backend error, or a size the strategy never serves) and that nothing live changed.
fn try_alloc(a: &dyn Allocator, req: Request, at: &str) -> Option<Block> {
    let before = a.stats();
    match a.allocate(req) {
        Ok(b) => Some(b),
        Err(e) => {
            assert!(
                e.is_oom() || matches!(e, Error::Backend(_) | Error::TooLarge { .. }),
                "{at}: unexpected error {e}"
            );
            let after = a.stats();
            assert_eq!(
                (after.live_blocks.current, after.live_bytes.current),
                (before.live_blocks.current, before.live_bytes.current),
                "{at}: a failed allocation changed what is live"
            );
            None
        }
    }
}

/// Injected backend failures, trims that make the strategy go back to the backend,
/// and a capacity cut midway: every failed allocation is a clean error that changes
/// nothing, live blocks keep their data, reserved bytes stay exact, and once the
/// faults stop the allocator serves again.
pub fn fault_injection(make: &Make, cfg: MockConfig) {
    const CAPACITY: u64 = 512 << 20;
    let mock = MockBackend::shared_with(cfg.host_backed().capacity(CAPACITY));
    let a = make(mock.clone());
    let mut rng = Rng::new(42);
    let mut live: Vec<Tagged> = Vec::new();
    let mut id = 0u64;
    for round in 0..400 {
        if round % 3 == 0 {
            mock.fail_nth(FaultOn::AnyAcquire, 1 + rng.below(3));
        }
        if round % 20 == 10 {
            // Cached memory goes back, so the next requests need the backend.
            a.trim().expect("trim");
        }
        match round {
            150 => mock.set_capacity(mock.counters().bytes_in_use.current + (8 << 20)),
            300 => mock.set_capacity(CAPACITY),
            _ => {}
        }
        if live.is_empty() || rng.below(3) != 0 {
            let align = if rng.below(4) == 0 { 4096 } else { 256 };
            let req = Request::new(rng.log_uniform(1, 8 << 20))
                .with_align(align)
                .on_stream(devpool_testing::MockBackend::stream(rng.below(2)));
            if let Some(b) = try_alloc(&*a, req, &format!("round {round}")) {
                id += 1;
                live.push(tag_new(&mock, b, id));
            }
        } else {
            let t = live.swap_remove(rng.below(live.len() as u64) as usize);
            check(&mock, &t);
            // Now and then freed on the other stream: it waits for an event.
            let s = if rng.below(4) == 0 {
                devpool_testing::MockBackend::stream(1 - t.block.stream.raw())
            } else {
                t.block.stream
            };
            a.deallocate(t.block, s).expect("free of a live block");
        }
        assert_reserved_exact(&*a, &mock, &format!("at round {round}"));
        assert_eq!(a.stats().live_blocks.current, live.len() as u64);
        if round % 50 == 0 {
            check_blocks(&live.iter().map(|t| t.block).collect::<Vec<_>>());
            live.iter().for_each(|t| check(&mock, t));
        }
    }
    assert!(
        mock.injected_faults() > 0,
        "no fault fired in 400 rounds: the rounds never reached the backend"
    );
    // Every call that takes memory fails: whatever is asked fails cleanly or comes
    // from what the allocator already holds.
    mock.fail_all(true);
    a.trim().expect("trim");
    let failed_before = mock.counters().failures;
    let injected_before = mock.injected_faults();
    for (i, size) in [64usize << 20, 8 << 20, 1 << 20, 4096]
        .into_iter()
        .enumerate()
    {
        if let Some(b) = try_alloc(&*a, Request::new(size), "with every acquisition failing") {
            id += 1;
            live.push(tag_new(&mock, b, id));
        }
        assert_reserved_exact(&*a, &mock, &format!("after request {i} while failing"));
    }
    assert!(
        mock.counters().failures > failed_before && mock.injected_faults() > injected_before,
        "the allocator went to the backend and was refused"
    );
    // Recovery: no more faults, and after a trim the device's memory serves again.
    mock.clear_faults();
    a.trim().expect("trim");
    assert_reserved_exact(&*a, &mock, "after trim");
    let room = CAPACITY - mock.counters().bytes_in_use.current;
    let mut fresh = Vec::new();
    while (fresh.len() as u64 + 1) * (4 << 20) <= room / 2 {
        id += 1;
        let b = a.alloc(4 << 20).expect("the allocator recovers");
        fresh.push(tag_new(&mock, b, id));
    }
    assert!(!fresh.is_empty());
    live.extend(fresh);
    check_blocks(&live.iter().map(|t| t.block).collect::<Vec<_>>());
    free_all(&*a, &mock, live);
    assert_empty(&*a, &mock);
}

/// The device shrinks to what the allocator holds: requests are served from what it
/// holds or fail cleanly (a size larger than the device names itself), and once the
/// blocks are freed and trimmed, that memory serves again.
pub fn shrink_then_recover(make: &Make, cfg: MockConfig) {
    let mock = MockBackend::shared_with(cfg.host_backed().capacity(1 << 30));
    let a = make(mock.clone());
    let mut rng = Rng::new(7);
    let mut live: Vec<Tagged> = Vec::new();
    let mut id = 0;
    for _ in 0..200 {
        id += 1;
        let b = a.alloc(rng.log_uniform(256, 2 << 20)).expect("fits");
        live.push(tag_new(&mock, b, id));
    }
    // Free every other block: the caching strategies keep some of it.
    let mut kept = Vec::new();
    let mut freed_sizes = Vec::new();
    for (i, t) in live.into_iter().enumerate() {
        if i % 2 == 0 {
            check(&mock, &t);
            freed_sizes.push(t.block.requested);
            a.free(t.block).unwrap();
        } else {
            kept.push(t);
        }
    }
    let held = mock.counters().bytes_in_use.current;
    mock.set_capacity(held);
    // Sizes just freed, and others: served from what is held, or refused cleanly.
    let mut served = 0;
    for (i, &size) in freed_sizes.iter().take(20).enumerate() {
        let size = if i % 2 == 0 {
            size
        } else {
            rng.log_uniform(1, 4 << 20)
        };
        if let Some(b) = try_alloc(&*a, Request::new(size), "on a full device") {
            id += 1;
            kept.push(tag_new(&mock, b, id));
            served += 1;
        }
        assert_reserved_exact(&*a, &mock, "on a full device");
        assert!(mock.counters().bytes_in_use.current <= held);
    }
    let too_big = 4 * held as usize;
    let e = a.alloc(too_big).expect_err("larger than the device");
    assert!(e.is_oom() || matches!(e, Error::TooLarge { .. }), "{e}");
    assert!(e.to_string().contains(&too_big.to_string()), "{e}");
    assert_eq!(a.stats().live_blocks.current, kept.len() as u64);
    kept.iter().for_each(|t| check(&mock, t));
    // Recovery: everything freed and trimmed, the same device serves again.
    free_all(&*a, &mock, kept);
    a.trim().unwrap();
    assert_reserved_exact(&*a, &mock, "after trim");
    assert_eq!(mock.counters().bytes_in_use.current, 0);
    let mut again = Vec::new();
    while (again.len() as u64 + 1) * (1 << 20) <= held / 4 {
        id += 1;
        let b = a
            .alloc(1 << 20)
            .unwrap_or_else(|e| panic!("the allocator recovers ({served} served while full): {e}"));
        again.push(tag_new(&mock, b, id));
    }
    assert!(!again.is_empty());
    free_all(&*a, &mock, again);
    mock.set_capacity(1 << 30);
    assert_empty(&*a, &mock);
}

/// 16 threads on 4 streams allocate, tag, check and free at random, with cross-stream
/// frees and `record_stream`; a shared map of live address ranges catches any block
/// handed out while another still covers its bytes.
pub fn stress_16_threads(make: &Make, cfg: MockConfig) {
    let mock = MockBackend::shared_with(cfg.host_backed().capacity(8 << 30));
    let a: Arc<dyn Allocator> = Arc::from(make(mock.clone()));
    let ranges: Arc<Mutex<BTreeMap<u64, Block>>> = Arc::default();
    let handles: Vec<_> = (0..16u64)
        .map(|t| {
            let (a, mock, ranges) = (a.clone(), mock.clone(), ranges.clone());
            std::thread::spawn(move || {
                let mut rng = Rng::new(1000 + t);
                let stream = devpool_testing::MockBackend::stream(t % 4);
                let mut live: Vec<Tagged> = Vec::new();
                for op in 0..1000u64 {
                    if live.len() < 12 && (live.is_empty() || rng.below(2) == 0) {
                        let size = if rng.below(50) == 0 {
                            rng.log_uniform(1 << 20, 8 << 20)
                        } else {
                            rng.log_uniform(1, 256 << 10)
                        };
                        let align = [256, 256, 512, 4096][rng.below(4) as usize];
                        let req = Request::new(size).with_align(align).on_stream(stream);
                        let b = a.allocate(req).expect("alloc");
                        assert!(b.ptr.is_aligned(align), "{b:?} not aligned to {align}");
                        claim(&ranges, b);
                        live.push(tag_new(&mock, b, (t << 32) | op));
                    } else {
                        let t = live.swap_remove(rng.below(live.len() as u64) as usize);
                        check(&mock, &t);
                        ranges.lock().remove(&t.block.ptr.0);
                        let other = devpool_testing::MockBackend::stream((stream.raw() + 1) % 4);
                        match rng.below(6) {
                            0 => a.deallocate(t.block, other),
                            1 => a
                                .record_stream(&t.block, other)
                                .and_then(|_| a.free(t.block)),
                            _ => a.free(t.block),
                        }
                        .expect("free of a live block");
                    }
                    if op % 200 == 0 {
                        live.iter().for_each(|t| check(&mock, t));
                    }
                }
                live
            })
        })
        .collect();
    let live: Vec<Tagged> = handles
        .into_iter()
        .flat_map(|h| h.join().expect("thread"))
        .collect();
    check_blocks(&live.iter().map(|t| t.block).collect::<Vec<_>>());
    assert_eq!(a.stats().live_blocks.current, live.len() as u64);
    free_all(&*a, &mock, live);
    assert_empty(&*a, &mock);
}

/// Record `b` as live; panic if it overlaps a live block.
fn claim(ranges: &Mutex<BTreeMap<u64, Block>>, b: Block) {
    let mut r = ranges.lock();
    if let Some((_, prev)) = r.range(..=b.ptr.0).next_back() {
        assert!(
            prev.ptr.0 + prev.size as u64 <= b.ptr.0,
            "{b:?} handed out inside live {prev:?}"
        );
    }
    if let Some((_, next)) = r.range(b.ptr.0..).next() {
        assert!(
            b.ptr.0 + b.size as u64 <= next.ptr.0,
            "{b:?} overlaps live {next:?}"
        );
    }
    r.insert(b.ptr.0, b);
}

/// One `#[test]` per function above for the allocator built by `$make` on mocks made
/// from `$cfg`.
macro_rules! strategy_suite {
    ($name:ident, $cfg:expr, $make:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            fn make(mock: Arc<MockBackend>) -> Box<dyn Allocator> {
                let f = $make;
                Box::new(f(mock))
            }
            #[test]
            fn fault_injection() {
                super::fault_injection(&make, $cfg)
            }
            #[test]
            fn shrink_then_recover() {
                super::shrink_then_recover(&make, $cfg)
            }
            #[test]
            fn stress_16_threads() {
                super::stress_16_threads(&make, $cfg)
            }
        }
    };
}

/// The mock as configured by default (regions counted as the driver takes them).
fn default_cfg() -> MockConfig {
    MockConfig::default()
}

/// The direct pool counts each region as the backend does, so the default mock
/// serves it too.
fn direct_cfg() -> MockConfig {
    MockConfig::default()
}

use devpool_adaptors::{Guarded, Limit, Logging, OomRetry, Statistics, Tracking};
use devpool_core::direct;

strategy_suite!(direct_pool, direct_cfg(), |m: Arc<MockBackend>| direct(m));
strategy_suite!(guarded_direct, direct_cfg(), |m: Arc<MockBackend>| {
    Guarded::new(direct(m))
});
strategy_suite!(stack_over_direct, direct_cfg(), |m: Arc<MockBackend>| {
    Statistics::new(Limit::new(
        Logging::new(Tracking::new(OomRetry::new(direct(m))), std::io::sink()),
        1 << 60,
    ))
});

strategy_suite!(slab, default_cfg(), |m: Arc<MockBackend>| {
    devpool_slab::slab(m, devpool_slab::SlabConfig::geometric(8, 16 << 20))
});
strategy_suite!(tlsf_virtual, default_cfg(), |m: Arc<MockBackend>| {
    devpool_tlsf::tlsf(m, devpool_tlsf::TlsfConfig::default())
});
strategy_suite!(tlsf_region, default_cfg().without_virtual(), |m: Arc<
    MockBackend,
>| {
    devpool_tlsf::tlsf(m, devpool_tlsf::TlsfConfig::default())
});
strategy_suite!(buddy_virtual, default_cfg(), |m: Arc<MockBackend>| {
    devpool_buddy::buddy(m, devpool_buddy::BuddyConfig::default())
});
strategy_suite!(buddy_region, default_cfg().without_virtual(), |m: Arc<
    MockBackend,
>| {
    devpool_buddy::buddy(m, devpool_buddy::BuddyConfig::default())
});
strategy_suite!(arena, default_cfg(), |m: Arc<MockBackend>| {
    devpool_arena::arena(m, devpool_arena::ArenaConfig::default())
});
strategy_suite!(hybrid_training, default_cfg(), |m: Arc<MockBackend>| {
    devpool_hybrid::hybrid(m, devpool_hybrid::HybridConfig::training())
});
strategy_suite!(hybrid_with_buddy, default_cfg(), |m: Arc<MockBackend>| {
    devpool_hybrid::hybrid(m, devpool_hybrid::HybridConfig::with_buddy())
});
strategy_suite!(stack_over_hybrid, default_cfg(), |m: Arc<MockBackend>| {
    Statistics::new(Limit::new(
        Logging::new(
            Tracking::new(OomRetry::new(devpool_hybrid::hybrid(
                m,
                devpool_hybrid::HybridConfig::training(),
            ))),
            std::io::sink(),
        ),
        1 << 60,
    ))
});
