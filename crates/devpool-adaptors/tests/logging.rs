//! `Logging`: the CSV parses back into the rows of the run, in an order a replay can
//! follow.
mod common;

use devpool_adaptors::Logging;
use devpool_core::{direct, Allocator, Block, Request, Rng};
use devpool_testing::{MockBackend, MockConfig};
use devpool_trace::RMM_CSV_HEADER;
use std::collections::HashSet;
use std::io::{self, Write};
use std::sync::Arc;

#[derive(Debug, PartialEq)]
struct Row {
    thread: u64,
    micros: u64,
    action: String,
    ptr: u64,
    size: usize,
    stream: u64,
}

fn hex(s: &str) -> u64 {
    let digits = s
        .strip_prefix("0x")
        .unwrap_or_else(|| panic!("{s} is not 0x hex"));
    u64::from_str_radix(digits, 16).unwrap_or_else(|e| panic!("{s}: {e}"))
}

/// Parse a log as RMM's replay reads it: a header, then six fields a row.
fn parse(text: &str) -> Vec<Row> {
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(RMM_CSV_HEADER));
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f.len(), 6, "row {l}");
            let t: Vec<&str> = f[1].split([':', '.']).collect();
            assert_eq!(t.len(), 4, "time {}", f[1]);
            assert_eq!(
                (t[0].len(), t[1].len(), t[2].len(), t[3].len()),
                (2, 2, 2, 6),
                "time {}",
                f[1]
            );
            let n: Vec<u64> = t.iter().map(|x| x.parse().unwrap()).collect();
            assert!(n[0] < 24 && n[1] < 60 && n[2] < 60, "time {}", f[1]);
            Row {
                thread: f[0].parse().unwrap(),
                micros: ((n[0] * 60 + n[1]) * 60 + n[2]) * 1_000_000 + n[3],
                action: f[2].to_string(),
                ptr: hex(f[3]),
                size: f[4].parse().unwrap(),
                stream: hex(f[5]),
            }
        })
        .collect()
}

/// A sink the test can read while the adaptor still owns it.
#[derive(Clone, Default)]
struct Shared(Arc<parking_lot::Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.lock().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Shared {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().clone()).unwrap()
    }
}

#[test]
fn rows_parse_back_as_the_run() {
    let mock = MockBackend::shared_with(MockConfig::default().capacity(64 << 20));
    let sink = Shared::default();
    let a = Logging::new(direct(mock), sink.clone());
    let x = a.alloc(37632).unwrap();
    let y = a
        .allocate(Request::new(0).on_stream(devpool_testing::MockBackend::stream(0xbeef)))
        .unwrap();
    assert!(a.alloc(1 << 30).is_err());
    a.deallocate(y, devpool_testing::MockBackend::stream(7))
        .unwrap();
    assert!(a.free(y).is_err(), "a rejected free is not logged");
    a.free(x).unwrap();
    let rows = parse(&sink.text());
    let want = [
        ("allocate", x.ptr.0, 37632, 0),
        ("allocate", y.ptr.0, 0, 0xbeef),
        ("allocate failure", 0, 1 << 30, 0),
        ("free", y.ptr.0, 0, 7),
        ("free", x.ptr.0, 37632, 0),
    ];
    let got: Vec<_> = rows
        .iter()
        .map(|r| (r.action.as_str(), r.ptr, r.size, r.stream))
        .collect();
    assert_eq!(got, want);
    assert!(
        rows.iter().all(|r| r.thread == rows[0].thread),
        "one thread"
    );
    assert!(
        rows.windows(2).all(|w| w[0].micros <= w[1].micros),
        "times run forward"
    );
    assert_eq!(a.write_errors(), 0);
}

