//! `Guarded`: overwritten guards are found on the host-backed mock, and the memory is
//! freed all the same.
use devpool_adaptors::{Guarded, GUARD_PATTERN};
use devpool_core::{
    direct, Allocator, Backend, BackendError, Block, DeviceId, DevicePtr, Error, Request,
};
use devpool_testing::{MockBackend, MockConfig};
use std::sync::Arc;

fn host() -> Arc<MockBackend> {
    MockBackend::shared_with(MockConfig::default().host_backed().capacity(1 << 30))
}

fn corrupted(r: devpool_core::Result<()>) -> String {
    match r {
        Err(Error::Corrupted { detail, .. }) => detail,
        other => panic!("expected a corruption error, got {other:?}"),
    }
}

fn assert_nothing_held(a: &dyn Allocator, mock: &MockBackend) {
    a.trim().unwrap();
    assert_eq!(a.stats().live_blocks.current, 0);
    assert_eq!(mock.counters().bytes_in_use.current, 0, "nothing leaks");
}

#[test]
fn write_past_the_end_is_detected() {
    let mock = host();
    let a = Guarded::new(direct(mock.clone()));
    for (size, past) in [(1000usize, 0usize), (4096, 5), (1, 255), (0, 0)] {
        let b = a.alloc(size).unwrap();
        assert_eq!(b.size, size.max(1));
        // The block itself may be written to its last byte.
        mock.memset(b.ptr, 0x11, b.size, b.stream).unwrap();
        mock.copy_to_device(b.ptr.offset(b.size + past), &[0x42], b.stream)
            .unwrap();
        let detail = corrupted(a.free(b));
        assert!(
            detail.contains(&format!("{past} B past the end")),
            "{detail}"
        );
        assert!(detail.contains("0x42"), "{detail}");
    }
    assert_nothing_held(&a, &mock);
}

#[test]
fn write_before_the_start_is_detected() {
    let mock = host();
    let a = Guarded::with_guard(direct(mock.clone()), 512).unwrap();
    let b = a.alloc(3000).unwrap();
    // Bytes 3 and 2 before the start: the nearest one is reported.
    mock.copy_to_device(DevicePtr(b.ptr.0 - 3), &[0, 0], b.stream)
        .unwrap();
    let detail = corrupted(a.free(b));
    assert!(detail.contains("2 B before the start"), "{detail}");
    assert_nothing_held(&a, &mock);
}

#[test]
fn clean_blocks_free_cleanly_and_keep_their_data() {
    let mock = host();
    let a = Guarded::new(direct(mock.clone()));
    let mut blocks = Vec::new();
    for (i, align) in [256usize, 512, 4096, 65536, 1 << 20]
        .into_iter()
        .enumerate()
    {
        let b = a
            .allocate(Request::new(10_000 + i).with_align(align))
            .unwrap();
        assert!(b.ptr.is_aligned(align), "{b:?} not aligned to {align}");
        mock.memset(b.ptr, i as u8 + 1, b.size, b.stream).unwrap();
        blocks.push((b, i as u8 + 1));
    }
    devpool_testing::conformance::check_blocks(&blocks.iter().map(|x| x.0).collect::<Vec<_>>());
    for (b, tag) in blocks {
        let mut back = vec![0u8; b.size];
        mock.copy_to_host(&mut back, b.ptr, b.stream).unwrap();
        assert!(back.iter().all(|&x| x == tag));
        let mut guard = [0u8; 256];
        mock.copy_to_host(&mut guard, b.ptr.offset(b.size), b.stream)
            .unwrap();
        assert!(guard.iter().all(|&x| x == GUARD_PATTERN), "guard filled");
        a.free(b).unwrap();
    }
    assert_nothing_held(&a, &mock);
}

#[test]
fn stats_are_the_callers_view() {
    let mock = host();
    let a = Guarded::new(direct(mock.clone()));
    let b = a.alloc(1000).unwrap();
    let s = a.stats();
    assert_eq!(s.live_bytes.current, 1000);
    assert_eq!(s.allocated_bytes.current, 1000);
    assert_eq!(s.live_blocks.current, 1);
    assert_eq!(
        s.reserved_bytes.current,
        mock.counters().bytes_in_use.current,
        "reserved comes from the wrapped allocator, guards included"
    );
    assert!(s.cached_bytes() >= 2 * 256);
    a.free(b).unwrap();
    assert_eq!(a.stats().live_bytes.current, 0);
}

