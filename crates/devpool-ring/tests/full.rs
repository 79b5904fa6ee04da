//! What the ring does when it is full, as its configuration says: fail at once with
//! its state in the message, wait for other threads' frees or for other streams'
//! events, or grow (in regions: a second ring, the first given back once drained).
use devpool_core::{Allocator, Backend, Request};
use devpool_ring::{ring, RingConfig, RingMode, WhenFull};
use devpool_testing::{MockBackend, MockConfig};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const MIB: usize = 1 << 20;

#[test]
fn fail_says_the_ring_is_full_and_changes_nothing() {
    let mock = MockBackend::shared();
    let r = ring(
        mock.clone(),
        RingConfig::default()
            .capacity(8 * MIB)
            .when_full(WhenFull::Fail),
    );
    let a = r.alloc(3 * MIB).unwrap();
    let b = r.alloc(3 * MIB).unwrap();
    let before = r.stats();
    let e = r.alloc(3 * MIB).unwrap_err();
    assert!(e.is_oom(), "{e}");
    let msg = e.to_string();
    for says in [
        "the ring is full",
        "when full: fail",
        "capacity 8.00 MiB",
        "2 live blocks",
    ] {
        assert!(msg.contains(says), "{says}: {msg}");
    }
    let after = r.stats();
    assert_eq!(after.live_blocks, before.live_blocks);
    assert!(
        after.reserved_bytes.current <= 8 * MIB as u64,
        "never more than the capacity: {after:?}"
    );
    assert!(r.detail().refused >= 1);
    r.free(a).unwrap();
    let c = r.alloc(3 * MIB).expect("the tail made room");
    for x in [b, c] {
        r.free(x).unwrap();
    }
    devpool_testing::conformance::assert_empty(&r, &mock);
}

#[test]
fn wait_gets_room_another_thread_frees() {
    let mock = MockBackend::shared();
    let r = Arc::new(ring(
        mock.clone(),
        RingConfig::default()
            .capacity(8 * MIB)
            .when_full(WhenFull::Wait(Duration::from_secs(30))),
    ));
    let a = r.alloc(4 * MIB).unwrap();
    let b = r.alloc(4 * MIB).unwrap();
    let freed = Arc::new(AtomicBool::new(false));
    let t = {
        let (r, freed) = (r.clone(), freed.clone());
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            freed.store(true, Ordering::SeqCst);
            r.free(a).unwrap();
        })
    };
    let c = r
        .alloc(4 * MIB)
        .expect("room once the other thread freed the oldest");
    assert!(
        freed.load(Ordering::SeqCst),
        "the allocation waited for the free"
    );
    assert_eq!(c.ptr, a.ptr, "the tail's room");
    assert!(r.detail().full >= 1);
    t.join().unwrap();
    for x in [b, c] {
        r.free(x).unwrap();
    }
    devpool_testing::conformance::assert_empty(&*r, &mock);
}

#[test]
fn wait_gets_room_when_another_streams_work_completes() {
    let mock = MockBackend::shared_with(MockConfig::default().manual_events());
    let r = ring(
        mock.clone(),
        RingConfig::default()
            .capacity(8 * MIB)
            .when_full(WhenFull::Wait(Duration::from_secs(30))),
    );
    let other = devpool_testing::MockBackend::stream(5);
    let a = r.alloc(4 * MIB).unwrap();
    let b = r.alloc(4 * MIB).unwrap();
    r.deallocate(a, other).unwrap(); // its bytes wait for stream 5
    assert_eq!(r.detail().waiting_blocks, 1);
    let done = Arc::new(AtomicBool::new(false));
    let t = {
        let (mock, done) = (mock.clone(), done.clone());
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            done.store(true, Ordering::SeqCst);
            mock.complete_stream(other);
        })
    };
    let c = r
        .alloc(4 * MIB)
        .expect("room once stream 5 passed the free");
    assert!(
        done.load(Ordering::SeqCst),
        "not before stream 5's work completed"
    );
    t.join().unwrap();
    for x in [b, c] {
        r.free(x).unwrap();
    }
    devpool_testing::conformance::assert_empty(&r, &mock);
}

#[test]
fn growing_in_regions_opens_a_larger_ring_and_gives_the_old_one_back() {
    let mock = MockBackend::shared();
    let r = ring(
        mock.clone(),
        RingConfig::default()
            .mode(RingMode::Region)
            .capacity(8 * MIB),
    );
    let a = r.alloc(6 * MIB).unwrap();
    let b = r.alloc(6 * MIB).unwrap(); // does not fit: a second ring
    let s = r.detail();
    assert_eq!((s.rings, s.grows), (2, 1), "{s}");
    assert_eq!(
        mock.counters().bytes_in_use.current,
        (8 + 16) as u64 * MIB as u64
    );
    r.free(a).unwrap(); // the first ring drained: it goes back
    assert_eq!(r.detail().rings, 1);
    assert_eq!(mock.counters().bytes_in_use.current, 16 * MIB as u64);
    let c = r.allocate(Request::new(6 * MIB)).unwrap();
    for x in [b, c] {
        r.free(x).unwrap();
    }
    devpool_testing::conformance::assert_empty(&r, &mock);
}
