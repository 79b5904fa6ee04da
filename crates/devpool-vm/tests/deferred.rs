//! Deferred releases: a block freed and taken back at once skips the page work, and
//! a layer that defers ends every call in the state of one that does not.
use devpool_core::{Backend, StreamId};
use devpool_testing::{MockBackend, MockConfig};
use devpool_vm::{PageLayer, RangeId, VmConfig};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::Arc;

const S: StreamId = StreamId::DEFAULT;

fn layer(mock: &Arc<MockBackend>, cfg: VmConfig) -> (PageLayer, RangeId, u64) {
    let mut vm = PageLayer::new(mock.clone(), cfg);
    let page = vm.page_size();
    let r = vm.reserve(64 * page as usize, page as usize).unwrap();
    (vm, r, page)
}

/// What a placement does for a block: the cheap call first, then the full one.
fn acquire(vm: &mut PageLayer, r: RangeId, block: (u64, u64), room: (u64, u64)) {
    if !vm.acquire_mapped(r, block) {
        vm.acquire(r, block, room).unwrap();
    }
}

#[test]
fn a_block_freed_and_taken_back_skips_the_page_work() {
    let mock = MockBackend::shared();
    let (mut vm, r, page) = layer(&mock, VmConfig::default());
    let b = vm.base(r);
    let room = (b, b + 64 * page);
    let a = (b, b + 3 * page + 100);
    let other = (a.1, a.1 + page);
    acquire(&mut vm, r, a, room);
    acquire(&mut vm, r, other, (a.1, room.1));
    // The first release on a stream is never deferred (the stream joins the list).
    vm.release_deferred(r, a, S);
    vm.verify([(r, other.0, other.1)]).unwrap();
    acquire(&mut vm, r, a, room);
    let calls = mock.counters().memory_calls();
    for _ in 0..1000 {
        vm.release_deferred(r, a, S);
        // Deferred: the pages still count the block (verify refuses to read them).
        assert!(vm.verify([(r, other.0, other.1)]).is_err());
        assert!(vm.acquire_mapped(r, a), "the same bytes come back at once");
        vm.verify([(r, a.0, a.1), (r, other.0, other.1)]).unwrap();
    }
    assert_eq!(mock.counters().memory_calls(), calls, "no backend call");
    // Any other call finishes the release first, as if it had not waited.
    vm.release_deferred(r, a, S);
    acquire(&mut vm, r, (b, b + page), room);
    vm.verify([(r, b, b + page), (r, other.0, other.1)])
        .unwrap();
    assert_eq!(
        vm.policy().allocated(),
        (page + other.1 - other.0),
        "each block counted once"
    );
}

#[test]
fn a_release_at_the_end_of_a_window_is_not_deferred() {
    let mock = MockBackend::shared();
    let (mut vm, r, page) = layer(&mock, VmConfig::default().window_ops(4));
    let b = vm.base(r);
    let a = (b, b + page);
    acquire(&mut vm, r, a, (b, b + 64 * page));
    vm.release(r, a, S); // op 2 (the stream joins the list)
    acquire(&mut vm, r, a, (b, b + 64 * page)); // op 3
    vm.release_deferred(r, a, S); // op 4 ends the window: done at once
    vm.verify([]).unwrap();
    acquire(&mut vm, r, a, (b, b + 64 * page)); // op 1 of the next window
    vm.release_deferred(r, a, S); // op 2: deferred
    assert!(vm.verify([]).is_err());
    acquire(&mut vm, r, a, (b, b + 64 * page)); // op 3: taken back
    vm.release_deferred(r, a, S); // op 4 ends the window: done at once
    vm.verify([]).unwrap();
}