#[test]
fn threads_log_in_replayable_order() {
    // Addresses are reused at once, so a row out of order would show an address
    // allocated while still live, or freed while not.
    let sink = Shared::default();
    let a = Arc::new(Logging::new(
        common::reuse(MockBackend::shared()),
        sink.clone(),
    ));
    let handles: Vec<_> = (0..4u64)
        .map(|t| {
            let a = a.clone();
            std::thread::spawn(move || {
                let mut rng = Rng::new(t);
                let mut live: Vec<Block> = Vec::new();
                let mut ops = 0;
                for _ in 0..2000 {
                    if live.len() < 4 && rng.below(2) == 0 {
                        // Few sizes, so other threads' frees are reused often.
                        live.push(a.alloc(256 << rng.below(3)).unwrap());
                    } else if let Some(b) = live.pop() {
                        a.free(b).unwrap();
                    }
                    ops += 1;
                }
                for b in live {
                    a.free(b).unwrap();
                }
                ops
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let rows = parse(&sink.text());
    let mut live = HashSet::new();
    let mut reused = 0;
    let mut seen = HashSet::new();
    for r in &rows {
        match r.action.as_str() {
            "allocate" => {
                assert!(live.insert(r.ptr), "{:#x} allocated while live", r.ptr);
                reused += !seen.insert(r.ptr) as u32;
            }
            "free" => assert!(live.remove(&r.ptr), "{:#x} freed while not live", r.ptr),
            other => panic!("unexpected action {other}"),
        }
    }
    assert!(live.is_empty());
    assert!(reused > 100, "addresses were reused: the order was tested");
    let threads: HashSet<u64> = rows.iter().map(|r| r.thread).collect();
    assert_eq!(threads.len(), 4, "one small number per thread");
}

struct Broken;

impl Write for Broken {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        Err(io::Error::other("disk full"))
    }
    fn flush(&mut self) -> io::Result<()> {
        Err(io::Error::other("disk full"))
    }
}

#[test]
fn failing_sink_never_fails_an_allocation() {
    let a = Logging::new(direct(MockBackend::shared()), Broken);
    let b = a.alloc(100).unwrap();
    a.free(b).unwrap();
    assert_eq!(a.write_errors(), 3, "header, allocate and free");
    assert!(a.flush().is_err());
}

#[test]
fn file_log_round_trips() {
    let path = std::env::temp_dir().join(format!("devpool-log-{}.csv", std::process::id()));
    let a = Logging::to_file(direct(MockBackend::shared()), &path).unwrap();
    let blocks: Vec<Block> = (1..=10).map(|i| a.alloc(i * 1000).unwrap()).collect();
    for b in &blocks {
        a.free(*b).unwrap();
    }
    assert_eq!(a.name(), "log(direct)");
    drop(a);
    let rows = parse(&std::fs::read_to_string(&path).unwrap());
    std::fs::remove_file(&path).unwrap();
    assert_eq!(rows.len(), 20);
    for (i, b) in blocks.iter().enumerate() {
        assert_eq!((rows[i].ptr, rows[i].size), (b.ptr.0, b.requested));
        assert_eq!(rows[10 + i].action, "free");
    }
}

#[test]
fn the_project_reader_replays_a_logged_run() {
    // Log a threaded run over a pool that reuses addresses, read it back with the
    // trace tools, and replay it through another allocator.
    let sink = Shared::default();
    let a = Arc::new(Logging::new(
        common::reuse(MockBackend::shared()),
        sink.clone(),
    ));
    let handles: Vec<_> = (0..3u64)
        .map(|t| {
            let a = a.clone();
            std::thread::spawn(move || {
                let mut rng = Rng::new(50 + t);
                let mut live: Vec<Block> = Vec::new();
                for _ in 0..300 {
                    if live.len() < 6 && rng.below(2) == 0 {
                        let req = Request::new(rng.log_uniform(0, 1 << 20))
                            .on_stream(devpool_testing::MockBackend::stream(t));
                        live.push(a.allocate(req).unwrap());
                    } else if let Some(b) = live.pop() {
                        a.free(b).unwrap();
                    }
                }
                live.len()
            })
        })
        .collect();
    let still_live: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let text = sink.text();
    let trace = devpool_trace::read_rmm_csv(text.as_bytes(), "logged").expect("reads back");
    let rows = parse(&text);
    assert_eq!(trace.events.len(), rows.len());
    for (e, r) in trace.events.iter().zip(&rows) {
        assert_eq!(
            (e.action.as_str(), e.ptr, e.size, e.stream, e.thread as u64),
            (r.action.as_str(), r.ptr, r.size, r.stream, r.thread)
        );
    }
    let allocs = trace.count(devpool_trace::Action::Allocate);
    let frees = trace.count(devpool_trace::Action::Free);
    assert_eq!(allocs - frees, still_live);
    let report = devpool_trace::replay(
        &trace,
        &direct(MockBackend::shared()),
        &devpool_trace::ReplayOptions::default(),
    );
    assert_eq!(report.allocations, allocs as u64);
    assert_eq!(report.frees, frees as u64);
}
