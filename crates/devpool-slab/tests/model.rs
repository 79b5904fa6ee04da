//! A proptest model test of the slab pool: random allocations, frees and trims on
//! several configurations, checking after every step that
//! - each block got the smallest class that fits it and is aligned as asked, with
//!   the rounding waste of its class spacing;
//! - the per-class statistics add up to the pool's statistics and to the model;
//! - the backend holds exactly the slabs the classes report;
//! - after a trim no empty slab is left, and at the end nothing is held.
use devpool_core::{Backend, Block, Error, Pool, Request};
use devpool_slab::{SlabConfig, SlabPool};
use devpool_testing::conformance::{insert_apart, take_pick};
use devpool_testing::MockBackend;
use proptest::prelude::*;
use std::collections::BTreeMap;

#[derive(Clone, Debug)]
enum Op {
    Alloc { size: usize, align_log: u8 },
    Free { pick: usize },
    Trim,
}

fn op(max_log: u32) -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u32..=max_log, any::<u64>(), 8u8..=17).prop_map(move |(bits, r, align_log)| {
            // Log-uniform-ish sizes: a random number of bits, then random bits below.
            let size = if bits == 0 { 0 } else { (r as usize) & ((1usize << bits) - 1) };
            Op::Alloc { size, align_log }
        }),
        4 => any::<usize>().prop_map(|pick| Op::Free { pick }),
        1 => Just(Op::Trim),
    ]
}

/// The alignment every slot of a class of `size` bytes has on a backend whose
/// regions are aligned to `granularity`.
fn class_align(size: usize, granularity: usize) -> usize {
    (1usize << size.trailing_zeros()).min(granularity)
}

fn check_rounding(
    cfg: &SlabConfig,
    per_pow2: Option<usize>,
    g: usize,
    req: &Request,
    got: &Result<Block, Error>,
) -> Result<(), TestCaseError> {
    let sizes = cfg.class_sizes();
    let size = req.size.max(1);
    let align = req.align.max(256);
    let fits = |c: usize| c >= size && class_align(c, g) >= align;
    match (sizes.iter().copied().find(|&c| fits(c)), got) {
        (Some(want), Ok(b)) => {
            prop_assert_eq!(b.size, want, "smallest fitting class for {:?}", req);
            prop_assert!(b.ptr.is_aligned(align));
            if let (Some(per), 256) = (per_pow2, align) {
                // Geometric spacing: 256 B, or 1/per of the power of two below.
                let step = ((b.size - 1).next_power_of_two() / 2 / per).max(256);
                prop_assert!(b.size - size < step, "rounding {size} -> {}", b.size);
            }
        }
        (None, Err(Error::TooLarge { .. })) => prop_assert!(size > *sizes.last().unwrap()),
        (None, Err(Error::InvalidAlignment { .. })) => {}
        (want, got) => prop_assert!(false, "{req:?}: wanted {want:?}, got {got:?}"),
    }
    Ok(())
}

fn check_stats(
    pool: &SlabPool,
    mock: &MockBackend,
    model: &BTreeMap<u64, Block>,
) -> Result<(), TestCaseError> {
    let s = pool.stats();
    let classes = pool.detail();
    let live: u64 = classes.iter().map(|c| c.live_slots).sum();
    let granted: u64 = classes.iter().map(|c| c.live_slots * c.size as u64).sum();
    let requested: u64 = classes.iter().map(|c| c.requested_bytes).sum();
    let held: u64 = classes.iter().map(|c| c.slabs * c.slab_bytes as u64).sum();
    prop_assert_eq!(live, s.live_blocks.current);
    prop_assert_eq!(live, model.len() as u64);
    prop_assert_eq!(granted, s.allocated_bytes.current);
    prop_assert_eq!(requested, s.live_bytes.current);
    prop_assert_eq!(
        requested,
        model.values().map(|b| b.requested as u64).sum::<u64>()
    );
    prop_assert_eq!(held, s.reserved_bytes.current);
    prop_assert_eq!(held, mock.counters().bytes_in_use.current);
    for c in &classes {
        let in_model: Vec<&Block> = model.values().filter(|b| b.size == c.size).collect();
        prop_assert_eq!(c.live_slots, in_model.len() as u64);
        let waste: u64 = in_model.iter().map(|b| (b.size - b.requested) as u64).sum();
        prop_assert_eq!(c.waste_bytes, waste);
        prop_assert_eq!(
            c.live_slots + c.free_slots,
            c.slabs * c.slots_per_slab as u64
        );
        prop_assert!(c.empty_slabs <= c.slabs);
    }
    Ok(())
}

fn run(cfg: SlabConfig, per_pow2: Option<usize>, max_log: u32, cases: u32) {
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases,
        ..ProptestConfig::default()
    });
    runner
        .run(&proptest::collection::vec(op(max_log), 1..150), |ops| {
            let mock = MockBackend::shared();
            let g = mock.granularity();
            let pool = SlabPool::new(mock.clone(), cfg.clone());
            let mut model: BTreeMap<u64, Block> = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Alloc { size, align_log } => {
                        let req = Request::new(size).with_align(1 << align_log);
                        let got = pool.allocate(&req);
                        check_rounding(&cfg, per_pow2, g, &req, &got)?;
                        if let Ok(b) = got {
                            insert_apart(&mut model, b)?;
                        }
                    }
                    Op::Free { pick } => {
                        let Some(b) = take_pick(&mut model, pick) else {
                            continue;
                        };
                        pool.deallocate(&b)
                            .map_err(|e| TestCaseError::fail(format!("free: {e}")))?;
                        prop_assert!(pool.check(&b).is_err(), "a freed block is not live");
                    }
                    Op::Trim => {
                        pool.trim()
                            .map_err(|e| TestCaseError::fail(format!("trim: {e}")))?;
                        let empty: u64 = pool.detail().iter().map(|c| c.empty_slabs).sum();
                        prop_assert_eq!(empty, 0, "trim leaves no empty slab");
                    }
                }
                check_stats(&pool, &mock, &model)?;
                pool.verify()
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
            }
            for b in std::mem::take(&mut model).into_values() {
                pool.deallocate(&b)
                    .map_err(|e| TestCaseError::fail(format!("final free: {e}")))?;
            }
            pool.trim()
                .map_err(|e| TestCaseError::fail(format!("trim: {e}")))?;
            prop_assert_eq!(pool.stats().reserved_bytes.current, 0);
            prop_assert_eq!(mock.counters().bytes_in_use.current, 0);
            Ok(())
        })
        .unwrap();
}

#[test]
fn default_classes() {
    run(SlabConfig::default(), Some(4), 21, 96);
}

#[test]
fn fine_classes_small_slabs() {
    // 8 per power of two, 64 KiB slabs: many slabs per class, so slabs fill, empty
    // and move between the cache and the depot.
    run(
        SlabConfig::geometric(8, 4 << 20)
            .min_slab_bytes(64 << 10)
            .min_slots(2)
            .keep_empty(1),
        Some(8),
        16,
        96,
    );
}

#[test]
fn custom_list() {
    run(
        SlabConfig::custom([300, 1000, 4096, 5000, 100_000, 3 << 20]).min_slab_bytes(64 << 10),
        None,
        22,
        64,
    );
}

#[test]
fn fixed_blocks() {
    run(
        SlabConfig::fixed(3000).min_slab_bytes(16 << 10),
        None,
        13,
        64,
    );
}
