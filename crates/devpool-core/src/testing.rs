//! The conformance suite every allocator crate runs from its own tests, and a
//! proptest model test of random operation sequences.
//!
//! Use [`conformance_tests!`](crate::conformance_tests) in a test file:
//!
//! ```ignore
//! devpool_core::conformance_tests!(|mock: std::sync::Arc<devpool_core::MockBackend>| {
//!     devpool_core::direct(mock)
//! });
//! ```
//!
//! Each case builds its own mock backend (sometimes host-backed, sometimes with
//! manual events) and hands it to the constructor.

use crate::{Allocator, Backend, Block, Error, MockBackend, MockConfig, Request, StreamId};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A constructor of the allocator under test.
pub type Make<'a> = &'a (dyn Fn(Arc<MockBackend>) -> Box<dyn Allocator> + Sync);

pub use crate::rng::Rng;

/// Panic unless no two blocks overlap (by granted size) and each is 256-byte aligned
/// and at least as large as requested.
pub fn check_blocks(blocks: &[Block]) {
    let mut v: Vec<&Block> = blocks.iter().collect();
    v.sort_by_key(|b| b.ptr);
    for b in &v {
        assert!(
            b.ptr.is_aligned(crate::MIN_ALIGN),
            "{:?} is not 256-byte aligned",
            b.ptr
        );
        assert!(
            b.size >= b.requested.max(1),
            "{b:?} is smaller than requested"
        );
        assert!(!b.ptr.is_null(), "null block {b:?}");
    }
    for w in v.windows(2) {
        assert!(
            w[0].ptr.0 + w[0].size as u64 <= w[1].ptr.0,
            "blocks overlap: {:?} and {:?}",
            w[0],
            w[1]
        );
    }
}

fn free_all(a: &dyn Allocator, blocks: Vec<Block>) {
    for b in blocks {
        a.free(b).expect("free of a live block");
    }
}

/// After everything is freed and trimmed, nothing is held from the backend.
pub fn assert_empty(a: &dyn Allocator, mock: &MockBackend) {
    a.trim().expect("trim");
    let s = a.stats();
    assert_eq!(
        s.live_bytes.current, 0,
        "live bytes after freeing all: {s:?}"
    );
    assert_eq!(
        s.live_blocks.current, 0,
        "live blocks after freeing all: {s:?}"
    );
    assert_eq!(
        s.reserved_bytes.current, 0,
        "reserved bytes after trim: {s:?}"
    );
    assert_eq!(
        mock.counters().bytes_in_use.current,
        0,
        "backend still holds memory after trim"
    );
}

/// Zero bytes: a real, aligned block that frees normally.
pub fn zero_size(make: Make) {
    let mock = MockBackend::shared();
    let a = make(mock.clone());
    let x = a.alloc(0).expect("zero-size allocation is valid");
    let y = a.alloc(0).expect("zero-size allocation is valid");
    check_blocks(&[x, y]);
    assert_eq!(a.stats().live_bytes.current, 0);
    free_all(&*a, vec![x, y]);
    assert_empty(&*a, &mock);
}

/// 4 B, 1 KiB, 1 MiB and 1 GiB come back aligned and distinct.
pub fn sizes_aligned_distinct(make: Make) {
    let mock = MockBackend::shared();
    let a = make(mock.clone());
    let blocks: Vec<Block> = [4usize, 1 << 10, 1 << 20, 1 << 30]
        .iter()
        .map(|&s| a.alloc(s).unwrap_or_else(|e| panic!("alloc {s}: {e}")))
        .collect();
    check_blocks(&blocks);
    let s = a.stats();
    assert_eq!(
        s.live_bytes.current,
        (4 + (1 << 10) + (1 << 20) + (1 << 30)) as u64
    );
    free_all(&*a, blocks);
    assert_empty(&*a, &mock);
}

/// Larger alignments are honoured; bad ones are refused.
pub fn alignment(make: Make) {
    let mock = MockBackend::shared();
    let a = make(mock.clone());
    let mut blocks = Vec::new();
    for align in [256usize, 512, 4096, 65536] {
        for size in [1usize, 1000, 70000] {
            match a.allocate(Request::new(size).with_align(align)) {
                Ok(b) => {
                    assert!(b.ptr.is_aligned(align), "{b:?} not aligned to {align}");
                    blocks.push(b);
                }
                Err(Error::InvalidAlignment { .. }) => {}
                Err(e) => panic!("align {align} size {size}: {e}"),
            }
        }
    }
    check_blocks(&blocks);
    for bad in [3usize, 0, 1000] {
        assert!(
            matches!(
                a.allocate(Request::new(64).with_align(bad)),
                Err(Error::InvalidAlignment { .. })
            ),
            "alignment {bad} must be refused"
        );
    }
    free_all(&*a, blocks);
    assert_empty(&*a, &mock);
}

