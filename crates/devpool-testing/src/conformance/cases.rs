//! The conformance cases. Each takes the allocator's constructor and the largest
//! request it is meant to serve, and keeps its sizes within that.

use super::{assert_apart, assert_empty, assert_tag, check_blocks, Make, Rng};
use crate::{MockBackend, MockConfig};
use devpool_core::{Allocator, Backend, Block, Error, Request, StreamId};
use std::sync::Arc;

fn free_all(a: &dyn Allocator, blocks: Vec<Block>) {
    for b in blocks {
        a.free(b).expect("free of a live block");
    }
}

/// Zero bytes: a real, aligned block that frees normally.
pub fn zero_size(make: Make, _max: usize) {
    let mock = MockBackend::shared();
    let a = make(mock.clone());
    let x = a.alloc(0).expect("zero-size allocation is valid");
    let y = a.alloc(0).expect("zero-size allocation is valid");
    check_blocks(&[x, y]);
    assert_eq!(a.stats().live_bytes.current, 0);
    free_all(&*a, vec![x, y]);
    assert_empty(&*a, &mock);
}

/// 4 B, 1 KiB, 1 MiB and 1 GiB (those within `max`, and `max` itself) come back
/// aligned and distinct.
pub fn sizes_aligned_distinct(make: Make, max: usize) {
    let mock = MockBackend::shared();
    let a = make(mock.clone());
    let mut sizes: Vec<usize> = [4usize, 1 << 10, 1 << 20, 1 << 30]
        .into_iter()
        .filter(|&s| s <= max)
        .collect();
    if max < 1 << 30 {
        sizes.push(max);
    }
    let blocks: Vec<Block> = sizes
        .iter()
        .map(|&s| a.alloc(s).unwrap_or_else(|e| panic!("alloc {s}: {e}")))
        .collect();
    check_blocks(&blocks);
    let s = a.stats();
    assert_eq!(
        s.live_bytes.current,
        sizes.iter().map(|&s| s as u64).sum::<u64>()
    );
    free_all(&*a, blocks);
    assert_empty(&*a, &mock);
}

/// A pool's handles keep to the low [`POOL_HANDLE_BITS`](devpool_core::POOL_HANDLE_BITS),
/// the pool's part of the contract; only a router (an allocator whose
/// [`parts`](devpool_core::Allocator::parts) are routes) tags the bits above, and
/// then with a route it has.
pub fn handles_leave_router_bits(make: Make, max: usize) {
    let mock = MockBackend::shared();
    let a = make(mock.clone());
    let blocks: Vec<Block> = [1usize, 3000, 70 << 10, 5 << 20, 300 << 20]
        .into_iter()
        .filter(|&s| s <= max)
        .map(|s| a.alloc(s).unwrap_or_else(|e| panic!("alloc {s}: {e}")))
        .collect();
    let routes = match a.parts() {
        devpool_core::Parts::Routes(r) => r.len() as u64,
        _ => 1,
    };
    for b in &blocks {
        assert!(
            b.route() < routes,
            "{b:?}: handle {:#x} uses the router's bits (routes: {routes})",
            b.handle
        );
    }
    free_all(&*a, blocks);
    assert_empty(&*a, &mock);
}

/// Alignments from 256 B to 64 KiB are all served, and honoured; bad ones are
/// refused with the value asked for.
pub fn alignment(make: Make, max: usize) {
    let mock = MockBackend::shared();
    let a = make(mock.clone());
    let mut blocks = Vec::new();
    for align in [256usize, 512, 4096, 65536] {
        for size in [1usize, 1000, 70000].into_iter().filter(|&s| s <= max) {
            let b = a
                .allocate(Request::new(size).with_align(align))
                .unwrap_or_else(|e| panic!("align {align} size {size} must be served: {e}"));
            assert!(b.ptr.is_aligned(align), "{b:?} not aligned to {align}");
            blocks.push(b);
        }
    }
    check_blocks(&blocks);
    for bad in [3usize, 0, 1000] {
        match a.allocate(Request::new(64).with_align(bad)) {
            Err(Error::InvalidAlignment { align }) => assert_eq!(align, bad),
            other => panic!("alignment {bad} must be refused, got {other:?}"),
        }
    }
    free_all(&*a, blocks);
    assert_empty(&*a, &mock);
}

/// 1 PiB and `usize::MAX` give errors, no panic, and the allocator still works.
pub fn huge_requests(make: Make, max: usize) {
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
    let b = a.alloc(max.min(1 << 20)).expect("still works");
    a.free(b).unwrap();
    assert_empty(&*a, &mock);
}

