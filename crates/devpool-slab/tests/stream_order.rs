//! Stream order on the mock with manual events: a slot freed on one stream is not
//! handed to any stream, by any thread's cache, before that free's event
//! completes, and comes back to its own stream once it has.
use devpool_core::{Allocator, Block, Request, StreamId};
use devpool_slab::{slab, SlabConfig};
use devpool_testing::conformance::overlaps;
use devpool_testing::{MockBackend, MockConfig};
use std::sync::{Arc, Barrier};

const SIZE: usize = 4096;

fn grab(alloc: &dyn Allocator, stream: StreamId, n: usize) -> Vec<Block> {
    (0..n)
        .map(|_| {
            alloc
                .allocate(Request::new(SIZE).on_stream(stream))
                .unwrap()
        })
        .collect()
}

#[test]
fn cross_stream_free_waits_for_its_event_in_every_cache() {
    let mock = MockBackend::shared_with(MockConfig::default().manual_events());
    let alloc = Arc::new(slab(mock.clone(), SlabConfig::default()));
    let (s1, s2, s3) = (
        devpool_testing::MockBackend::stream(1),
        devpool_testing::MockBackend::stream(2),
        devpool_testing::MockBackend::stream(3),
    );

    // The block is the lowest slot of its slab, so it would be the next one handed
    // out on s1 if it went back at once.
    let b = alloc.allocate(Request::new(SIZE).on_stream(s1)).unwrap();
    alloc.deallocate(b, s2).unwrap();
    assert_eq!(alloc.pending_frees(), 1);

    // Four threads allocate and free on s1 and s3 while the event is pending: in
    // their own caches and in the cache that owns the block's slab.
    let start = Arc::new(Barrier::new(4));
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let (alloc, start) = (alloc.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                let stream = if t % 2 == 0 { s1 } else { s3 };
                for round in 0..50 {
                    let got = grab(&*alloc, stream, 1 + round % 9);
                    assert!(
                        got.iter().all(|x| !overlaps(x, &b)),
                        "slot reused on {stream:?} before the free's event completed"
                    );
                    for x in got {
                        alloc.free(x).unwrap();
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let here = grab(&*alloc, s1, 8);
    assert!(
        here.iter().all(|x| !overlaps(x, &b)),
        "reused by its own thread"
    );
    for x in here {
        alloc.free(x).unwrap();
    }
    assert_eq!(alloc.pending_frees(), 1, "the event has not completed");

    // Once s2's work completes, the slot returns to s1, and to s1 only.
    mock.complete_stream(s2);
    let on_s3 = grab(&*alloc, s3, 8);
    assert!(on_s3.iter().all(|x| !overlaps(x, &b)));
    assert_eq!(alloc.pending_frees(), 0);
    let again = alloc.allocate(Request::new(SIZE).on_stream(s1)).unwrap();
    assert_eq!(
        again.ptr, b.ptr,
        "the lowest free slot comes back to its stream"
    );
    alloc.free(again).unwrap();
    for x in on_s3 {
        alloc.free(x).unwrap();
    }
    devpool_testing::conformance::assert_empty(&*alloc, &mock);
}

#[test]
fn recorded_stream_holds_the_slot_until_its_event() {
    let mock = MockBackend::shared_with(MockConfig::default().manual_events());
    let alloc = Arc::new(slab(mock.clone(), SlabConfig::default()));
    let (s1, s2) = (
        devpool_testing::MockBackend::stream(1),
        devpool_testing::MockBackend::stream(2),
    );
    let b = alloc.allocate(Request::new(SIZE).on_stream(s1)).unwrap();
    alloc.record_stream(&b, s2).unwrap();
    // Freed on its own stream, from another thread: still waits for s2.
    let a2 = alloc.clone();
    std::thread::spawn(move || a2.free(b).unwrap())
        .join()
        .unwrap();
    assert!(
        alloc.free(b).is_err(),
        "a double free while pending is caught"
    );
    let got = grab(&*alloc, s1, 16);
    assert!(got.iter().all(|x| !overlaps(x, &b)));
    for x in got {
        alloc.free(x).unwrap();
    }
    mock.complete_stream(s2);
    let again = alloc.allocate(Request::new(SIZE).on_stream(s1)).unwrap();
    assert_eq!(again.ptr, b.ptr);
    alloc.free(again).unwrap();
    devpool_testing::conformance::assert_empty(&*alloc, &mock);
}
