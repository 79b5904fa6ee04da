//! Fault injection: a failing `map`, `reserve` or `alloc_region` gives an error,
//! keeps every live block (their patterns still read back on a host-backed mock) and
//! keeps the accounting exact (the pool's reserved bytes are the backend's bytes in
//! use). Each test asserts that its faults fired.
use devpool_core::{Backend, Block, Error, Pool, Request};
use devpool_ring::{RingConfig, RingMode, RingPool};
use devpool_testing::conformance::Rng;
use devpool_testing::{FaultOn, MockBackend, MockConfig};
use std::collections::VecDeque;

fn fill(mock: &MockBackend, b: &Block, tag: u8) {
    mock.memset(b.ptr, tag, b.requested.max(1), b.stream)
        .unwrap();
}

fn verify(mock: &MockBackend, b: &Block, tag: u8) {
    let mut back = vec![0u8; b.requested.max(1)];
    mock.copy_to_host(&mut back, b.ptr, b.stream).unwrap();
    assert!(
        back.iter().all(|&x| x == tag),
        "block {b:?} lost its pattern"
    );
}

fn exact(pool: &RingPool, mock: &MockBackend) {
    pool.verify().unwrap();
    assert_eq!(
        pool.stats().reserved_bytes.current,
        mock.counters().bytes_in_use.current,
        "the pool's reserved bytes are the backend's bytes in use"
    );
}

/// Phases of a stream of blocks freed mostly in order (some out of order), with a
/// fault every few allocations; between phases most blocks are freed and the pool
/// trimmed, so that the next phase takes memory from the backend again.
fn run(mode: RingMode, fault: FaultOn) {
    let mock = MockBackend::shared_with(MockConfig::default().host_backed().capacity(1 << 30));
    let cfg = RingConfig::default()
        .mode(mode)
        .capacity(4 << 20)
        .max_pinned(4);
    let pool = RingPool::new(mock.clone(), cfg);
    let mut rng = Rng::new(11);
    let mut live: VecDeque<(Block, u8)> = VecDeque::new();
    let mut failed = 0;
    for phase in 0..24u32 {
        let depth = 2 + rng.below(12) as usize;
        for round in 0..30u32 {
            if round % 3 == 0 {
                mock.fail_nth(fault, 1 + rng.below(2));
            }
            let before = pool.stats();
            match pool.allocate(&Request::new(rng.log_uniform(1 << 10, 3 << 20))) {
                Ok(b) => {
                    let tag = ((phase * 30 + round) % 250) as u8 + 1;
                    fill(&mock, &b, tag);
                    live.push_back((b, tag));
                }
                Err(e) => {
                    assert!(matches!(e, Error::Backend(_)), "unexpected error {e}");
                    failed += 1;
                    let after = pool.stats();
                    assert_eq!(
                        after.live_blocks, before.live_blocks,
                        "a failure changes no block"
                    );
                    assert_eq!(after.allocated_bytes, before.allocated_bytes);
                }
            }
            exact(&pool, &mock);
            while live.len() > depth {
                // Mostly the oldest; now and then one from the middle.
                let i = if rng.below(4) == 0 {
                    rng.below(live.len() as u64) as usize
                } else {
                    0
                };
                let (b, tag) = live.remove(i).unwrap();
                verify(&mock, &b, tag);
                pool.deallocate(&b).unwrap();
                exact(&pool, &mock);
            }
        }
        // Between phases keep a block or two (none every other phase), and trim.
        let keep = if phase % 2 == 0 { 0 } else { 2 };
        while live.len() > keep {
            let (b, tag) = live.pop_front().unwrap();
            verify(&mock, &b, tag);
            pool.deallocate(&b).unwrap();
        }
        mock.clear_faults();
        pool.trim().unwrap();
        exact(&pool, &mock);
    }
    assert!(failed >= 10, "faults fired ({failed} failures)");
    assert!(
        mock.counters().failures >= failed,
        "the backend counted them"
    );
    for (b, tag) in &live {
        verify(&mock, b, *tag);
    }
    for (b, _) in live {
        pool.deallocate(&b).unwrap();
    }
    pool.trim().unwrap();
    exact(&pool, &mock);
    assert_eq!(mock.counters().bytes_in_use.current, 0);
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
    let mock = MockBackend::shared();
    let pool = RingPool::new(mock.clone(), RingConfig::default());
    mock.fail_nth(FaultOn::Reserve, 1);
    let e = pool.allocate(&Request::new(1 << 20)).unwrap_err();
    assert!(matches!(e, Error::Backend(_)), "{e}");
    assert_eq!(mock.counters().failures, 1, "the fault fired");
    let b = pool.allocate(&Request::new(1 << 20)).unwrap();
    pool.deallocate(&b).unwrap();
    exact(&pool, &mock);
}

#[test]
fn a_full_device_is_out_of_memory_and_the_ring_stays_whole() {
    // 32 MiB device: the ring grows until the backend refuses, then frees bring it back.
    let mock = MockBackend::shared_with(MockConfig::default().host_backed().capacity(32 << 20));
    let pool = RingPool::new(mock.clone(), RingConfig::default().capacity(8 << 20));
    let mut live = Vec::new();
    let e = loop {
        match pool.allocate(&Request::new(3 << 20)) {
            Ok(b) => {
                fill(&mock, &b, live.len() as u8 + 1);
                live.push(b);
            }
            Err(e) => break e,
        }
    };
    assert!(e.is_oom(), "{e}");
    assert_eq!(live.len(), 10, "ten blocks of 3 MiB fit in 32 MiB");
    exact(&pool, &mock);
    for (i, b) in live.iter().enumerate() {
        verify(&mock, b, i as u8 + 1);
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
    exact(&pool, &mock);
    assert_eq!(mock.counters().bytes_in_use.current, 0);
}
