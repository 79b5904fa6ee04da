//! Fault injection: a failing `map`, `reserve` or `alloc_region` gives an error,
//! keeps every live block (their patterns still read back on a host-backed mock) and
//! keeps the accounting exact (the pool's reserved bytes are the backend's bytes in
//! use). Each test asserts that its faults fired.
use devpool_core::{Backend, Pool, Request};
use devpool_ring::{RingConfig, RingMode, RingPool};
use devpool_testing::conformance::Rng;
use devpool_testing::faults::FaultedPool;
use devpool_testing::FaultOn;
use std::collections::VecDeque;

/// Phases of a stream of blocks freed mostly in order (some out of order), with a
/// fault every few allocations; between phases most blocks are freed and the pool
/// trimmed, so that the next phase takes memory from the backend again.
fn run(mode: RingMode, fault: FaultOn) {
    let cfg = RingConfig::default()
        .mode(mode)
        .capacity(4 << 20)
        .max_pinned(4);
    let fp = FaultedPool::host_backed(1 << 30, |m| RingPool::new(m, cfg), RingPool::verify);
    let (mock, pool) = (&fp.mock, &fp.pool);
    let mut rng = Rng::new(11);
    let mut live = VecDeque::new();
    let mut failed = 0;
    for phase in 0..24u32 {
        let depth = 2 + rng.below(12) as usize;
        for round in 0..30u32 {
            let tag = ((phase * 30 + round) % 250) as u8 + 1;
            match fp.faulty_round(round, fault, &mut rng, (1 << 10, 3 << 20), tag) {
                Some(b) => live.push_back((b, tag)),
                None => failed += 1,
            }
            while live.len() > depth {
                // Mostly the oldest; now and then one from the middle.
                let i = if rng.below(4) == 0 {
                    rng.below(live.len() as u64) as usize
                } else {
                    0
                };
                let (b, tag) = live.remove(i).unwrap();
                fp.free(&b, tag);
                fp.exact();
            }
        }
        // Between phases keep a block or two (none every other phase), and trim.
        let keep = if phase % 2 == 0 { 0 } else { 2 };
        while live.len() > keep {
            let (b, tag) = live.pop_front().unwrap();
            fp.free(&b, tag);
        }
        mock.clear_faults();
        pool.trim().unwrap();
        fp.exact();
    }
    assert!(failed >= 10, "faults fired ({failed} failures)");
    assert!(
        mock.counters().failures >= failed,
        "the backend counted them"
    );
    fp.release_all(live);
}

#[test]
fn map_faults_in_virtual_memory() {
    run(RingMode::Virtual, FaultOn::Map);
}

#[test]
fn region_faults_in_regions() {
    run(RingMode::Region, FaultOn::Region);
}

#[test]
fn any_fault_in_virtual_memory() {
    run(RingMode::Virtual, FaultOn::AnyAcquire);
}

#[test]
fn reserve_fault_is_an_error_and_the_next_call_works() {
    FaultedPool::reserve_fault_then_works(
        |m| RingPool::new(m, RingConfig::default()),
        RingPool::verify,
    );
}

#[test]
fn a_full_device_is_out_of_memory_and_the_ring_stays_whole() {
    // 32 MiB device: the ring grows until the backend refuses, then frees bring it back.
    let cfg = RingConfig::default().capacity(8 << 20);
    let fp = FaultedPool::host_backed(32 << 20, |m| RingPool::new(m, cfg), RingPool::verify);
    let (mock, pool) = (&fp.mock, &fp.pool);
    let mut live = Vec::new();
    let e = loop {
        match pool.allocate(&Request::new(3 << 20)) {
            Ok(b) => {
                fp.fill(&b, live.len() as u8 + 1);
                live.push(b);
            }
            Err(e) => break e,
        }
    };
    assert!(e.is_oom(), "{e}");
    assert_eq!(live.len(), 10, "ten blocks of 3 MiB fit in 32 MiB");
    fp.exact();
    for (i, b) in live.iter().enumerate() {
        fp.verify(b, i as u8 + 1);
    }
    for b in live.drain(..5) {
        pool.deallocate(&b).unwrap();
    }
    let b = pool
        .allocate(&Request::new(3 << 20))
        .expect("the tail made room");
    live.push(b);
    for b in live {
        pool.deallocate(&b).unwrap();
    }
    pool.trim().unwrap();
    fp.exact();
    assert_eq!(mock.counters().bytes_in_use.current, 0);
}