/// 1 PiB and `usize::MAX` give errors, no panic, and the allocator still works.
pub fn huge_requests(make: Make) {
    let mock = MockBackend::shared();
    let a = make(mock.clone());
    let e = a.alloc(1 << 50).expect_err("1 PiB cannot fit");
    assert!(
        e.is_oom() || matches!(e, Error::TooLarge { .. }),
        "1 PiB: unexpected {e}"
    );
    let msg = e.to_string();
    assert!(!msg.is_empty());
    assert!(a.alloc(usize::MAX).is_err());
    assert!(a.alloc(usize::MAX / 2).is_err());
    assert!(a.stats().failures >= 1, "failures are counted");
    let b = a.alloc(1 << 20).expect("still works");
    a.free(b).unwrap();
    assert_empty(&*a, &mock);
}

/// A capacity too small for a request gives an out-of-memory error naming the sizes.
pub fn out_of_memory(make: Make) {
    let mock = MockBackend::shared_with(MockConfig::default().capacity(64 << 20));
    let a = make(mock.clone());
    let keep = a.alloc(8 << 20).expect("fits");
    let e = a.alloc(256 << 20).expect_err("cannot fit");
    assert!(e.is_oom(), "{e}");
    if let Error::OutOfMemory(info) = &e {
        assert_eq!(info.requested, 256 << 20);
        assert_eq!(info.backend_total, 64 << 20);
        assert!(info.live >= 8 << 20);
    }
    a.free(keep).unwrap();
    assert_empty(&*a, &mock);
}

/// 100 random sizes from 1 B to 5 MiB, then free all.
pub fn random_sizes(make: Make) {
    let mock = MockBackend::shared();
    let a = make(mock.clone());
    let mut rng = Rng::new(1);
    let blocks: Vec<Block> = (0..100)
        .map(|_| a.alloc(rng.log_uniform(1, 5 << 20)).expect("alloc"))
        .collect();
    check_blocks(&blocks);
    let want: u64 = blocks.iter().map(|b| b.requested as u64).sum();
    assert_eq!(a.stats().live_bytes.current, want);
    assert_eq!(a.stats().live_blocks.current, 100);
    free_all(&*a, blocks);
    assert_empty(&*a, &mock);
}

fn mixed(a: &dyn Allocator, seed: u64, steps: usize, stream: StreamId) -> Vec<Block> {
    let mut rng = Rng::new(seed);
    let mut live: Vec<Block> = Vec::new();
    for _ in 0..steps {
        if live.is_empty() || rng.below(2) == 0 {
            let req = Request::new(rng.log_uniform(1, 8 << 20)).on_stream(stream);
            live.push(a.allocate(req).expect("alloc"));
        } else {
            let i = rng.below(live.len() as u64) as usize;
            let b = live.swap_remove(i);
            a.free(b).expect("free");
        }
    }
    live
}

/// 200 mixed random steps, checked for overlap, then freed.
pub fn mixed_steps(make: Make) {
    let mock = MockBackend::shared();
    let a = make(mock.clone());
    let live = mixed(&*a, 7, 200, StreamId::DEFAULT);
    check_blocks(&live);
    free_all(&*a, live);
    assert_empty(&*a, &mock);
}

/// The mixed steps on 4 threads at once (one stream, then one stream each).
pub fn four_threads(make: Make) {
    for per_thread_stream in [false, true] {
        let mock = MockBackend::shared();
        let a: Arc<dyn Allocator> = Arc::from(make(mock.clone()));
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let a = a.clone();
                std::thread::spawn(move || {
                    let s = if per_thread_stream {
                        StreamId(t + 1)
                    } else {
                        StreamId::DEFAULT
                    };
                    mixed(&*a, 100 + t, 500, s)
                })
            })
            .collect();
        let live: Vec<Block> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        check_blocks(&live);
        let s = a.stats();
        assert_eq!(s.live_blocks.current, live.len() as u64);
        free_all(&*a, live);
        assert_empty(&*a, &mock);
    }
}

