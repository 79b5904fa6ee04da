//! After everything is freed, each span is one free block of its top order: every
//! split was merged back.

use devpool_buddy::{BuddyConfig, BuddyDetail, BuddyPool};
use devpool_core::{Block, Pool, Request};
use devpool_testing::conformance::Rng;
use devpool_testing::MockBackend;

/// Allocate and free at random, leaving everything freed; returns the pool.
fn churn(cfg: BuddyConfig, seed: u64) -> BuddyPool {
    let pool = BuddyPool::new(MockBackend::shared(), cfg);
    let mut rng = Rng::new(seed);
    let mut live: Vec<Block> = Vec::new();
    for _ in 0..3000 {
        if live.is_empty() || rng.below(5) < 3 {
            let size = rng.log_uniform(1, 96 << 20);
            let align = 256 << rng.below(8);
            live.push(
                pool.allocate(&Request::new(size).with_align(align))
                    .unwrap(),
            );
        } else {
            let b = live.swap_remove(rng.below(live.len() as u64) as usize);
            pool.deallocate(&b).unwrap();
        }
    }
    for b in live {
        pool.deallocate(&b).unwrap();
    }
    pool.verify().unwrap();
    pool
}

fn assert_whole(d: &BuddyDetail, what: &str) {
    assert!(!d.spans.is_empty(), "{what}: the churn made spans");
    assert!(
        d.spans.iter().all(|a| a.whole_free),
        "{what}: an span is not one free block: {d:?}"
    );
    // Exactly one free block per span, of the span's order.
    let free: Vec<(u32, u64)> = d
        .orders
        .iter()
        .filter(|o| o.free + o.quick > 0)
        .map(|o| (o.order, o.free + o.quick))
        .collect();
    let mut want: Vec<(u32, u64)> = Vec::new();
    for a in &d.spans {
        match want.iter_mut().find(|(o, _)| *o == a.order) {
            Some((_, n)) => *n += 1,
            None => want.push((a.order, 1)),
        }
    }
    want.sort();
    assert_eq!(free, want, "{what}: free blocks by order");
    assert!(d.orders.iter().all(|o| o.live == 0 && o.quick == 0));
    assert_eq!((d.live_bytes, d.granted_bytes), (0, 0));
}

fn configs() -> Vec<(&'static str, BuddyConfig)> {
    let small = |c: BuddyConfig| c.span_size(64 << 20);
    vec![
        ("region", small(BuddyConfig::region())),
        (
            "region, whole blocks",
            small(BuddyConfig::region().trim_tail(false)),
        ),
        ("virtual", small(BuddyConfig::virtual_ranges())),
        (
            "virtual, whole blocks",
            small(BuddyConfig::virtual_ranges().trim_tail(false)),
        ),
    ]
}

#[test]
fn without_quick_lists_everything_merges_at_once() {
    for (what, cfg) in configs() {
        let pool = churn(cfg.quick_depth(0), 5);
        assert_whole(&pool.detail(), what);
    }
}

#[test]
fn with_quick_lists_everything_merges_after_coalesce() {
    for (what, cfg) in configs() {
        let pool = churn(cfg.quick_depth(8), 6);
        let d = pool.detail();
        assert!(
            d.orders.iter().any(|o| o.quick > 0),
            "{what}: some blocks wait unmerged"
        );
        pool.coalesce();
        pool.verify().unwrap();
        assert_whole(&pool.detail(), what);
    }
}

#[test]
fn trim_gives_every_span_back() {
    for (what, cfg) in configs() {
        let pool = churn(cfg, 7);
        let held = pool.stats().reserved_bytes.current;
        let released = pool.trim().unwrap();
        assert_eq!(
            released as u64, held,
            "{what}: trim reports what it gave back"
        );
        assert!(pool.detail().spans.is_empty(), "{what}");
        assert_eq!(pool.stats().reserved_bytes.current, 0, "{what}");
    }
}