/// A capacity too small for what is asked gives an out-of-memory error naming the
/// request, what is live and the device's total.
pub fn out_of_memory(make: Make, max: usize) {
    let mock = MockBackend::shared_with(MockConfig::default().capacity(64 << 20));
    let a = make(mock.clone());
    let keep = a.alloc(max.min(8 << 20)).expect("fits");
    // Ask until the device is full: at once for 256 MiB, after a few blocks for an
    // allocator whose blocks are smaller.
    let size = max.min(256 << 20);
    let mut held = Vec::new();
    let e = loop {
        match a.alloc(size) {
            Ok(b) => held.push(b),
            Err(e) => break e,
        }
        assert!(held.len() < 1000, "64 MiB never ran out");
    };
    match &e {
        Error::OutOfMemory(info) => {
            assert_eq!(info.requested, size, "{e}");
            assert_eq!(info.backend_total, 64 << 20, "{e}");
            let live = (keep.requested + held.iter().map(|b| b.requested).sum::<usize>()) as u64;
            assert_eq!(info.live, live, "{e}");
            assert!(info.backend_free <= info.backend_total, "{e}");
        }
        other => panic!("out of memory must be Error::OutOfMemory with its figures, got {other:?}"),
    }
    held.push(keep);
    free_all(&*a, held);
    assert_empty(&*a, &mock);
}

/// 100 random sizes from 1 B to 5 MiB (or `max`), then free all.
pub fn random_sizes(make: Make, max: usize) {
    let mock = MockBackend::shared();
    let a = make(mock.clone());
    let mut rng = Rng::new(1);
    let blocks: Vec<Block> = (0..100)
        .map(|_| {
            a.alloc(rng.log_uniform(1, max.min(5 << 20)))
                .expect("alloc")
        })
        .collect();
    check_blocks(&blocks);
    let want: u64 = blocks.iter().map(|b| b.requested as u64).sum();
    assert_eq!(a.stats().live_bytes.current, want);
    assert_eq!(a.stats().live_blocks.current, 100);
    free_all(&*a, blocks);
    assert_empty(&*a, &mock);
}

