//! The slowest allocations of a replay that called the backend for nothing: where
//! an allocator's tail is host work, not driver calls.
//!
//! ```sh
//! cargo run --release -p devpool-cli --example slowest -- TRACE [STRATEGY] [RUNS]
//! ```
//!
//! Replays TRACE on the mock backend RUNS times (default 5) through STRATEGY
//! (default `hybrid`), keeps each allocation's fastest time over the runs (a busy
//! machine slows a call, never speeds one up), and prints the share of allocations
//! that called the backend, where the replay's allocation p99 falls among the
//! others, the large blocks' percentiles, and the 40 slowest with their sizes and
//! event numbers. Naming event numbers in `PROBE` (comma-separated) sends those
//! allocations through the function `slowest::probe`, so that
//! `valgrind --tool=callgrind --collect-atstart=no --toggle-collect=slowest::probe`
//! counts the instructions of those allocations alone.

use devpool::StrategySpec;
use devpool_core::{Allocator, Backend, Block, Request, Result};
use devpool_testing::MockBackend;
use devpool_trace::{open_trace, Action, TraceEvent};
use std::collections::{HashMap, HashSet};
use std::time::Instant;

/// One allocation of the trace: its size, whether it called the backend, its event.
struct Seen {
    size: usize,
    called: bool,
    event: usize,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: slowest TRACE [STRATEGY] [RUNS]");
        std::process::exit(2);
    };
    let strategy = args.get(2).map_or("hybrid", String::as_str);
    let runs: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(5).max(1);
    let spec: StrategySpec = strategy.parse().unwrap_or_else(|e| {
        eprintln!("strategy {strategy}: {e}");
        std::process::exit(2);
    });
    let events: Vec<TraceEvent> = match open_trace(std::path::Path::new(path)) {
        Ok(reader) => reader
            .collect::<std::result::Result<_, _>>()
            .unwrap_or_else(|e| {
                eprintln!("{e}");
                std::process::exit(1);
            }),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let probes: HashSet<usize> = std::env::var("PROBE")
        .unwrap_or_default()
        .split(',')
        .filter_map(|x| x.trim().parse().ok())
        .collect();

    let mut best: Vec<u64> = Vec::new();
    let mut seen: Vec<Seen> = Vec::new();
    for run in 0..runs {
        let mock = MockBackend::shared();
        let alloc = spec.build(mock.clone());
        let mut live: HashMap<u64, Block> = HashMap::new();
        let mut k = 0;
        for (i, ev) in events.iter().enumerate() {
            match ev.action {
                Action::Allocate => {
                    let before = mock.counters().memory_calls();
                    let req = Request::new(ev.size);
                    let t = Instant::now();
                    let r = if probes.contains(&i) {
                        probe(&*alloc, req)
                    } else {
                        alloc.allocate(req)
                    };
                    let ns = t.elapsed().as_nanos() as u64;
                    let called = mock.counters().memory_calls() != before;
                    if let Ok(b) = r {
                        live.insert(ev.ptr, b);
                    }
                    if run == 0 {
                        best.push(ns);
                        seen.push(Seen {
                            size: ev.size,
                            called,
                            event: i,
                        });
                    } else {
                        best[k] = best[k].min(ns);
                    }
                    k += 1;
                }
                Action::Free => {
                    if let Some(b) = live.remove(&ev.ptr) {
                        let _ = alloc.free(b);
                    }
                }
                Action::AllocateFailure => {}
            }
        }
    }

    let calling = seen.iter().filter(|s| s.called).count();
    let mut host: Vec<(u64, usize)> = best
        .iter()
        .enumerate()
        .filter(|(i, _)| !seen[*i].called)
        .map(|(i, &ns)| (ns, i))
        .collect();
    host.sort_unstable_by(|a, b| b.cmp(a));
    println!(
        "{} allocations, {calling} called the backend; the allocation p99 is number {} from the slowest of the others",
        best.len(),
        (best.len() / 100).saturating_sub(calling) + 1
    );
    let mut large: Vec<u64> = host
        .iter()
        .filter(|(_, i)| seen[*i].size > 1 << 20)
        .map(|x| x.0)
        .collect();
    large.sort_unstable();
    if !large.is_empty() {
        let q = |f: f64| large[((large.len() - 1) as f64 * f) as usize];
        println!(
            "blocks over 1 MiB that called nothing: {}, ns p50 {} p90 {} p99 {} max {}",
            large.len(),
            q(0.5),
            q(0.9),
            q(0.99),
            q(1.0)
        );
    }
    for (ns, i) in host.iter().take(40) {
        println!(
            "{ns:>8} ns  {:>12} B  event {}",
            seen[*i].size, seen[*i].event
        );
    }
}

/// One allocation, out of line: the function callgrind's `--toggle-collect` names.
#[inline(never)]
fn probe(alloc: &dyn Allocator, req: Request) -> Result<Block> {
    alloc.allocate(std::hint::black_box(req))
}
