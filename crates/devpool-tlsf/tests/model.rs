//! A proptest model test of one pool: random allocations (sizes, alignments), frees
//! and trims against a map of live blocks, checking after every step that blocks do
//! not overlap, are aligned, that the statistics add up, that the pool's own links,
//! pages and counts are consistent and that the bytes it says it holds are the
//! bytes the backend has handed out. At the end everything is freed: each span is
//! one free block again, and trim gives everything back.
use devpool_core::{Backend, Block, Pool, Request};
use devpool_testing::conformance::{insert_apart, take_pick};
use devpool_testing::MockBackend;
use devpool_tlsf::{TlsfConfig, TlsfMode, TlsfPool};
use proptest::prelude::*;
use std::collections::BTreeMap;

#[derive(Clone, Debug)]
enum Op {
    Alloc { size: usize, align_log: u8 },
    Free { pick: usize },
    Trim,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u32..=24, 0usize..(1 << 24), 8u8..=21).prop_map(|(shift, r, align_log)| Op::Alloc {
            size: r >> (24 - shift),
            align_log,
        }),
        5 => any::<usize>().prop_map(|pick| Op::Free { pick }),
        1 => Just(Op::Trim),
    ]
}

fn config() -> impl Strategy<Value = TlsfConfig> {
    (
        any::<bool>(),
        1usize..6,
        0usize..3,
        1u64..64,
        8u32..=13,
        prop_oneof![Just(0u64), Just(devpool_tlsf::BURST_ON)],
    )
        .prop_map(|(virt, batch, floor, window, granule_log, burst)| {
            let cfg = TlsfConfig::default()
                .mode(if virt {
                    TlsfMode::Virtual
                } else {
                    TlsfMode::Region
                })
                .granule(1 << granule_log)
                // Small ranges and chunks, so that pools need several of them.
                .range_size(48 << 20)
                .region_chunk(32 << 20)
                .map_batch_pages(batch)
                .cache(floor << 21, 0.01)
                .window_ops(window);
            let pages = cfg.pages.clone().burst_ops(burst);
            cfg.pages(pages)
        })
}

fn check(
    pool: &TlsfPool,
    mock: &MockBackend,
    model: &BTreeMap<u64, Block>,
) -> Result<(), TestCaseError> {
    pool.verify().map_err(TestCaseError::fail)?;
    let s = pool.stats();
    prop_assert_eq!(
        s.live_bytes.current,
        model.values().map(|b| b.requested as u64).sum::<u64>()
    );
    prop_assert_eq!(
        s.allocated_bytes.current,
        model.values().map(|b| b.size as u64).sum::<u64>()
    );
    prop_assert_eq!(s.live_blocks.current, model.len() as u64);
    prop_assert_eq!(
        s.reserved_bytes.current,
        mock.counters().bytes_in_use.current
    );
    prop_assert!(s.reserved_bytes.current >= s.allocated_bytes.current);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn pool_matches_model(cfg in config(), ops in proptest::collection::vec(op(), 1..150)) {
        let mock = MockBackend::shared();
        let pool = TlsfPool::new(mock.clone(), cfg);
        let page = mock.granularity();
        let mut model: BTreeMap<u64, Block> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Alloc { size, align_log } => {
                    let req = Request::new(size).with_align(1 << align_log);
                    let align = req.align;
                    let b = match pool.allocate(&req) {
                        Ok(b) => b,
                        Err(e) => {
                            prop_assert!(align > page, "alloc {size} align {align}: {e}");
                            continue;
                        }
                    };
                    prop_assert!(align <= page);
                    prop_assert!(b.ptr.is_aligned(align.max(256)), "{b:?} align {align}");
                    prop_assert!(b.size >= size.max(1));
                    prop_assert_eq!(b.handle >> 62, 0, "top two handle bits are clear");
                    insert_apart(&mut model, b)?;
                }
                Op::Free { pick } => {
                    let Some(b) = take_pick(&mut model, pick) else {
                        continue;
                    };
                    pool.deallocate(&b).map_err(|e| TestCaseError::fail(format!("free: {e}")))?;
                    prop_assert!(pool.deallocate(&b).is_err(), "double free caught");
                }
                Op::Trim => {
                    pool.trim().map_err(|e| TestCaseError::fail(format!("trim: {e}")))?;
                    prop_assert_eq!(pool.detail().pages.free_chunk_pages, 0);
                }
            }
            check(&pool, &mock, &model)?;
        }
        for (_, b) in std::mem::take(&mut model) {
            pool.deallocate(&b).map_err(|e| TestCaseError::fail(format!("final free: {e}")))?;
        }
        check(&pool, &mock, &model)?;
        let d = pool.detail();
        prop_assert_eq!(d.free_blocks, d.spans, "each span is one free block: {:?}", d);
        prop_assert_eq!(d.free_bytes, d.span_bytes);
        prop_assert_eq!(d.live_blocks, 0);
        pool.trim().map_err(|e| TestCaseError::fail(format!("trim: {e}")))?;
        prop_assert_eq!(pool.stats().reserved_bytes.current, 0);
        prop_assert_eq!(mock.counters().bytes_in_use.current, 0);
        let d = pool.detail();
        prop_assert!(d.spans <= 1 && d.pages.mapped_pages == 0, "at most one empty range stays: {:?}", d);
        if !pool.mode().eq(&TlsfMode::Virtual) {
            prop_assert_eq!(d.spans, 0);
        }
    }
}
