//! Stream order through the allocator on a mock whose events complete only when the
//! test says so: a block freed on another stream, or used on another stream, comes
//! back to its pool only after that stream's work is done, and is then reused.
use devpool_core::testing::assert_apart;
use devpool_core::{Allocator, MockBackend, MockConfig, Request, StreamId};
use devpool_tlsf::{tlsf, TlsfConfig};

#[test]
fn cross_stream_free_waits_for_the_event_then_is_reused() {
    let mock = MockBackend::shared_with(MockConfig::default().manual_events());
    let alloc = tlsf(mock.clone(), TlsfConfig::default());
    let (s1, s2) = (StreamId(1), StreamId(2));
    let a = alloc
        .allocate(Request::new(64 << 20).on_stream(s1))
        .unwrap();
    let keep = alloc.allocate(Request::new(8 << 20).on_stream(s1)).unwrap();
    alloc.deallocate(a, s2).unwrap();
    assert_eq!(alloc.pending_frees(), 1);
    let b = alloc
        .allocate(Request::new(64 << 20).on_stream(s1))
        .unwrap();
    assert_apart(&b, &a, "reused before stream 2's work completed");
    // A smaller request would fit inside the pending block at any offset.
    let small = alloc.allocate(Request::new(1 << 20).on_stream(s1)).unwrap();
    assert_apart(
        &small,
        &a,
        "part of it reused before stream 2's work completed",
    );
    alloc.free(small).unwrap();
    mock.complete_stream(s2);
    let c = alloc
        .allocate(Request::new(64 << 20).on_stream(s1))
        .unwrap();
    assert_eq!(alloc.pending_frees(), 0);
    assert_eq!(
        c.ptr, a.ptr,
        "the freed block is back in stream 1's pool and fits exactly"
    );
    for blk in [b, c, keep] {
        alloc.free(blk).unwrap();
    }
}

#[test]
fn record_stream_holds_the_block_until_that_stream_is_done() {
    let mock = MockBackend::shared_with(MockConfig::default().manual_events());
    let alloc = tlsf(mock.clone(), TlsfConfig::default());
    let (s1, s3) = (StreamId(1), StreamId(3));
    let a = alloc
        .allocate(Request::new(32 << 20).on_stream(s1))
        .unwrap();
    alloc.record_stream(&a, s3).unwrap();
    alloc.free(a).unwrap();
    assert!(alloc.free(a).is_err(), "double free while pending");
    let b = alloc
        .allocate(Request::new(32 << 20).on_stream(s1))
        .unwrap();
    assert_apart(&b, &a, "reused before stream 3's work completed");
    let small = alloc.allocate(Request::new(4096).on_stream(s1)).unwrap();
    assert_apart(
        &small,
        &a,
        "part of it reused before stream 3's work completed",
    );
    alloc.free(small).unwrap();
    // Another stream has its own pool: it never sees stream 1's memory.
    let other = alloc
        .allocate(Request::new(32 << 20).on_stream(s3))
        .unwrap();
    assert_apart(&other, &a, "reused by another stream");
    mock.complete_all();
    let c = alloc
        .allocate(Request::new(32 << 20).on_stream(s1))
        .unwrap();
    assert_eq!(c.ptr, a.ptr);
    for blk in [b, c, other] {
        alloc.free(blk).unwrap();
    }
    alloc.trim().unwrap();
    assert_eq!(alloc.stats().reserved_bytes.current, 0);
}