/// Allocate on one thread, free on another.
pub fn cross_thread_free(make: Make) {
    let mock = MockBackend::shared();
    let a: Arc<dyn Allocator> = Arc::from(make(mock.clone()));
    let blocks: Vec<Block> = (0..64).map(|i| a.alloc(1000 * (i + 1)).unwrap()).collect();
    let a2 = a.clone();
    std::thread::spawn(move || free_all(&*a2, blocks))
        .join()
        .unwrap();
    assert_empty(&*a, &mock);
}

/// Foreign pointers, double frees and wrong devices are errors that change nothing.
pub fn bad_frees(make: Make) {
    let mock = MockBackend::shared();
    let a = make(mock.clone());
    let keep = a.alloc(4096).unwrap();
    let b = a.alloc(100_000).unwrap();
    let before = a.stats();
    let mut forged = b;
    forged.ptr = crate::DevicePtr(0x1234_5600);
    assert!(a.free(forged).is_err(), "a pointer never handed out");
    let mut inside = b;
    inside.ptr = b.ptr.offset(256);
    assert!(a.free(inside).is_err(), "a pointer inside a block");
    let mut wrong_dev = b;
    wrong_dev.device = crate::DeviceId(7);
    assert!(matches!(a.free(wrong_dev), Err(Error::WrongDevice { .. })));
    let mut wrong_size = b;
    wrong_size.size += 1 << 20;
    assert!(a.free(wrong_size).is_err(), "a block with a forged size");
    assert_eq!(
        a.stats().live_blocks.current,
        before.live_blocks.current,
        "rejected frees change nothing"
    );
    a.free(b).unwrap();
    let e = a.free(b).expect_err("double free");
    assert!(
        matches!(e, Error::DoubleFree { .. } | Error::NotOwned { .. }),
        "{e}"
    );
    // The allocator still works and its counts still add up.
    let c = a.alloc(100_000).unwrap();
    check_blocks(&[keep, c]);
    assert_eq!(a.stats().live_blocks.current, 2);
    free_all(&*a, vec![keep, c]);
    assert_empty(&*a, &mock);
}

/// Host-backed: every block is filled with its own pattern; all patterns read back.
pub fn data_integrity(make: Make) {
    let mock = MockBackend::shared_with(MockConfig::default().host_backed().capacity(8 << 30));
    let a = make(mock.clone());
    let mut rng = Rng::new(3);
    let mut live: Vec<(Block, u8)> = Vec::new();
    let verify = |b: &Block, tag: u8| {
        let mut back = vec![0u8; b.requested.max(1)];
        mock.copy_to_host(&mut back, b.ptr, b.stream)
            .expect("block memory is accessible");
        assert!(
            back.iter().all(|&x| x == tag),
            "block {b:?} lost its pattern {tag}"
        );
    };
    for i in 0..400u32 {
        if live.is_empty() || rng.below(3) != 0 {
            let b = a.alloc(rng.log_uniform(1, 4 << 20)).unwrap();
            let tag = (i % 251) as u8 + 1;
            mock.memset(b.ptr, tag, b.requested.max(1), b.stream)
                .expect("block memory is accessible");
            live.push((b, tag));
        } else {
            let (b, tag) = live.swap_remove(rng.below(live.len() as u64) as usize);
            verify(&b, tag);
            a.free(b).unwrap();
        }
    }
    for (b, tag) in live {
        verify(&b, tag);
        a.free(b).unwrap();
    }
    assert_empty(&*a, &mock);
}

/// A block freed on another stream, or used on another stream, is not handed out
/// again before that stream's event completes.
pub fn stream_order(make: Make) {
    let mock = MockBackend::shared_with(MockConfig::default().manual_events());
    let a = make(mock.clone());
    let (s1, s2, s3) = (StreamId(11), StreamId(22), StreamId(33));
    // Freed on another stream than its own. Nothing is freed until the checks are
    // done: a backend free may wait for the device (as cuMemFree does), which would
    // complete the pending work legitimately.
    let b = a.allocate(Request::new(4096).on_stream(s1)).unwrap();
    a.deallocate(b, s2).unwrap();
    let mut held = Vec::new();
    for s in [s1, s3] {
        for _ in 0..8 {
            let x = a.allocate(Request::new(4096).on_stream(s)).unwrap();
            assert_ne!(
                x.ptr, b.ptr,
                "block reused by {s:?} before the free's event completed"
            );
            held.push(x);
        }
    }
    // Declared used on another stream, freed on its own.
    let c = a.allocate(Request::new(8192).on_stream(s1)).unwrap();
    a.record_stream(&c, s3).unwrap();
    a.free(c).unwrap();
    assert!(a.free(c).is_err(), "a double free while pending is caught");
    for _ in 0..4 {
        let x = a.allocate(Request::new(8192).on_stream(s1)).unwrap();
        assert_ne!(
            x.ptr, c.ptr,
            "block reused before the recorded stream's event completed"
        );
        held.push(x);
    }
    free_all(&*a, held);
    // Same stream, nothing recorded: reuse at once is allowed and nothing waits.
    let d = a.allocate(Request::new(4096).on_stream(s2)).unwrap();
    a.free(d).unwrap();
    mock.complete_all();
    let y = a.allocate(Request::new(1).on_stream(s1)).unwrap();
    a.free(y).unwrap();
    assert_empty(&*a, &mock);
}

