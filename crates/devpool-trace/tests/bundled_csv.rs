//! Reading the bundled RMM CSV traces: counts and values match the raw file text.
mod common;

use common::{bundled, gunzip_text};
use devpool_trace::{read_trace, Action};

fn check(file: &str) {
    let trace = read_trace(&bundled(file)).unwrap();
    assert_eq!(trace.name, file.trim_end_matches(".csv.gz"));

    // Count the rows by plain text matching on the third column.
    let text = gunzip_text(file);
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split(',').collect())
        .collect();
    let count = |word: &str| rows.iter().filter(|r| r[2] == word).count();
    assert_eq!(trace.events.len(), rows.len());
    assert_eq!(trace.count(Action::Allocate), count("allocate"));
    assert_eq!(trace.count(Action::Free), count("free"));
    assert_eq!(
        trace.count(Action::AllocateFailure),
        count("allocate failure")
    );
    assert!(trace.count(Action::Allocate) > 0);

    // Sizes, pointers and streams agree row by row.
    for (e, r) in trace.events.iter().zip(&rows) {
        assert_eq!(e.size.to_string(), r[4]);
        assert_eq!(format!("{:#x}", e.ptr), r[3]);
        assert_eq!(format!("{:#x}", e.stream), r[5]);
    }
    // Times never go backwards within these traces.
    assert!(trace
        .events
        .windows(2)
        .all(|w| w[0].time_us <= w[1].time_us));

    // The summary agrees with counts made here.
    let s = trace.summary();
    let small = rows
        .iter()
        .filter(|r| r[2] == "allocate" && r[4].parse::<u64>().unwrap() <= 1 << 20)
        .count();
    assert_eq!(s.allocations as usize, count("allocate"));
    assert_eq!(s.small_allocations as usize, small);
    assert!(s.peak_live_bytes > 0);
    assert!(s.peak_live_bytes <= s.total_allocated_bytes);
}

#[test]
fn resnet50() {
    check("resnet50_train.csv.gz");
}

#[test]
fn gpt2_varlen() {
    check("gpt2_train_varlen.csv.gz");
}

/// The peak of live bytes, computed here from the raw rows with a plain map.
#[test]
fn peak_live_matches_a_plain_recount() {
    for file in ["resnet50_train.csv.gz", "gpt2_train_varlen.csv.gz"] {
        let text = gunzip_text(file);
        let mut live = std::collections::HashMap::new();
        let (mut now, mut peak) = (0u64, 0u64);
        for l in text.lines().skip(1) {
            let f: Vec<&str> = l.split(',').collect();
            let size: u64 = f[4].parse().unwrap();
            match f[2] {
                "allocate" => {
                    if let Some(old) = live.insert(f[3].to_string(), size) {
                        now -= old;
                    }
                    now += size;
                    peak = peak.max(now);
                }
                "free" => now -= live.remove(f[3]).unwrap_or(0),
                _ => {}
            }
        }
        let trace = read_trace(&bundled(file)).unwrap();
        assert_eq!(trace.peak_live_bytes(), peak, "{file}");
        assert_eq!(trace.summary().live_at_end as usize, live.len(), "{file}");
    }
}
