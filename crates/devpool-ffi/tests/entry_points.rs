//! The C entry points on the mock backend. Each test uses its own device, so the
//! statistics of one are not disturbed by another running at the same time.
//!
//! Devices: 0 round trip, 1 misuse, 2 and 3 wrong device, 4 figures and trim,
//! 5 streams and CuPy, 6 never used, 7 out of memory and sizes, 63 the last ordinal.

mod common;
use common::*;
use devpool_core::Rng;
use devpool_ffi::*;
use std::collections::HashSet;

#[test]
fn round_trip_with_zero_and_odd_sizes() {
    setup("");
    let dev = 0;
    let sizes = [
        0usize,
        1,
        255,
        256,
        257,
        4096,
        1 << 20,
        (1 << 20) + 1,
        40 << 20,
    ];
    let mut seen = HashSet::new();
    let ptrs: Vec<u64> = sizes
        .iter()
        .map(|&s| {
            let p = malloc(s, dev, 0);
            assert_ne!(p, 0, "malloc({s}): {}", last_error());
            assert_eq!(p % 256, 0, "{p:#x} for {s} B is not 256-byte aligned");
            assert!(seen.insert(p), "{p:#x} handed out twice");
            p
        })
        .collect();
    let total: usize = sizes.iter().sum();
    assert_consistent(&stats(dev), sizes.len() as u64, total as u64);

    for (&p, &s) in ptrs.iter().zip(&sizes) {
        free(p, s, dev, 0);
    }
    free(0, 0, dev, 0); // free(NULL): nothing at all
    let v = stats(dev);
    assert_consistent(&v, 0, 0);
    assert_eq!(num(&v, &["stats", "allocations"]), sizes.len() as u64);
    assert_eq!(num(&v, &["bad_calls", "unknown_pointer"]), 0, "{v}");
    assert_eq!(v["strategy"], "hybrid");
    assert_eq!(v["backend"], "mock");
    assert!(v["routes"]["small"].is_object(), "{v}");
    assert_eq!(
        v["driver_calls"],
        serde_json::json!([]),
        "the mock times no driver"
    );

    // The settings are fixed once an allocator exists.
    // SAFETY: a NUL-terminated literal.
    let rc = unsafe { devpool_configure(c"strategy=slab".as_ptr()) };
    assert_eq!(rc, DEVPOOL_ERR_TOO_LATE);
    assert!(
        last_error().contains("first allocation"),
        "{}",
        last_error()
    );
    assert_eq!(stats(dev)["strategy"], "hybrid");
}

#[test]
fn foreign_pointers_and_double_frees_change_nothing() {
    setup("");
    let dev = 1;
    let a = malloc(1000, dev, 0);
    let b = malloc(3 << 20, dev, 0);
    assert!(a != 0 && b != 0, "{}", last_error());
    let before = stats(dev);

    let local = 0u64;
    let foreign = [
        std::ptr::addr_of!(local).addr() as u64, // a host address
        0xdead_be00,                             // nowhere
        a + 256,                                 // inside a live block
        b + (1 << 20),                           // inside another
    ];
    for (i, &p) in foreign.iter().enumerate() {
        free(p, 1000, dev, 0);
        let msg = last_error();
        assert!(msg.contains("not a live block"), "{msg}");
        let v = stats(dev);
        assert_eq!(v["stats"], before["stats"], "after foreign free {i}");
        assert_eq!(num(&v, &["bad_calls", "unknown_pointer"]), i as u64 + 1);
    }

    free(a, 1000, dev, 0);
    let after_free = stats(dev);
    assert_consistent(&after_free, 1, 3 << 20);
    free(a, 1000, dev, 0); // double free
    assert!(last_error().contains("double free"), "{}", last_error());
    let v = stats(dev);
    assert_eq!(v["stats"], after_free["stats"]);
    assert_eq!(
        num(&v, &["bad_calls", "unknown_pointer"]),
        foreign.len() as u64 + 1
    );

    // Still serving: the freed address comes back for the same size.
    let c = malloc(1000, dev, 0);
    assert_ne!(c, 0);
    free(c, 1000, dev, 0);
    free(b, 3 << 20, dev, 0);
    assert_consistent(&stats(dev), 0, 0);
}

#[test]
fn a_free_on_the_wrong_device_frees_nothing() {
    setup("");
    let (home, other) = (2, 3);
    let p = malloc(8192, home, 0);
    let q = malloc(8192, other, 0);
    assert!(p != 0 && q != 0, "{}", last_error());
    free(p, 8192, other, 0);
    assert!(
        last_error().contains("lives on device 2"),
        "{}",
        last_error()
    );
    assert_consistent(&stats(home), 1, 8192);
    assert_consistent(&stats(other), 1, 8192);
    assert_eq!(num(&stats(other), &["bad_calls", "wrong_device"]), 1);

    // A device that has no allocator: the block is found on its home device.
    free(p, 8192, 6, 0);
    assert!(
        last_error().contains("lives on device 2"),
        "{}",
        last_error()
    );
    assert_eq!(stats(6)["initialized"], false);

    free(p, 8192, home, 0);
    free(q, 8192, other, 0);
    assert_consistent(&stats(home), 0, 0);
    assert_consistent(&stats(other), 0, 0);
}

