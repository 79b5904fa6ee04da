//! Fault injection: the backend refuses a new span or a page mapping midway. The
//! allocation fails with an error, every live block keeps its bytes (host-backed mock),
//! and the accounting stays exact: the pool's reserved bytes equal the backend's.

use devpool_buddy::{buddy, BuddyConfig, BuddyPool};
use devpool_core::{Allocator, Backend, BackendError, Block, Error, Pool, Request, StreamId};
use devpool_testing::conformance::Rng;
use devpool_testing::{FaultOn, MockBackend, MockConfig};
use std::sync::Arc;

fn host_mock(capacity: u64) -> Arc<MockBackend> {
    MockBackend::shared_with(MockConfig::default().host_backed().capacity(capacity))
}

/// Fill `b` with a pattern made from `tag`.
fn write(mock: &MockBackend, b: &Block, tag: u8) {
    let bytes: Vec<u8> = (0..b.requested.max(1))
        .map(|i| tag ^ (i % 251) as u8)
        .collect();
    mock.copy_to_device(b.ptr, &bytes, StreamId::DEFAULT)
        .unwrap();
}

/// Check that `b` still holds its pattern.
fn read(mock: &MockBackend, b: &Block, tag: u8) {
    let mut back = vec![0u8; b.requested.max(1)];
    mock.copy_to_host(&mut back, b.ptr, StreamId::DEFAULT)
        .unwrap();
    assert!(
        back.iter()
            .enumerate()
            .all(|(i, &x)| x == tag ^ (i % 251) as u8),
        "{b:?} lost its pattern"
    );
}

/// The pool's view matches the backend's, and every live block reads back.
fn assert_intact(pool: &BuddyPool, mock: &MockBackend, live: &[(Block, u8)]) {
    pool.verify().unwrap();
    assert_eq!(
        pool.stats().reserved_bytes.current,
        mock.counters().bytes_in_use.current,
        "reserved bytes match the backend's"
    );
    assert_eq!(pool.stats().live_blocks.current, live.len() as u64);
    for (b, tag) in live {
        pool.check(b).unwrap();
        read(mock, b, *tag);
    }
}

/// Check the pool once more, free every live block and trim: nothing stays held.
fn free_all(pool: &BuddyPool, mock: &MockBackend, live: Vec<(Block, u8)>) {
    assert_intact(pool, mock, &live);
    for (b, _) in live {
        pool.deallocate(&b).unwrap();
    }
    pool.trim().unwrap();
    assert_eq!(mock.counters().bytes_in_use.current, 0);
}

fn injected(e: &Error) -> bool {
    matches!(e, Error::Backend(BackendError::Injected { .. }))
}

#[test]
fn region_refused_for_a_new_span() {
    let mock = host_mock(1 << 30);
    let pool = BuddyPool::new(mock.clone(), BuddyConfig::region().span_size(16 << 20));
    let mut live = Vec::new();
    for i in 0..6u8 {
        let b = pool.allocate(&Request::new(3 << 20)).unwrap();
        write(&mock, &b, i);
        live.push((b, i));
    }
    assert_eq!(pool.detail().spans.len(), 2, "two 16 MiB spans so far");
    mock.fail_nth(FaultOn::Region, 1);
    let before = pool.stats();
    let e = pool
        .allocate(&Request::new(12 << 20))
        .expect_err("no new span");
    assert!(injected(&e), "{e}");
    let after = pool.stats();
    assert_eq!(
        (after.allocations, after.live_bytes),
        (before.allocations, before.live_bytes)
    );
    assert_eq!(pool.detail().spans.len(), 2, "nothing was added");
    assert_intact(&pool, &mock, &live);
    // A block that fits the spans held is still served; then growth works again.
    let b = pool.allocate(&Request::new(1 << 20)).unwrap();
    write(&mock, &b, 100);
    live.push((b, 100));
    let b = pool.allocate(&Request::new(12 << 20)).unwrap();
    write(&mock, &b, 101);
    live.push((b, 101));
    free_all(&pool, &mock, live);
}