fn mixed(a: &dyn Allocator, seed: u64, steps: usize, stream: StreamId, max: usize) -> Vec<Block> {
    let mut rng = Rng::new(seed);
    let mut live: Vec<Block> = Vec::new();
    for _ in 0..steps {
        if live.is_empty() || rng.below(2) == 0 {
            let req = Request::new(rng.log_uniform(1, max.min(8 << 20))).on_stream(stream);
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
pub fn mixed_steps(make: Make, max: usize) {
    let mock = MockBackend::shared();
    let a = make(mock.clone());
    let live = mixed(&*a, 7, 200, StreamId::DEFAULT, max);
    check_blocks(&live);
    free_all(&*a, live);
    assert_empty(&*a, &mock);
}

/// The mixed steps on 4 threads at once (one stream, then one stream each).
pub fn four_threads(make: Make, max: usize) {
    for per_thread_stream in [false, true] {
        let mock = MockBackend::shared();
        let a: Arc<dyn Allocator> = Arc::from(make(mock.clone()));
        let st = super::streams(&mock, 5);
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let a = a.clone();
                let s = if per_thread_stream {
                    st[t as usize + 1]
                } else {
                    StreamId::DEFAULT
                };
                std::thread::spawn(move || mixed(&*a, 100 + t, 500, s, max))
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
pub fn cross_thread_free(make: Make, max: usize) {
    let mock = MockBackend::shared();
    let a: Arc<dyn Allocator> = Arc::from(make(mock.clone()));
    let blocks: Vec<Block> = (0..64)
        .map(|i| a.alloc((1000 * (i + 1)).min(max)).unwrap())
        .collect();
    let a2 = a.clone();
    std::thread::spawn(move || free_all(&*a2, blocks))
        .join()
        .unwrap();
    assert_empty(&*a, &mock);
}

/// Foreign pointers, double frees and wrong devices are errors that change nothing.
pub fn bad_frees(make: Make, max: usize) {
    let mock = MockBackend::shared();
    let a = make(mock.clone());
    let keep = a.alloc(4096).unwrap();
    let size = max.min(100_000);
    let b = a.alloc(size).unwrap();
    let before = a.stats();
    let mut forged = b;
    forged.ptr = devpool_core::DevicePtr(0x1234_5600);
    assert!(a.free(forged).is_err(), "a pointer never handed out");
    let mut inside = b;
    inside.ptr = b.ptr.offset(256);
    assert!(a.free(inside).is_err(), "a pointer inside a block");
    let mut wrong_dev = b;
    wrong_dev.device = devpool_core::DeviceId(7);
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
    let c = a.alloc(size).unwrap();
    check_blocks(&[keep, c]);
    assert_eq!(a.stats().live_blocks.current, 2);
    free_all(&*a, vec![keep, c]);
    assert_empty(&*a, &mock);
}

/// Host-backed: every block is filled with its own pattern; all patterns read back.
pub fn data_integrity(make: Make, max: usize) {
    let mock = MockBackend::shared_with(MockConfig::default().host_backed().capacity(8 << 30));
    let a = make(mock.clone());
    let mut rng = Rng::new(3);
    let mut live: Vec<(Block, u8)> = Vec::new();
    for i in 0..400u32 {
        if live.is_empty() || rng.below(3) != 0 {
            let b = a.alloc(rng.log_uniform(1, max.min(4 << 20))).unwrap();
            let tag = (i % 251) as u8 + 1;
            mock.memset(b.ptr, tag, b.requested.max(1), b.stream)
                .expect("block memory is accessible");
            live.push((b, tag));
        } else {
            let (b, tag) = live.swap_remove(rng.below(live.len() as u64) as usize);
            assert_tag(&*mock, &b, tag, "before its free");
            a.free(b).unwrap();
        }
    }
    for (b, tag) in live {
        assert_tag(&*mock, &b, tag, "at the end");
        a.free(b).unwrap();
    }
    assert_empty(&*a, &mock);
}

/// A block freed on another stream, or used on another stream, is not handed out
/// again, in whole or in part, before that stream's event completes; small blocks
/// and large ones alike.
pub fn stream_order(make: Make, max: usize) {
    let mock = MockBackend::shared_with(MockConfig::default().manual_events());
    let a = make(mock.clone());
    let st = super::streams(&mock, 4);
    let (s1, s2, s3) = (st[1], st[2], st[3]);
    let mut held = Vec::new();
    // Freed on another stream than its own. Nothing is freed until the checks are
    // done: a backend free may wait for the device (as cuMemFree does), which would
    // complete the pending work legitimately. Requests of other sizes, smaller and
    // larger, would find the block's memory if it went back early.
    for size in [4096usize, 3 << 20].into_iter().filter(|&s| s <= max) {
        let b = a.allocate(Request::new(size).on_stream(s1)).unwrap();
        a.deallocate(b, s2).unwrap();
        for s in [s1, s3] {
            for &n in &[256usize, size / 2, size, size + 4096] {
                for _ in 0..4 {
                    let x = a.allocate(Request::new(n.min(max)).on_stream(s)).unwrap();
                    assert_apart(&x, &b, &format!("reused by {s:?} before the free's event"));
                    held.push(x);
                }
            }
        }
    }
    // Declared used on another stream, freed on its own.
    let size = max.min(8192);
    let c = a.allocate(Request::new(size).on_stream(s1)).unwrap();
    a.record_stream(&c, s3).unwrap();
    a.free(c).unwrap();
    assert!(a.free(c).is_err(), "a double free while pending is caught");
    for &n in &[256usize, size, size * 2] {
        for _ in 0..4 {
            let x = a.allocate(Request::new(n.min(max)).on_stream(s1)).unwrap();
            assert_apart(&x, &c, "reused before the recorded stream's event");
            held.push(x);
        }
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
///
/// The rounds rotate over three streams and trim from time to time, so that even a
/// strategy that takes one large region up front must go back to the backend (a new
/// stream's pool, a pool that gave its memory back); the case asserts that faults
/// did fire, and reads back every surviving block's data.
pub fn backend_faults(make: Make, max: usize) {
    use crate::FaultOn;
    let mock = MockBackend::shared_with(MockConfig::default().host_backed().capacity(1 << 30));
    let a = make(mock.clone());
    let mut live: Vec<(Block, u8)> = Vec::new();
    let mut rng = Rng::new(9);
    let st = super::streams(&mock, 4);
    for round in 0..60u32 {
        let stream = st[1 + (round % 3) as usize];
        mock.fail_nth(FaultOn::AnyAcquire, 1 + rng.below(3));
        for _ in 0..4 {
            let req = Request::new(rng.log_uniform(1, max.min(16 << 20))).on_stream(stream);
            match a.allocate(req) {
                Ok(b) => {
                    let tag = (round % 250) as u8 + 1;
                    mock.memset(b.ptr, tag, b.requested.max(1), b.stream)
                        .unwrap();
                    live.push((b, tag));
                }
                Err(e) => {
                    assert!(
                        e.is_oom() || matches!(e, Error::Backend(_)),
                        "unexpected error {e}"
                    );
                }
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
            assert_tag(&*mock, &b, tag, "a survivor of faults");
            a.free(b).unwrap();
        }
        if round % 5 == 4 {
            // Free every block of the next stream and give memory back, so that its
            // pool must ask the backend again.
            let next = st[1 + ((round + 1) % 3) as usize];
            let (gone, kept): (Vec<_>, Vec<_>) =
                live.into_iter().partition(|(b, _)| b.stream == next);
            live = kept;
            for (b, tag) in gone {
                assert_tag(&*mock, &b, tag, "a survivor of faults");
                a.free(b).unwrap();
            }
            // A trim may meet a fault too (a pool that maps to keep its cache
            // shape); it must leave the allocator consistent either way.
            let _ = a.trim();
        }
    }
    let injected = mock.injected_faults();
    mock.clear_faults();
    mock.set_capacity(1 << 30);
    assert!(
        injected > 0,
        "no fault fired: the allocator never went back to the backend, so this case tested nothing"
    );
    for (b, tag) in &live {
        assert_tag(&*mock, b, *tag, "a survivor of faults, at the end");
    }
    let blocks: Vec<Block> = live.iter().map(|(b, _)| *b).collect();
    check_blocks(&blocks);
    assert_eq!(a.stats().live_blocks.current, blocks.len() as u64);
    free_all(&*a, blocks);
    assert_empty(&*a, &mock);
}
