//! Helpers shared by the tests: the mock configuration, the C entry points
//! with integer stream handles and parsed statistics, and the shared library that
//! `cargo test` built.
#![allow(dead_code)]

use devpool_ffi::*;
use std::ffi::{c_void, CStr, CString};
use std::path::PathBuf;
use std::sync::Once;

/// The shared library that `cargo test` built beside this test binary.
pub fn shared_library() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let deps = exe.parent()?;
    [deps.to_path_buf(), deps.parent()?.to_path_buf()]
        .into_iter()
        .map(|d| d.join("libdevpool_ffi.so"))
        .find(|p| p.exists())
}

/// Configure the process for the mock backend, once, before any test allocates.
pub fn setup(extra: &str) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let text = CString::new(format!("backend=mock;log=off;{extra}")).unwrap();
        // SAFETY: a NUL-terminated string that outlives the call.
        let rc = unsafe { devpool_configure(text.as_ptr()) };
        assert_eq!(rc, DEVPOOL_OK, "{}", last_error());
    });
}

pub fn stream(s: u64) -> CudaStream {
    std::ptr::without_provenance_mut(s as usize)
}

pub fn malloc(size: usize, device: i32, s: u64) -> u64 {
    devpool_malloc(size, device, stream(s)).addr() as u64
}

pub fn free(ptr: u64, size: usize, device: i32, s: u64) {
    devpool_free(as_ptr(ptr), size, device, stream(s))
}

pub fn as_ptr(addr: u64) -> *mut c_void {
    std::ptr::without_provenance_mut(addr as usize)
}

pub fn last_error() -> String {
    // SAFETY: devpool_last_error returns a NUL-terminated string valid until the next
    // failing call on this thread; it is copied at once.
    unsafe { CStr::from_ptr(devpool_last_error()) }
        .to_string_lossy()
        .into_owned()
}

/// The statistics of `device`, parsed; panics if the call fails.
pub fn stats(device: i32) -> serde_json::Value {
    let p = devpool_stats_json(device);
    assert!(!p.is_null(), "stats of device {device}: {}", last_error());
    // SAFETY: a string from devpool_stats_json, copied, then freed once.
    let text = unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_owned();
    // SAFETY: as above.
    unsafe { devpool_string_free(p) };
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// A number inside the statistics, by a path of keys.
pub fn num(v: &serde_json::Value, path: &[&str]) -> u64 {
    let mut cur = v;
    for k in path {
        cur = &cur[*k];
    }
    cur.as_u64()
        .unwrap_or_else(|| panic!("{path:?} is not a number in {v}"))
}

/// Check the invariants that tie the figures together, and that `live` blocks of
/// `live_bytes` requested bytes are out.
pub fn assert_consistent(v: &serde_json::Value, live: u64, live_bytes: u64) {
    let s = &v["stats"];
    assert_eq!(num(s, &["live_blocks", "current"]), live, "{v}");
    assert_eq!(num(v, &["live_pointers"]), live, "{v}");
    assert_eq!(num(s, &["allocations"]) - num(s, &["frees"]), live, "{v}");
    assert_eq!(num(s, &["live_bytes", "current"]), live_bytes, "{v}");
    assert!(num(s, &["allocated_bytes", "current"]) >= live_bytes, "{v}");
    // The pools count what they hold; the backend counts what it gave out: the same.
    let held = num(v, &["backend_counters", "bytes_in_use", "current"]);
    assert_eq!(num(s, &["reserved_bytes", "current"]), held, "{v}");
    assert_eq!(num(v, &["reserved_bytes"]), held, "{v}");
    assert_eq!(
        num(v, &["peak_reserved_bytes"]),
        num(v, &["backend_counters", "bytes_in_use", "peak"]),
        "{v}"
    );
    assert!(held >= num(s, &["allocated_bytes", "current"]), "{v}");
}
