//! A proptest model test of the buddy pool itself, in every mode and rounding, with
//! small spans so that growth, trimming, quick lists and trim all get exercised.
//! After every step the pool's own invariants hold (`verify`), live blocks never
//! overlap, the counts match the model, and the reserved bytes match the backend's.

use devpool_buddy::{BuddyConfig, BuddyPool, VmConfig};
use devpool_core::{Backend, Block, Error, Pool, Request};
use devpool_testing::conformance::{overlapping_neighbour, take_pick};
use devpool_testing::{MockBackend, MockConfig};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Clone, Debug)]
enum Op {
    Alloc { size: usize, align_log: u32 },
    Free { pick: usize },
    DoubleFree { pick: usize },
    Trim,
    Coalesce,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u32..=26, any::<u64>(), 8u32..=16).prop_map(|(bits, r, align_log)| {
            let size = if bits == 0 { 0 } else { (r % (1 << bits)) as usize + (1 << (bits - 1)) };
            Op::Alloc { size, align_log }
        }),
        6 => any::<usize>().prop_map(|pick| Op::Free { pick }),
        1 => any::<usize>().prop_map(|pick| Op::DoubleFree { pick }),
        1 => Just(Op::Trim),
        1 => Just(Op::Coalesce),
    ]
}

fn config() -> impl Strategy<Value = BuddyConfig> {
    (
        any::<bool>(),
        any::<bool>(),
        0usize..4,
        22u32..=27,
        any::<bool>(),
    )
        .prop_map(|(virt, trim, quick, span_log, chunk)| {
            let cfg = if virt {
                BuddyConfig::virtual_ranges()
            } else {
                BuddyConfig::region()
            };
            cfg.trim_tail(trim)
                .quick_depth(quick)
                .span_size(1 << span_log)
                .pages(
                    VmConfig::default()
                        .cache(4 << 20, 1.0 / 16.0)
                        .window_ops(16)
                        .chunk_pages(if chunk { 4 } else { 1 }),
                )
        })
}

fn check(pool: &BuddyPool, mock: &MockBackend, model: &BTreeMap<u64, Block>) {
    pool.verify().expect("pool invariants");
    let s = pool.stats();
    let live: u64 = model.values().map(|b| b.requested as u64).sum();
    let granted: u64 = model.values().map(|b| b.size as u64).sum();
    assert_eq!(s.live_bytes.current, live);
    assert_eq!(s.allocated_bytes.current, granted);
    assert_eq!(s.live_blocks.current, model.len() as u64);
    assert_eq!(
        s.reserved_bytes.current,
        mock.counters().bytes_in_use.current
    );
    assert!(s.reserved_bytes.current >= granted);
    let d = pool.detail();
    assert_eq!(d.live_bytes, live);
    assert_eq!(d.rounding_bytes, granted - live);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn pool_matches_model(cfg in config(), ops in proptest::collection::vec(op(), 1..160)) {
        let mock = Arc::new(MockBackend::new(MockConfig::default().capacity(4 << 30)));
        let pool = BuddyPool::new(mock.clone(), cfg);
        let mut model: BTreeMap<u64, Block> = BTreeMap::new();
        let mut freed: Vec<Block> = Vec::new();
        for op in ops {
            match op {
                Op::Alloc { size, align_log } => {
                    let align = 1usize << align_log;
                    let b = match pool.allocate(&Request::new(size).with_align(align)) {
                        Ok(b) => b,
                        Err(Error::InvalidAlignment { .. }) => continue,
                        Err(e) if e.is_oom() => continue,
                        Err(e) => panic!("alloc {size} at {align}: {e}"),
                    };
                    prop_assert!(b.ptr.is_aligned(align));
                    prop_assert!(b.size >= size.max(1));
                    prop_assert!(b.handle >> 62 == 0, "handle fits in 62 bits");
                    let o = overlapping_neighbour(&model, &b);
                    prop_assert!(o.is_none(), "{b:?} overlaps {o:?}");
                    pool.check(&b).unwrap();
                    model.insert(b.ptr.0, b);
                }
                Op::Free { pick } => {
                    let Some(b) = take_pick(&mut model, pick) else {
                        continue;
                    };
                    pool.deallocate(&b).unwrap();
                    freed.push(b);
                }
                Op::DoubleFree { pick } => {
                    if freed.is_empty() {
                        continue;
                    }
                    let b = freed[pick % freed.len()];
                    let before = pool.stats();
                    let e = pool.deallocate(&b).expect_err("a freed block is refused");
                    let refused = matches!(e, Error::DoubleFree { .. } | Error::NotOwned { .. });
                    prop_assert!(refused, "{}", e);
                    prop_assert!(pool.check(&b).is_err());
                    let after = pool.stats();
                    prop_assert_eq!(before.live_blocks, after.live_blocks);
                    prop_assert_eq!(before.frees, after.frees);
                }
                Op::Trim => {
                    pool.trim().unwrap();
                }
                Op::Coalesce => pool.coalesce(),
            }
            check(&pool, &mock, &model);
        }
        for (_, b) in std::mem::take(&mut model) {
            pool.deallocate(&b).unwrap();
        }
        pool.trim().unwrap();
        check(&pool, &mock, &model);
        prop_assert_eq!(pool.stats().reserved_bytes.current, 0);
        prop_assert_eq!(mock.counters().bytes_in_use.current, 0);
        prop_assert!(pool.detail().spans.is_empty());
    }
}
