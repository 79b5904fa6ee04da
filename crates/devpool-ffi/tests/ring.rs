//! `strategy=ring` through `devpool_configure` (its own process: the settings are
//! process-wide): frames allocated and freed in order reuse the same bytes, a block
//! freed on another stream and one declared used on another stream are accepted, bad
//! frees change nothing, and the figures add up.

mod common;
use common::*;
use devpool_ffi::*;
use std::collections::VecDeque;

#[test]
fn ring_through_the_c_abi() {
    setup("strategy=ring");
    let v = stats(0);
    assert!(
        v["config"].as_str().unwrap().contains("strategy=ring"),
        "{v}"
    );

    // A stream of frames, eight in flight, freed in order.
    let size = 3 << 20;
    let mut frames: VecDeque<u64> = VecDeque::new();
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..200 {
        let p = malloc(size, 0, 0);
        assert_ne!(p, 0, "{}", last_error());
        seen.insert(p);
        frames.push_back(p);
        if frames.len() > 8 {
            free(frames.pop_front().unwrap(), size, 0, 0);
        }
    }
    let v = stats(0);
    assert_eq!(v["strategy"], "ring");
    assert_consistent(&v, 8, 8 * size as u64);
    assert!(
        seen.len() < 20,
        "the ring went round: {} addresses",
        seen.len()
    );
    let held = num(&v, &["backend_counters", "bytes_in_use", "current"]);
    assert!(held <= 10 * size as u64, "held {held}");

    // Freed on another stream, and declared used on another stream.
    let a = malloc(4096, 0, 0);
    free(a, 4096, 0, 7);
    let b = malloc(4096, 0, 0);
    assert_eq!(devpool_record_stream(as_ptr(b), 0, stream(9)), DEVPOOL_OK);
    free(b, 4096, 0, 0);

    // A foreign pointer and a double free are refused and change nothing.
    free(0x1234_5600, 4096, 0, 0);
    free(b, 4096, 0, 0);
    assert_consistent(&stats(0), 8, 8 * size as u64);

    for p in frames {
        free(p, size, 0, 0);
    }
    assert_consistent(&stats(0), 0, 0);
    devpool_trim(0);
    let v = stats(0);
    assert_eq!(
        num(&v, &["backend_counters", "bytes_in_use", "current"]),
        0,
        "{v}"
    );
}
