//! Stream order through the allocator on a mock whose events complete only when the
//! test says so: a block freed on another stream, or used on another stream, comes
//! back to its pool only after that stream's work is done, and is then reused.
use devpool_core::{Allocator, Request};
use devpool_testing::conformance::assert_apart;
use devpool_testing::{MockBackend, MockConfig};
use devpool_tlsf::{tlsf, TlsfConfig};

#[test]
fn cross_stream_free_waits_for_the_event_then_is_reused() {
    let mock = MockBackend::shared_with(MockConfig::default().manual_events());
    let alloc = tlsf(mock.clone(), TlsfConfig::default());
    let (s1, s2) = (
        devpool_testing::MockBackend::stream(1),
        devpool_testing::MockBackend::stream(2),
    );
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
    let (s1, s3) = (
        devpool_testing::MockBackend::stream(1),
        devpool_testing::MockBackend::stream(3),
    );
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

/// A pool gives a page back only once the work queued on the block's stream before
/// the free has completed; the mock refuses (and counts) an unmap under queued work,
/// so a pool that unmapped early would fail here. Nothing waits for the device.
#[test]
fn pages_go_back_only_after_the_stream_passed_the_free() {
    use devpool_core::{Backend, Pool};
    use devpool_tlsf::{TlsfMode, TlsfPool, VmConfig};
    let mock = MockBackend::shared_with(MockConfig::default().host_backed().manual_events());
    let s = mock.create_stream().unwrap();
    // No cache at all, a window of one operation: the policy gives unused pages back
    // at every free.
    let cfg = TlsfConfig::default().mode(TlsfMode::Virtual).pages(
        VmConfig::default()
            .cache(0, 0.0)
            .window_ops(1)
            .map_batch_pages(1),
    );
    let pool = TlsfPool::new(mock.clone(), cfg);
    let b = pool.allocate(&Request::new(64 << 20).on_stream(s)).unwrap();
    // A kernel-free stand-in for a slow kernel: a memset queued on s, not done.
    mock.memset(b.ptr, 0xab, b.size, s).unwrap();
    let held = mock.counters().bytes_in_use.current;
    pool.deallocate(&b).unwrap();
    // A few more operations: the recent peak is forgotten and the policy gives the
    // 32 pages back, but they wait for stream s.
    for _ in 0..4 {
        let x = pool.allocate(&Request::new(4096).on_stream(s)).unwrap();
        pool.deallocate(&x).unwrap();
    }
    let d = pool.detail();
    assert_eq!(mock.unmaps_while_busy(), 0, "no unmap under queued work");
    assert!(d.pages.retiring_pages >= 31, "{d}");
    assert_eq!(
        mock.counters().bytes_in_use.current,
        held,
        "held and counted"
    );
    assert_eq!(pool.stats().reserved_bytes.current, held);
    mock.complete_stream(s);
    for _ in 0..8 {
        let x = pool.allocate(&Request::new(4096).on_stream(s)).unwrap();
        pool.deallocate(&x).unwrap();
    }
    // The block's pages went; the small blocks' page may be retiring again.
    let d = pool.detail();
    assert!(d.pages.mapped_pages <= 2 && d.pages.unmap_calls >= 1, "{d}");
    assert_eq!(mock.unmaps_while_busy(), 0);
    assert_eq!(mock.counters().event_records, d.pages.events_recorded);
    pool.verify().unwrap();
    // trim waits for the stream's events (not for the device) and gives all back.
    pool.trim().unwrap();
    assert_eq!(mock.counters().bytes_in_use.current, 0);
    assert_eq!(mock.unmaps_while_busy(), 0);
}
