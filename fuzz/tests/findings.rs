//! The findings of the fuzz runs (docs/FUZZING.md, "Findings"), as tests of the code
//! that owns each bug; both bugs are fixed, and these tests keep them fixed.

use devpool_trace::{read_rmm_csv, read_trace};

/// F1, minimized by libFuzzer: a ten-digit hour.
const F1: &[u8] = b"0,7942967295:0:1,,,,";

#[test]
fn f1_long_hours_are_an_error_not_a_panic() {
    assert!(read_rmm_csv(F1, "f1").is_err());
    assert!(read_rmm_csv(&b"0,999999999999:00:00.0,allocate,0x10,5,0x0\n"[..], "f1").is_err());
    let file = std::env::temp_dir().join(format!("devpool-fuzz-f1-{}.csv", std::process::id()));
    std::fs::write(&file, F1).expect("temp file");
    let result = read_trace(&file);
    let _ = std::fs::remove_file(&file);
    assert!(result.is_err());
}

/// F2: two sizes whose sum overflows `u64`.
const F2: &[u8] =
    b"0,0:0:0,allocate,1,18446744073709551615,0\n0,0:0:0,allocate,2,18446744073709551615,0\n";

#[test]
fn f2_huge_sizes_summarize_without_overflow() {
    let trace = read_rmm_csv(F2, "f2").expect("a valid trace");
    let s = trace.summary();
    assert_eq!(s.allocations, 2);
    assert!(s.peak_live_bytes > 0 && s.max_request == u64::MAX);
}

/// The switch that steps around F1 recognizes its input, and only long hours.
#[test]
fn the_known_finding_filter_matches_f1_only() {
    use devpool_fuzz::known::long_hours;
    assert!(long_hours(F1));
    assert!(long_hours(
        b"Thread,Time\n0, 1234567890:00:00.5 ,free,0,0,0\n"
    ));
    assert!(!long_hours(b"0,123456789:00:00.5,free,0,0,0\n"));
    assert!(!long_hours(F2));
}