#[derive(Clone, Debug)]
enum Op {
    /// A block at this offset (in 256-byte units) of this length.
    Acquire(u32, u32),
    /// Release the n-th live block.
    Release(usize),
    /// Take the last released block's bytes again.
    Again,
    /// The stream passes its queued work.
    Complete,
    /// Trim without waiting.
    TrimNowait,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u32..(56 * 8192), 1u32..(6 * 8192)).prop_map(|(a, l)| Op::Acquire(a, l)),
        3 => any::<usize>().prop_map(Op::Release),
        3 => Just(Op::Again),
        1 => Just(Op::Complete),
        1 => Just(Op::TrimNowait),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn a_deferring_layer_ends_every_call_as_one_that_does_not(
        ops in proptest::collection::vec(op(), 1..160),
        batch in 1usize..6,
        floor in 0usize..4,
        window in 3u64..24,
        burst in prop_oneof![Just(0u64), Just(devpool_vm::BURST_ON)],
    ) {
        let make = || {
            let mock = MockBackend::shared_with(MockConfig::default().manual_events());
            let s = mock.create_stream().unwrap();
            let page = mock.granularity();
            let cfg = VmConfig::default()
                .map_batch_pages(batch)
                .chunk_pages(4)
                .cache(floor * page, 0.0)
                .window_ops(window)
                .burst_ops(burst);
            let (vm, r, _) = layer(&mock, cfg);
            (mock, vm, r, s)
        };
        let (m1, mut plain, r1, s1) = make();
        let (m2, mut lazy, r2, s2) = make();
        let page = plain.page_size();
        let (base, end) = (plain.base(r1), plain.base(r1) + 64 * page);
        prop_assert_eq!(base, lazy.base(r2));
        let mut live: BTreeMap<u64, u64> = BTreeMap::new();
        let mut last: Option<(u64, u64)> = None;
        // Whether the deferring layer may hold a deferred release: from a release
        // until its next call.
        let mut deferred = false;
        for op in ops {
            let block = match op {
                Op::Acquire(a, l) => {
                    let lo = base + u64::from(a) * 256;
                    Some((lo, (lo + u64::from(l) * 256).min(end)))
                }
                Op::Again => last,
                _ => None,
            };
            match op {
                Op::Acquire(..) | Op::Again => {
                    let Some((lo, hi)) = block else { continue };
                    if lo >= hi {
                        continue;
                    }
                    let prev_end = live.range(..=lo).next_back().map_or(base, |(_, &e)| e);
                    let next = live.range(lo..).next().map_or(end, |(&b, _)| b);
                    if prev_end > lo || next < hi {
                        continue;
                    }
                    acquire(&mut plain, r1, (lo, hi), (prev_end, next));
                    acquire(&mut lazy, r2, (lo, hi), (prev_end, next));
                    live.insert(lo, hi);
                    deferred = false;
                }
                Op::Release(n) => {
                    if live.is_empty() {
                        continue;
                    }
                    let lo = *live.keys().nth(n % live.len()).unwrap();
                    let hi = live.remove(&lo).unwrap();
                    plain.release(r1, (lo, hi), s1);
                    lazy.release_deferred(r2, (lo, hi), s2);
                    last = Some((lo, hi));
                    deferred = true;
                }
                Op::Complete => {
                    m1.complete_stream(s1);
                    m2.complete_stream(s2);
                }
                Op::TrimNowait => {
                    plain.trim_nowait().unwrap();
                    lazy.trim_nowait().unwrap();
                    deferred = false;
                }
            }
            let (c1, c2) = (m1.counters(), m2.counters());
            prop_assert_eq!(
                (c1.map_calls, c1.unmap_calls, c1.alias_calls, c1.chunks_created, c1.event_records),
                (c2.map_calls, c2.unmap_calls, c2.alias_calls, c2.chunks_created, c2.event_records),
                "the same backend calls"
            );
            prop_assert_eq!(c1.bytes_in_use.current, c2.bytes_in_use.current);
            prop_assert_eq!(plain.held(), lazy.held());
            prop_assert_eq!(plain.policy().allocated(), lazy.policy().allocated());
            let blocks: Vec<_> = live.iter().map(|(&a, &b)| (r2, a, b)).collect();
            if deferred {
                // Nothing may read the pages until the release is finished.
                let _ = lazy.verify(blocks.clone());
                continue;
            }
            plain.verify(live.iter().map(|(&a, &b)| (r1, a, b))).map_err(TestCaseError::fail)?;
            lazy.verify(blocks).map_err(TestCaseError::fail)?;
            prop_assert_eq!(format!("{:?}", plain.detail()), format!("{:?}", lazy.detail()));
        }
        lazy.finish_deferred();
        prop_assert_eq!(format!("{:?}", plain.detail()), format!("{:?}", lazy.detail()));
    }
}