#[test]
fn virtual_refused_on_the_second_of_two_map_calls() {
    let mock = host_mock(1 << 30);
    let pool = BuddyPool::new(mock.clone(), BuddyConfig::virtual_ranges());
    let page = mock.granularity();
    // Four one-page blocks side by side; free the second and the fourth and trim:
    // pages 0 and 2 stay mapped under live blocks, pages 1 and 3 are unmapped.
    let blocks: Vec<Block> = (0..4)
        .map(|_| pool.allocate(&Request::new(page)).unwrap())
        .collect();
    for (i, b) in blocks.iter().enumerate() {
        assert_eq!(b.ptr.0, blocks[0].ptr.0 + (i * page) as u64, "side by side");
    }
    pool.deallocate(&blocks[1]).unwrap();
    pool.deallocate(&blocks[3]).unwrap();
    pool.trim().unwrap();
    assert_eq!(pool.detail().pages.mapped_pages, 2);
    let mut live = vec![(blocks[0], 1u8), (blocks[2], 2u8)];
    for (b, tag) in &live {
        write(&mock, b, *tag);
    }
    let keep = pool.allocate(&Request::new(5 << 20)).unwrap();
    write(&mock, &keep, 3);
    live.push((keep, 3));
    // Free the two mapped blocks: the four-page range is half mapped, in two holes.
    for _ in 0..2 {
        let (b, _) = live.remove(0);
        pool.deallocate(&b).unwrap();
    }
    let maps = mock.counters().map_calls;
    mock.fail_nth(FaultOn::Map, 2);
    let e = pool
        .allocate(&Request::new(4 * page))
        .expect_err("the second map fails");
    assert!(injected(&e), "{e}");
    assert_eq!(
        mock.counters().map_calls,
        maps + 2,
        "one call per missing run"
    );
    assert_intact(&pool, &mock, &live);
    let d = pool.detail();
    assert_eq!(
        d.pages.unused_pages, 3,
        "the page mapped before the fault is kept"
    );
    // Without the fault the same request maps only the last hole.
    let b = pool.allocate(&Request::new(4 * page)).unwrap();
    assert_eq!(b.ptr, blocks[0].ptr, "placed where pages are mapped");
    assert_eq!(mock.counters().map_calls, maps + 3);
    write(&mock, &b, 4);
    live.push((b, 4));
    free_all(&pool, &mock, live);
}

#[test]
fn random_faults_through_the_allocator() {
    let cases = [
        (BuddyConfig::region().span_size(2 << 20), FaultOn::Region),
        (BuddyConfig::virtual_ranges(), FaultOn::Map),
    ];
    for (cfg, on) in cases {
        let mock = host_mock(1 << 30);
        let alloc = buddy(mock.clone(), cfg);
        let mut rng = Rng::new(11);
        let mut live: Vec<(Block, u8)> = Vec::new();
        let mut failures = 0;
        for round in 0..400u32 {
            if round % 4 == 0 {
                mock.fail_nth(on, 1 + rng.below(2));
            }
            if round % 25 == 24 {
                // Give cached memory back, so that later blocks need the backend.
                alloc.trim().unwrap();
            }
            if live.is_empty() || rng.below(3) != 0 {
                match alloc.alloc(rng.log_uniform(1, 6 << 20)) {
                    Ok(b) => {
                        let tag = (round % 250) as u8;
                        write(&mock, &b, tag);
                        live.push((b, tag));
                    }
                    Err(e) => {
                        assert!(injected(&e) || e.is_oom(), "{e}");
                        failures += 1;
                    }
                }
            } else {
                let (b, tag) = live.swap_remove(rng.below(live.len() as u64) as usize);
                read(&mock, &b, tag);
                alloc.free(b).unwrap();
            }
            assert_eq!(
                alloc.stats().reserved_bytes.current,
                mock.counters().bytes_in_use.current,
                "round {round}"
            );
            for (_, p) in alloc.pools() {
                p.verify().unwrap();
            }
        }
        assert!(failures >= 10, "faults were hit ({failures})");
        mock.clear_faults();
        for (b, tag) in live {
            read(&mock, &b, tag);
            alloc.free(b).unwrap();
        }
        alloc.trim().unwrap();
        assert_eq!(mock.counters().bytes_in_use.current, 0);
    }
}