/// Fault injection: a failing backend call gives an error; nothing live is lost.
pub fn backend_faults(make: Make) {
    use crate::FaultOn;
    let mock = MockBackend::shared_with(MockConfig::default().host_backed().capacity(1 << 30));
    let a = make(mock.clone());
    let mut live: Vec<(Block, u8)> = Vec::new();
    let mut rng = Rng::new(9);
    for round in 0..60u32 {
        mock.fail_nth(FaultOn::AnyAcquire, 1 + rng.below(3));
        for _ in 0..4 {
            match a.alloc(rng.log_uniform(1, 16 << 20)) {
                Ok(b) => {
                    let tag = (round % 250) as u8 + 1;
                    mock.memset(b.ptr, tag, b.requested.max(1), b.stream)
                        .unwrap();
                    live.push((b, tag));
                }
                Err(e) => assert!(
                    e.is_oom() || matches!(e, Error::Backend(_)),
                    "unexpected error {e}"
                ),
            }
        }
        if round % 7 == 3 {
            mock.set_capacity(256 << 20);
        }
        if round % 7 == 5 {
            mock.set_capacity(1 << 30);
        }
        if live.len() > 8 {
            let (b, tag) = live.swap_remove(rng.below(live.len() as u64) as usize);
            let mut back = vec![0u8; b.requested.max(1)];
            mock.copy_to_host(&mut back, b.ptr, b.stream).unwrap();
            assert!(back.iter().all(|&x| x == tag), "live block lost its data");
            a.free(b).unwrap();
        }
    }
    mock.clear_faults();
    mock.set_capacity(1 << 30);
    let blocks: Vec<Block> = live.iter().map(|(b, _)| *b).collect();
    check_blocks(&blocks);
    assert_eq!(a.stats().live_blocks.current, blocks.len() as u64);
    free_all(&*a, blocks);
    assert_empty(&*a, &mock);
}

