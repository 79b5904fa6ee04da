//! `devpool_configure` before and after the first allocation (its own process: the
//! settings are process-wide).

mod common;
use common::*;
use devpool_ffi::*;
use std::ffi::CString;

fn configure(text: &str) -> i32 {
    let c = CString::new(text).unwrap();
    // SAFETY: a NUL-terminated string that outlives the call.
    unsafe { devpool_configure(c.as_ptr()) }
}

#[test]
fn configure_rules() {
    // SAFETY: null is a documented bad argument.
    let rc = unsafe { devpool_configure(std::ptr::null()) };
    assert_eq!(rc, DEVPOOL_ERR_INVALID);
    for (bad, says) in [
        ("strategy=best", "unknown strategy"),
        ("colour=blue", "unknown key"),
        ("backend", "key=value"),
        ("strategy=slab;small_max=1M", "hybrid"),
        ("small_max=lots", "byte count"),
    ] {
        assert_eq!(configure(bad), DEVPOOL_ERR_INVALID, "{bad}");
        assert!(last_error().contains(says), "{bad}: {}", last_error());
    }
    // Not UTF-8.
    let bytes = CString::new(vec![b's', 0xff, b'=']).unwrap();
    // SAFETY: a NUL-terminated string that outlives the call.
    let rc = unsafe { devpool_configure(bytes.as_ptr()) };
    assert_eq!(rc, DEVPOOL_ERR_INVALID);

    // Keys apply over each other until the first allocation.
    assert_eq!(configure("backend=mock;log=off;strategy=slab"), DEVPOOL_OK);
    assert_eq!(
        configure("strategy=hybrid-inference;small_max=64K"),
        DEVPOOL_OK
    );
    let pending = stats(0);
    assert_eq!(pending["initialized"], false);
    let cfg = pending["config"].as_str().unwrap();
    assert!(cfg.contains("strategy=hybrid-inference"), "{cfg}");
    assert!(cfg.contains("small_max=65536"), "{cfg}");
    assert!(cfg.contains("backend=mock"), "{cfg}");

    let p = malloc(100 << 10, 0, 0);
    assert_ne!(p, 0, "{}", last_error());
    let v = stats(0);
    assert_eq!(v["strategy"], "hybrid-inference");
    // 100 KiB is above the 64 KiB small_max: it took the large route.
    assert_eq!(
        num(&v, &["routes", "large", "live_blocks", "current"]),
        1,
        "{v}"
    );
    assert_eq!(
        num(&v, &["routes", "small", "live_blocks", "current"]),
        0,
        "{v}"
    );

    assert_eq!(configure("strategy=slab"), DEVPOOL_ERR_TOO_LATE);
    assert_eq!(configure("nonsense"), DEVPOOL_ERR_TOO_LATE);
    // Every device made later uses the settings fixed at the first one.
    let q = malloc(10, 1, 0);
    assert_eq!(stats(1)["strategy"], "hybrid-inference");
    free(q, 10, 1, 0);
    free(p, 100 << 10, 0, 0);
    assert_consistent(&stats(0), 0, 0);
}