#[test]
fn figures_add_up_and_trim_gives_everything_back() {
    setup("");
    let dev = 4;
    let mut rng = Rng::new(7);
    let mut live: Vec<(u64, usize)> = Vec::new();
    let mut live_bytes = 0u64;
    for step in 0..2000 {
        if live.is_empty() || rng.below(100) < 55 {
            let size = rng.log_uniform(1, 32 << 20);
            let p = malloc(size, dev, 0);
            assert_ne!(p, 0, "{}", last_error());
            live.push((p, size));
            live_bytes += size as u64;
        } else {
            let (p, size) = live.swap_remove(rng.below(live.len() as u64) as usize);
            free(p, size, dev, 0);
            live_bytes -= size as u64;
        }
        if step % 250 == 0 {
            assert_consistent(&stats(dev), live.len() as u64, live_bytes);
        }
    }
    assert_consistent(&stats(dev), live.len() as u64, live_bytes);
    for (p, size) in live.drain(..) {
        free(p, size, dev, 0);
    }
    let v = stats(dev);
    assert_consistent(&v, 0, 0);
    let held = num(&v, &["reserved_bytes"]);
    assert!(held > 0, "the pools cache memory after the run: {v}");
    let released = devpool_trim(dev);
    let after = stats(dev);
    assert_eq!(released as u64, held - num(&after, &["reserved_bytes"]));
    assert_eq!(num(&after, &["reserved_bytes"]), 0, "{after}");
    assert_eq!(devpool_trim(dev), 0, "nothing left to give back");
    // The peak survives the trim.
    assert!(num(&after, &["peak_reserved_bytes"]) >= held);
}

#[test]
fn streams_record_stream_and_cupy() {
    setup("");
    let dev = 5;
    let (s1, s2) = (0x11, 0x22);
    let p = malloc(1 << 16, dev, s1);
    assert_ne!(p, 0);
    let records = |v: &serde_json::Value| num(v, &["backend_counters", "event_records"]);
    let before = records(&stats(dev));
    assert_eq!(
        devpool_record_stream(as_ptr(p), dev, stream(s2)),
        DEVPOOL_OK
    );
    free(p, 1 << 16, dev, s1);
    // The free waited for the recorded stream: an event was recorded on it.
    assert!(records(&stats(dev)) > before);

    // Freed on another stream than its own: an event guards it too.
    let q = malloc(1 << 16, dev, s1);
    let before = records(&stats(dev));
    free(q, 1 << 16, dev, s2);
    assert!(records(&stats(dev)) > before);
    assert_consistent(&stats(dev), 0, 0);

    assert_eq!(
        devpool_record_stream(as_ptr(q), dev, stream(s2)),
        DEVPOOL_ERR_NOT_FOUND
    );
    assert_eq!(
        devpool_record_stream(as_ptr(q), -1, stream(s2)),
        DEVPOOL_ERR_INVALID
    );

    // CuPy: param null is the default stream, or a stream handle.
    for param in [0u64, 0x33] {
        let c = devpool_cupy_malloc(stream(param), 12345, dev);
        assert!(!c.is_null(), "{}", last_error());
        assert_consistent(&stats(dev), 1, 12345);
        devpool_cupy_free(stream(param), c, dev);
        assert_consistent(&stats(dev), 0, 0);
        devpool_cupy_free(stream(param), c, dev); // double free: ignored
    }
    assert!(devpool_cupy_malloc(stream(0), 1, -3).is_null());
    assert!(num(&stats(dev), &["stats", "allocations"]) >= 4);
}

#[test]
fn out_of_memory_returns_null_and_sizes_are_checked() {
    setup("");
    let dev = 7;
    let keep = malloc(1 << 20, dev, 0);
    assert_ne!(keep, 0);
    for size in [1usize << 50, usize::MAX, usize::MAX / 2 + 1] {
        assert_eq!(malloc(size, dev, 0), 0, "{size} B");
        assert!(!last_error().is_empty());
    }
    assert!(last_error().contains("devpool_malloc"), "{}", last_error());
    let v = stats(dev);
    assert_eq!(num(&v, &["stats", "failures"]), 3, "{v}");
    assert_consistent(&v, 1, 1 << 20);

    // A wrong size at free: reported, and the block is freed all the same.
    free(keep, 4096, dev, 0);
    let v = stats(dev);
    assert_eq!(num(&v, &["bad_calls", "size_mismatch"]), 1);
    assert_consistent(&v, 0, 0);
}

#[test]
fn bad_ordinals_are_refused() {
    setup("");
    for d in [-1, -100, MAX_DEVICES as i32, i32::MAX] {
        assert_eq!(malloc(64, d, 0), 0);
        assert!(last_error().contains("out of range"), "{}", last_error());
        assert!(devpool_stats_json(d).is_null());
        assert_eq!(devpool_trim(d), 0);
        free(0x7f00_0000_0000, 64, d, 0);
    }
    // Every ordinal below the limit is served, each by its own mock device.
    let top = MAX_DEVICES as i32 - 1;
    let p = malloc(64, top, 0);
    assert_ne!(p, 0, "{}", last_error());
    assert_eq!(num(&stats(top), &["device"]), top as u64);
    free(p, 64, top, 0);
    assert_consistent(&stats(top), 0, 0);
    // Nothing to trim or report on a device never used.
    assert_eq!(devpool_trim(6), 0);
    assert_eq!(stats(6)["initialized"], false);
}

#[test]
fn version_and_empty_strings() {
    // SAFETY: static NUL-terminated string.
    let v = unsafe { std::ffi::CStr::from_ptr(devpool_version()) };
    assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
    // SAFETY: null is documented as a no-op.
    unsafe { devpool_string_free(std::ptr::null_mut()) };
    // A thread that never failed has an empty message.
    let msg = std::thread::spawn(last_error).join().unwrap();
    assert_eq!(msg, "");
}
