//! The trace readers fed arbitrary bytes: they must return `Ok` or `Err` and never
//! panic. What they accept is checked further: its summary can be computed, and a
//! trace whose times never go backwards writes out as CSV and reads back unchanged
//! (the promise of `write_rmm_csv`).

use crate::known::{gunzip, long_hours, skipped};
use devpool_trace::{read_pytorch_snapshot, read_rmm_csv, read_trace, write_rmm_csv, Trace};
use std::path::PathBuf;

/// `read_rmm_csv` on arbitrary bytes.
pub fn rmm_csv(data: &[u8]) {
    if skipped("csv-hours") && long_hours(data) {
        return;
    }
    if let Ok(trace) = read_rmm_csv(data, "fuzz") {
        check_trace(&trace);
    }
}

/// `read_pytorch_snapshot` on arbitrary bytes.
pub fn pytorch_snapshot(data: &[u8]) {
    if let Ok(trace) = read_pytorch_snapshot(data, "fuzz") {
        check_trace(&trace);
    }
}

/// `read_trace` on a file holding `data`. Bytes that are neither gzip nor a pickle
/// must read exactly as `read_rmm_csv` reads them.
pub fn read_trace_file(data: &[u8]) {
    if skipped("csv-hours") && (long_hours(data) || long_hours(&gunzip(data, 1 << 24))) {
        return;
    }
    let path = scratch_file();
    if std::fs::write(&path, data).is_err() {
        return; // the scratch directory is not writable: nothing to test
    }
    let got = read_trace(&path);
    let _ = std::fs::remove_file(&path);
    let plain = !data.starts_with(&[0x1f, 0x8b]) && data.first() != Some(&0x80);
    if plain {
        let direct = read_rmm_csv(data, "fuzz");
        match (&got, &direct) {
            (Ok(a), Ok(b)) => assert_eq!(a.events, b.events, "read_trace and read_rmm_csv differ"),
            (Err(_), Err(_)) => {}
            _ => panic!(
                "read_trace and read_rmm_csv disagree: {:?} vs {:?}",
                got.as_ref().map(|t| t.events.len()),
                direct.as_ref().map(|t| t.events.len())
            ),
        }
    }
    if let Ok(trace) = got {
        check_trace(&trace);
    }
}

/// A file name of this process's own, so that parallel runs do not collide.
fn scratch_file() -> PathBuf {
    std::env::temp_dir().join(format!("devpool-fuzz-{}.trace", std::process::id()))
}

/// What every trace a reader accepts must allow.
pub fn check_trace(trace: &Trace) {
    let _ = trace.summary();
    let monotone = trace
        .events
        .windows(2)
        .all(|w| w[0].time_us <= w[1].time_us);
    if !monotone {
        return;
    }
    let mut csv = Vec::new();
    write_rmm_csv(trace, &mut csv).expect("writing to memory cannot fail");
    let back = read_rmm_csv(&csv[..], &trace.name).expect("a written trace reads back");
    assert_eq!(back, *trace, "write then read changed the trace");
}