#[test]
fn bad_frees_are_refused() {
    let mock = host();
    let a = Guarded::new(direct(mock.clone()));
    let b = a.alloc(5000).unwrap();
    let inside = Block {
        ptr: b.ptr.offset(256),
        ..b
    };
    assert!(matches!(a.free(inside), Err(Error::NotOwned { .. })));
    let forged = Block {
        size: b.size + 256,
        ..b
    };
    assert!(matches!(a.free(forged), Err(Error::NotOwned { .. })));
    let other_dev = Block {
        device: DeviceId(5),
        ..b
    };
    assert!(matches!(a.free(other_dev), Err(Error::WrongDevice { .. })));
    // The handed-out pointer minus the guard is the wrapped block's own address.
    let raw = Block {
        ptr: DevicePtr(b.ptr.0 - 256),
        ..b
    };
    assert!(matches!(a.free(raw), Err(Error::NotOwned { .. })));
    assert_eq!(a.stats().live_blocks.current, 1);
    a.free(b).unwrap();
    assert!(
        matches!(a.free(b), Err(Error::NotOwned { .. })),
        "double free"
    );
    assert_nothing_held(&a, &mock);
}

#[test]
fn bad_guard_sizes_are_refused() {
    for g in [0usize, 100, 300] {
        assert!(Guarded::with_guard(direct(host()), g).is_err(), "guard {g}");
    }
    assert_eq!(
        Guarded::with_guard(direct(host()), 1024).unwrap().guard(),
        1024
    );
}

#[test]
fn backend_without_data_access_fails_cleanly() {
    let mock = MockBackend::shared();
    let a = Guarded::new(direct(mock.clone()));
    let e = a.alloc(100).unwrap_err();
    assert!(
        matches!(e, Error::Backend(BackendError::Unsupported(_))),
        "{e}"
    );
    assert_eq!(
        mock.counters().bytes_in_use.current,
        0,
        "the block went back"
    );
    assert_eq!(a.name(), "guarded(direct)");
}

#[test]
fn huge_and_bad_requests() {
    let mock = host();
    let a = Guarded::new(direct(mock.clone()));
    assert!(matches!(a.alloc(usize::MAX), Err(Error::TooLarge { .. })));
    assert!(matches!(
        a.allocate(Request::new(1).with_align(3)),
        Err(Error::InvalidAlignment { align: 3 })
    ));
    assert!(a.alloc(1 << 40).unwrap_err().is_oom());
    assert_nothing_held(&a, &mock);
}

#[test]
fn cross_stream_free_waits_and_checks() {
    let mock = MockBackend::shared_with(MockConfig::default().host_backed().manual_events());
    let a = Guarded::new(direct(mock.clone()));
    let (s1, s2) = (
        devpool_testing::MockBackend::stream(1),
        devpool_testing::MockBackend::stream(2),
    );
    let b = a.allocate(Request::new(2048).on_stream(s1)).unwrap();
    a.record_stream(&b, s2).unwrap();
    mock.copy_to_device(b.ptr.offset(2048), &[1], s2).unwrap();
    assert!(matches!(a.free(b), Err(Error::Corrupted { .. })));
    assert_eq!(
        a.stats().live_blocks.current,
        1,
        "still waiting for stream 2"
    );
    mock.complete_all();
    a.trim().unwrap();
    assert_eq!(a.stats().live_blocks.current, 0);
    assert_eq!(mock.counters().bytes_in_use.current, 0);
}

#[test]
fn out_of_memory_is_told_in_the_callers_terms() {
    let mock = MockBackend::shared_with(MockConfig::default().host_backed().capacity(8 << 20));
    let a = Guarded::new(direct(mock.clone()));
    let keep = a.alloc(1000).unwrap();
    let e = a.alloc(64 << 20).unwrap_err();
    let Error::OutOfMemory(info) = &e else {
        panic!("{e}")
    };
    assert_eq!(
        info.requested,
        64 << 20,
        "the caller's request, not the guarded one"
    );
    assert_eq!(info.live, 1000);
    assert!(info.note.contains("guards included"), "{}", info.note);
    a.free(keep).unwrap();
}
