//! The FIFO workload of `devpool bench`: blocks freed in the order they were made, as
//! a pipeline's frames and staging buffers are.
//!
//! Each step allocates one block and, once [`DEPTH`] are live, frees the oldest. The
//! sizes cycle through a list of [`SIZES`] drawn once, log-uniform in [256 KiB, 8 MiB].
//! After a warm-up of [`WARM_STEPS`] steps (once through the list, so that every
//! window of live blocks the run will see has been seen) the workload measures: nanoseconds per step (one
//! allocation and one free), the backend calls that take or give back memory in the
//! measured steps (the steady state), and, over the whole run, the peak device bytes
//! held over the peak live bytes (the live bytes counted here, apart from the
//! allocator).

use crate::bench::BenchResult;
use crate::error::Result;
use crate::overlay::Overlay;
use crate::target::{build, fresh_backend, BASELINES};
use crate::BackendArgs;
use devpool_core::{Allocator, Block, Rng};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Blocks live at once.
pub const DEPTH: usize = 256;
/// Sizes in the list the steps cycle through.
pub const SIZES: usize = 4096;
/// Steps before the measurement starts.
pub const WARM_STEPS: usize = SIZES + DEPTH;
/// The workload's name in tables and JSON.
pub const WORKLOAD: &str = "fifo";

/// Run the FIFO workload for `strategy` (with the `--config` settings that concern it)
/// on a fresh backend: at most `max_steps` measured steps, or `budget` of wall time.
pub fn run(
    strategy: &str,
    args: &BackendArgs,
    max_steps: usize,
    budget: Duration,
    overlay: Option<&Overlay>,
) -> Result<BenchResult> {
    let target = fresh_backend(args)?;
    let (alloc, changed) = build(strategy, &target, overlay)?;
    let label = crate::overlay::row_name(strategy, changed, overlay);
    let backend = alloc.backend().clone();
    let mut rng = Rng::new(7);
    let sizes: Vec<usize> = (0..SIZES)
        .map(|_| rng.log_uniform(256 << 10, 8 << 20))
        .collect();
    let mut live: VecDeque<Block> = VecDeque::with_capacity(DEPTH + 1);
    let (mut live_bytes, mut peak_live) = (0u64, 0u64);
    let mut failures = 0u64;
    // A step whose allocation failed is not a completed step.
    let mut step = |i: usize, live: &mut VecDeque<Block>| {
        let ok = match alloc.alloc(sizes[i % sizes.len()]) {
            Ok(b) => {
                live_bytes += b.requested as u64;
                peak_live = peak_live.max(live_bytes);
                live.push_back(b);
                true
            }
            Err(_) => {
                failures += 1;
                false
            }
        };
        if live.len() > DEPTH {
            if let Some(b) = live.pop_front() {
                live_bytes -= b.requested as u64;
                alloc.free(b).expect("free of a live block");
            }
        }
        ok
    };
    let warm_until = Instant::now() + budget;
    let mut i = 0;
    while i < WARM_STEPS && Instant::now() < warm_until {
        step(i, &mut live);
        i += 1;
    }
    let calls_before = backend.counters().memory_calls();
    let start = Instant::now();
    let (mut n, mut done) = (0u64, 0u64);
    while (n as usize) < max_steps {
        for _ in 0..64 {
            done += step(i, &mut live) as u64;
            i += 1;
        }
        n += 64;
        if start.elapsed() > budget {
            break;
        }
    }
    let took = start.elapsed();
    let steady_calls = backend.counters().memory_calls() - calls_before;
    let mut peak_held = backend.counters().bytes_in_use.peak;
    if BASELINES.contains(&strategy) && peak_held == 0 {
        // The driver's own pool holds its memory out of the backend's sight.
        peak_held = alloc.stats().reserved_bytes.peak;
    }
    for b in live {
        alloc.free(b).expect("free of a live block");
    }
    let _ = alloc.trim();
    Ok(BenchResult {
        held_over_live: Some(peak_held as f64 / peak_live.max(1) as f64),
        steady_memory_calls: Some(steady_calls),
        ..crate::bench::result(
            &label,
            WORKLOAD,
            1,
            (done, took, failures),
            args.backend.name(),
        )
    })
}

/// The FIFO rows of `out` as a table.
pub fn print_table(out: &[BenchResult]) {
    let rows: Vec<&BenchResult> = out.iter().filter(|r| r.workload == WORKLOAD).collect();
    if rows.is_empty() {
        return;
    }
    println!(
        "\nFIFO workload ({DEPTH} live, sizes 256 KiB to 8 MiB, oldest freed first; \
         memory calls after a warm-up of {WARM_STEPS} steps)"
    );
    println!(
        "{:<18} {:>12} {:>14} {:>14}",
        "strategy", "ns per step", "held / live", "memory calls"
    );
    for r in rows {
        let ns = crate::bench::figure(Some(r));
        println!(
            "{:<18} {:>12} {:>14.4} {:>14}",
            r.strategy,
            ns,
            r.held_over_live.unwrap_or(0.0),
            r.steady_memory_calls.unwrap_or(0)
        );
    }
}
