//! A proptest model test of the ring allocator with streams and events: random
//! allocations on three streams, frees on the block's own stream or another,
//! `record_stream`, completion of a stream's work, and trims, on a mock whose events
//! complete only when the test says so. The model knows which blocks the device may
//! still touch (freed with an event on a stream whose work has not completed); no new
//! block may overlap one of those, nor a live block. After every step the pools'
//! invariants hold, the statistics add up and the bytes the pools hold are the
//! backend's bytes in use.
use devpool_core::{Allocator, Backend, Block, Request};
use devpool_ring::{ring, Ring, RingConfig, RingMode};
use devpool_testing::{MockBackend, MockConfig};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Debug)]
enum Op {
    Alloc {
        size: usize,
        align_log: u8,
        stream: u64,
    },
    Free {
        pick: usize,
        on: Option<u64>,
    },
    Record {
        pick: usize,
        stream: u64,
    },
    Complete {
        stream: u64,
    },
    Trim,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (1usize..(3 << 20), 8u8..=16, 0u64..3).prop_map(|(size, align_log, stream)| Op::Alloc { size, align_log, stream }),
        6 => (any::<usize>(), prop::option::weighted(0.3, 0u64..3)).prop_map(|(pick, on)| Op::Free { pick, on }),
        1 => (any::<usize>(), 0u64..3).prop_map(|(pick, stream)| Op::Record { pick, stream }),
        2 => (0u64..3).prop_map(|stream| Op::Complete { stream }),
        1 => Just(Op::Trim),
    ]
}

fn config() -> impl Strategy<Value = RingConfig> {
    (any::<bool>(), 1usize..12, 0usize..4).prop_map(|(virt, mib, pins)| {
        RingConfig::default()
            .mode(if virt {
                RingMode::Virtual
            } else {
                RingMode::Region
            })
            .capacity(mib << 20)
            .max_pinned([0, 1, 8, 4096][pins])
    })
}

struct Model {
    live: BTreeMap<u64, Block>,
    /// Freed blocks the device may still touch, with the streams it waits for.
    unsafe_: Vec<(Block, BTreeSet<u64>)>,
    recorded: BTreeMap<u64, BTreeSet<u64>>,
}

fn check(
    r: &Ring,
    mock: &MockBackend,
    m: &Model,
    allocs: u64,
    frees: u64,
) -> Result<(), TestCaseError> {
    let s = r.stats();
    prop_assert_eq!(
        s.live_bytes.current,
        m.live.values().map(|b| b.requested as u64).sum::<u64>()
    );
    prop_assert_eq!(
        s.allocated_bytes.current,
        m.live.values().map(|b| b.size as u64).sum::<u64>()
    );
    prop_assert_eq!(s.live_blocks.current, m.live.len() as u64);
    prop_assert_eq!((s.allocations, s.frees), (allocs, frees));
    prop_assert_eq!(
        s.reserved_bytes.current,
        mock.counters().bytes_in_use.current
    );
    for st in 0..3 {
        if let Some(p) = r.pool(devpool_testing::MockBackend::stream(st)) {
            p.verify().map_err(TestCaseError::fail)?;
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn ring_matches_model(cfg in config(), ops in proptest::collection::vec(op(), 1..150)) {
        let mock = MockBackend::shared_with(MockConfig::default().manual_events());
        let r = ring(mock.clone(), cfg);
        let mut m = Model { live: BTreeMap::new(), unsafe_: Vec::new(), recorded: BTreeMap::new() };
        let (mut allocs, mut frees) = (0u64, 0u64);
        for op in ops {
            // The device completes all its work when the backend frees a region or
            // unmaps pages (as cuMemFree and the CUDA backend's unmap do), and when
            // the allocator synchronizes (trim): the model then forgets every wait.
            let before = mock.counters();
            match op {
                Op::Alloc { size, align_log, stream } => {
                    let align = 1usize << align_log;
                    let b = r
                        .allocate(Request::new(size).with_align(align).on_stream(devpool_testing::MockBackend::stream(stream)))
                        .map_err(|e| TestCaseError::fail(format!("alloc {size}: {e}")))?;
                    prop_assert!(b.ptr.is_aligned(align) && b.size >= size);
                    let overlaps = |o: &Block| b.ptr.0 < o.ptr.0 + o.size as u64 && o.ptr.0 < b.ptr.0 + b.size as u64;
                    for o in m.live.values() {
                        prop_assert!(!overlaps(o), "{b:?} overlaps live {o:?}");
                    }
                    let after = mock.counters();
                    if after.region_frees + after.unmap_calls == before.region_frees + before.unmap_calls {
                        for (o, streams) in &m.unsafe_ {
                            prop_assert!(!overlaps(o), "{b:?} reuses {o:?}, which streams {streams:?} may still touch");
                        }
                    }
                    m.live.insert(b.ptr.0, b);
                    allocs += 1;
                }
                Op::Free { pick, on } => {
                    if m.live.is_empty() {
                        continue;
                    }
                    let key = *m.live.keys().nth(pick % m.live.len()).unwrap();
                    let b = m.live.remove(&key).unwrap();
                    let on = on.map_or(b.stream, devpool_testing::MockBackend::stream);
                    r.deallocate(b, on).map_err(|e| TestCaseError::fail(format!("free: {e}")))?;
                    prop_assert!(r.deallocate(b, on).is_err(), "double free caught");
                    let mut waits = m.recorded.remove(&b.ptr.0).unwrap_or_default();
                    waits.insert(on.raw());
                    waits.remove(&b.stream.raw());
                    if !waits.is_empty() {
                        m.unsafe_.push((b, waits));
                    }
                    frees += 1;
                }
                Op::Record { pick, stream } => {
                    if m.live.is_empty() {
                        continue;
                    }
                    let key = *m.live.keys().nth(pick % m.live.len()).unwrap();
                    let b = m.live[&key];
                    r.record_stream(&b, devpool_testing::MockBackend::stream(stream)).map_err(|e| TestCaseError::fail(format!("record: {e}")))?;
                    m.recorded.entry(b.ptr.0).or_default().insert(stream);
                }
                Op::Complete { stream } => {
                    mock.complete_stream(devpool_testing::MockBackend::stream(stream));
                    for (_, w) in &mut m.unsafe_ {
                        w.remove(&stream);
                    }
                }
                Op::Trim => {
                    r.trim().map_err(|e| TestCaseError::fail(format!("trim: {e}")))?;
                    m.unsafe_.clear();
                }
            }
            let after = mock.counters();
            if after.region_frees + after.unmap_calls > before.region_frees + before.unmap_calls {
                m.unsafe_.clear();
            }
            m.unsafe_.retain(|(_, w)| !w.is_empty());
            check(&r, &mock, &m, allocs, frees)?;
        }
        for (_, b) in std::mem::take(&mut m.live) {
            r.free(b).map_err(|e| TestCaseError::fail(format!("final free: {e}")))?;
            frees += 1;
        }
        check(&r, &mock, &m, allocs, frees)?;
        r.trim().map_err(|e| TestCaseError::fail(format!("trim: {e}")))?;
        prop_assert_eq!(r.stats().reserved_bytes.current, 0);
        prop_assert_eq!(mock.counters().bytes_in_use.current, 0);
        let rs = r.detail();
        prop_assert_eq!((rs.live_blocks, rs.freed_blocks, rs.waiting_blocks, rs.pinned_blocks), (0, 0, 0, 0));
    }
}