/// Random operation sequences against a model: no overlap, aligned, stats add up,
/// everything returned. Runs `cases` proptest cases.
pub fn model_test(make: Make, cases: u32) {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};

    #[derive(Clone, Debug)]
    enum Op {
        Alloc {
            size: usize,
            align_log: u8,
            stream: u8,
        },
        Free {
            pick: usize,
            other_stream: bool,
        },
        Trim,
    }
    let op = prop_oneof![
        6 => (0usize..=22, 0usize..(1 << 22), 8u8..=16, 0u8..3).prop_map(|(shift, r, align_log, stream)| {
            Op::Alloc { size: r >> (22 - shift.min(22)), align_log, stream }
        }),
        4 => (any::<usize>(), any::<bool>()).prop_map(|(pick, other_stream)| Op::Free { pick, other_stream }),
        1 => Just(Op::Trim),
    ];
    let mut runner = TestRunner::new(Config {
        cases,
        ..Config::default()
    });
    runner
        .run(&proptest::collection::vec(op, 1..120), |ops| {
            let mock = MockBackend::shared();
            let a = make(mock.clone());
            let mut model: BTreeMap<u64, Block> = BTreeMap::new();
            let (mut allocs, mut frees) = (0u64, 0u64);
            for op in ops {
                match op {
                    Op::Alloc {
                        size,
                        align_log,
                        stream,
                    } => {
                        let align = 1usize << align_log;
                        let req = Request::new(size)
                            .with_align(align)
                            .on_stream(StreamId(stream as u64));
                        let b = match a.allocate(req) {
                            Ok(b) => b,
                            Err(Error::InvalidAlignment { .. }) => continue,
                            Err(e) => {
                                return Err(TestCaseError::fail(format!("alloc {size}: {e}")))
                            }
                        };
                        prop_assert!(b.ptr.is_aligned(align.max(256)));
                        prop_assert!(b.size >= size.max(1));
                        if let Some((_, prev)) = model.range(..=b.ptr.0).next_back() {
                            prop_assert!(
                                prev.ptr.0 + prev.size as u64 <= b.ptr.0,
                                "overlap {prev:?} {b:?}"
                            );
                        }
                        if let Some((_, next)) = model.range(b.ptr.0..).next() {
                            prop_assert!(
                                b.ptr.0 + b.size as u64 <= next.ptr.0,
                                "overlap {b:?} {next:?}"
                            );
                        }
                        model.insert(b.ptr.0, b);
                        allocs += 1;
                    }
                    Op::Free { pick, other_stream } => {
                        if model.is_empty() {
                            continue;
                        }
                        let key = *model.keys().nth(pick % model.len()).unwrap();
                        let b = model.remove(&key).unwrap();
                        let s = if other_stream {
                            StreamId(b.stream.0 + 1)
                        } else {
                            b.stream
                        };
                        a.deallocate(b, s)
                            .map_err(|e| TestCaseError::fail(format!("free: {e}")))?;
                        frees += 1;
                    }
                    Op::Trim => {
                        a.trim()
                            .map_err(|e| TestCaseError::fail(format!("trim: {e}")))?;
                    }
                }
                let s = a.stats();
                prop_assert_eq!(
                    s.live_bytes.current,
                    model.values().map(|b| b.requested as u64).sum::<u64>()
                );
                prop_assert_eq!(
                    s.allocated_bytes.current,
                    model.values().map(|b| b.size as u64).sum::<u64>()
                );
                prop_assert_eq!(s.live_blocks.current, model.len() as u64);
                prop_assert_eq!((s.allocations, s.frees), (allocs, frees));
                prop_assert!(s.reserved_bytes.current >= s.allocated_bytes.current);
            }
            for (_, b) in std::mem::take(&mut model) {
                a.free(b)
                    .map_err(|e| TestCaseError::fail(format!("final free: {e}")))?;
            }
            a.trim()
                .map_err(|e| TestCaseError::fail(format!("trim: {e}")))?;
            prop_assert_eq!(a.stats().reserved_bytes.current, 0);
            prop_assert_eq!(mock.counters().bytes_in_use.current, 0);
            Ok(())
        })
        .unwrap();
}

/// Generate one `#[test]` per conformance case for the allocator built by `$make`, a
/// closure `|mock: Arc<MockBackend>| -> impl Allocator`.
#[macro_export]
macro_rules! conformance_tests {
    ($make:expr) => {
        mod conformance {
            #[allow(unused_imports)]
            use super::*;
            fn make(
                mock: ::std::sync::Arc<$crate::MockBackend>,
            ) -> ::std::boxed::Box<dyn $crate::Allocator> {
                let f = $make;
                ::std::boxed::Box::new(f(mock))
            }
            #[test]
            fn zero_size() {
                $crate::testing::zero_size(&make)
            }
            #[test]
            fn sizes_aligned_distinct() {
                $crate::testing::sizes_aligned_distinct(&make)
            }
            #[test]
            fn alignment() {
                $crate::testing::alignment(&make)
            }
            #[test]
            fn huge_requests() {
                $crate::testing::huge_requests(&make)
            }
            #[test]
            fn out_of_memory() {
                $crate::testing::out_of_memory(&make)
            }
            #[test]
            fn random_sizes() {
                $crate::testing::random_sizes(&make)
            }
            #[test]
            fn mixed_steps() {
                $crate::testing::mixed_steps(&make)
            }
            #[test]
            fn four_threads() {
                $crate::testing::four_threads(&make)
            }
            #[test]
            fn cross_thread_free() {
                $crate::testing::cross_thread_free(&make)
            }
            #[test]
            fn bad_frees() {
                $crate::testing::bad_frees(&make)
            }
            #[test]
            fn data_integrity() {
                $crate::testing::data_integrity(&make)
            }
            #[test]
            fn stream_order() {
                $crate::testing::stream_order(&make)
            }
            #[test]
            fn backend_faults() {
                $crate::testing::backend_faults(&make)
            }
            #[test]
            fn model() {
                $crate::testing::model_test(&make, 64)
            }
        }
    };
}
