//! The scaling workload of `devpool bench --live N,...`: does an operation cost more
//! when many blocks are live?
//!
//! `live N` first allocates N blocks of random sizes, log-uniform from 256 B to
//! 256 KiB (a fifth of them above the hybrid's 64 KiB small route, so both routes
//! hold many blocks), without timing. Then each timed step frees a random live block
//! and allocates one of a random size in its place, so N blocks stay live. The
//! figure is wall-clock nanoseconds per operation (a free or an allocation).
//!
//! With the hybrid among the strategies, a last row runs the hybrid through the C
//! ABI (`devpool_malloc` / `devpool_free`), whose table from pointer to block is on
//! the path of every call.
//!
//! The caller's own table of N blocks is part of every step, as it is in real
//! programs, and it outgrows the caches as N grows. By default ([`Table::Warm`]) each
//! step's slot is fetched a few steps early, as a program's record of a block is in
//! the cache when it frees it; [`Table::Cold`] reads it when the step comes. The
//! first row, `caller only`, runs the same steps with an allocator that does no work:
//! the workload's own share of each figure.

use crate::bench::{figure, result, BenchResult};
use crate::cabi::CAbi;
use crate::error::{CliError, Result};
use crate::overlay::Overlay;
use crate::target::fresh_backend;
use crate::BackendArgs;
use devpool::StrategySpec;
use devpool_core::{Allocator, Block, Reuse, Rng};
use std::time::{Duration, Instant};

/// Smallest and largest request of the workload.
pub const SIZES: (usize, usize) = (256, 256 << 10);

/// Most time the filling may take; a slow allocator stops early and the blocks it
/// did not reach count as failures.
const FILL_BUDGET: Duration = Duration::from_secs(20);

/// What one `live N` run measured.
pub struct LiveRun {
    /// Operations completed in the timed steps (a free and an allocation per step;
    /// a failed allocation is not one).
    pub ops: u64,
    /// Wall-clock time of the timed steps.
    pub took: Duration,
    /// Failed allocations, plus the blocks the filling did not reach.
    pub failures: u64,
}

/// How the caller's table of live blocks is read in the timed steps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Table {
    /// Each step's slot is drawn [`AHEAD`] steps early and its cache line fetched
    /// then (a prefetch hint), so the block a step frees is in the cache, as a real
    /// program's record of a tensor is when it frees it (it has just used it). The
    /// allocator's own structures are not touched early: their misses stay in.
    #[default]
    Warm,
    /// The slot is read when the step comes: at 10^6 live blocks the table (48 MB)
    /// outgrows the caches and every step waits for memory before the free can
    /// start, a wait that the `caller only` row does not show (with no allocator
    /// between them, its reads overlap one another).
    Cold,
}

/// Steps between drawing a slot and freeing its block, with [`Table::Warm`].
pub const AHEAD: usize = 8;

/// Hint that `p`'s cache line will be read soon; nothing where no hint is known.
#[inline(always)]
fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it reads nothing the program sees and cannot
    // fault, whatever the address; SSE is part of every x86_64 target.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The slot of a table of `len` blocks that the draw `r` picks.
#[inline(always)]
fn slot(r: u64, len: usize) -> usize {
    (((r >> 32) * len as u64) >> 32) as usize
}

/// Run `live n` with at most `steps` timed steps (fewer when `budget` runs out).
pub fn live(
    alloc: &dyn Allocator,
    n: usize,
    steps: usize,
    budget: Duration,
    table: Table,
) -> LiveRun {
    let mut rng = Rng::new(0x11FE ^ n as u64);
    let sizes: Vec<usize> = (0..4096)
        .map(|_| rng.log_uniform(SIZES.0, SIZES.1))
        .collect();
    let mut live: Vec<Block> = Vec::with_capacity(n);
    let mut failures = 0u64;
    let fill = Instant::now();
    while live.len() < n {
        match alloc.alloc(sizes[rng.next_u64() as usize & 4095]) {
            Ok(b) => live.push(b),
            Err(_) => failures += 1,
        }
        if failures > n as u64 / 100 + 10
            || (live.len().is_multiple_of(1024) && fill.elapsed() > FILL_BUDGET)
        {
            break;
        }
    }
    failures += (n - live.len()) as u64;
    let start = Instant::now();
    let (ops, failed) = timed_steps(alloc, &mut live, &sizes, &mut rng, steps, budget, table);
    failures += failed;
    let took = start.elapsed();
    for b in live {
        alloc.free(b).expect("free of a live block");
    }
    LiveRun {
        ops,
        took,
        failures,
    }
}

/// The timed steps of [`live`]: (operations, failed allocations). A function of its
/// own, never inlined, so that an instruction count can take these steps alone
/// (`scripts/live-cost.sh` counts them with callgrind, one dump per call, and divides
/// by each row's `ops`).
#[inline(never)]
fn timed_steps(
    alloc: &dyn Allocator,
    live: &mut Vec<Block>,
    sizes: &[usize],
    rng: &mut Rng,
    steps: usize,
    budget: Duration,
    table: Table,
) -> (u64, u64) {
    let start = Instant::now();
    let (mut done, mut ops, mut failures) = (0usize, 0u64, 0u64);
    // The draws of the next AHEAD steps, in the order they come.
    let mut next = [0u64; AHEAD];
    for d in next.iter_mut() {
        *d = rng.next_u64();
        if table == Table::Warm {
            prefetch(live.as_ptr().wrapping_add(slot(*d, live.len())));
        }
    }
    while done < steps && !live.is_empty() {
        let r = next[done % AHEAD];
        let later = rng.next_u64();
        next[done % AHEAD] = later;
        if table == Table::Warm {
            // A failed allocation shortens the table: the hint may name another
            // slot, or none, then; the step itself draws within the length.
            prefetch(live.as_ptr().wrapping_add(slot(later, live.len())));
        }
        let i = slot(r, live.len());
        alloc.free(live[i]).expect("free of a live block");
        ops += 1;
        match alloc.alloc(sizes[r as usize & 4095]) {
            Ok(b) => {
                live[i] = b;
                ops += 1;
            }
            Err(_) => {
                failures += 1;
                live.swap_remove(i);
            }
        }
        done += 1;
        if done.is_multiple_of(1024) && start.elapsed() > budget {
            break;
        }
    }
    (ops, failures)
}

/// Steps per `live N` figure at most; the time budget usually ends it first.
const STEPS: usize = 1_000_000;

/// Most time the timed steps of one figure may take.
const BUDGET: Duration = Duration::from_millis(1500);

/// Run `live N` for every strategy in `names` (with the `--config` settings that
/// concern it) and every count in `counts`, each on a fresh backend. Not for a
/// strategy that reuses no memory until it is empty (the arena), nor for the host
/// `malloc` reference, whose blocks would be real host memory.
pub fn run_all(
    names: &[String],
    counts: &[usize],
    backend_args: &BackendArgs,
    table: Table,
    json: bool,
    overlay: Option<&Overlay>,
) -> Result<Vec<BenchResult>> {
    let mut out = Vec::new();
    if counts.contains(&0) {
        return Err(CliError::setting(
            "--live 0",
            "a live-block count must be at least 1",
        ));
    }
    let first = (!counts.is_empty()).then(|| crate::reference::CALLER_ONLY.to_string());
    let mut one = |s: &str, alloc: &dyn Allocator, n: usize| {
        let r = live(alloc, n, STEPS, BUDGET, table);
        let w = format!("live {n}");
        let row = result(
            s,
            &w,
            1,
            (r.ops, r.took, r.failures),
            backend_args.backend.name(),
        );
        if !json {
            eprintln!("{s:>18} {w:<14} {:>10} ns", figure(Some(&row)));
        }
        out.push(row);
    };
    let devices = names
        .iter()
        .filter(|s| !crate::reference::REFERENCES.contains(&s.as_str()));
    for s in first.iter().chain(devices) {
        for &n in counts {
            let target = fresh_backend(backend_args)?;
            let (alloc, label) = crate::reference::build(s, &target, overlay)?;
            // A strategy that reuses memory only once empty would grow without bound.
            if alloc.reuse() != Reuse::OnFree {
                break;
            }
            one(&label, &*alloc, n);
        }
    }
    let default = StrategySpec::default();
    if names.iter().any(|s| *s == default.name()) {
        // The same workload through the C ABI, whose pointer table is on the path.
        let target = fresh_backend(backend_args)?;
        let c = CAbi::new(
            backend_args.backend,
            backend_args.device,
            target.backend(),
            overlay,
        )?;
        for &n in counts {
            one(c.name(), &c, n);
        }
    }
    Ok(out)
}

/// The live-block table: ns per operation for each strategy and live count, and the
/// ratio of the largest count's figure to the smallest's.
pub fn print_results(rows: &[BenchResult], counts: &[usize]) {
    if rows.is_empty() {
        return;
    }
    let mut names: Vec<&str> = Vec::new();
    for r in rows {
        if !names.contains(&r.strategy.as_str()) {
            names.push(&r.strategy);
        }
    }
    print!("\n{:<18}", "ns per op, live");
    for c in counts {
        print!(" {c:>10}");
    }
    println!(" {:>8}", "ratio");
    for n in names {
        print!("{n:<18}");
        let (mut first, mut last) = (None, None);
        for &c in counts {
            let w = format!("live {c}");
            match rows.iter().find(|r| r.strategy == n && r.workload == w) {
                Some(r) => {
                    print!(" {:>10}", figure(Some(r)));
                    if let Some(ns) = r.ns_per_op {
                        first.get_or_insert(ns);
                        last = Some(ns);
                    }
                }
                None => print!(" {:>10}", "-"),
            }
        }
        match (first, last) {
            (Some(a), Some(b)) if a > 0.0 => println!(" {:>8.2}", b / a),
            _ => println!(" {:>8}", "-"),
        }
    }
    println!("(ratio: the last count's figure over the first's; * some allocations failed;");
    println!(
        " `caller only`: the workload's own draws and table of live blocks, with no allocator)"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use devpool_testing::MockBackend;

    /// A slab strategy on a fresh mock backend.
    fn slab_on_mock() -> Box<dyn Allocator> {
        devpool::StrategySpec::Slab(devpool::slab::SlabConfig::geometric(4, 1 << 32))
            .build(MockBackend::shared())
    }

    #[test]
    fn keeps_n_blocks_live_and_frees_them_all() {
        // One stream, one thread, one route: the slab's peak is exact.
        let a = slab_on_mock();
        let r = live(&*a, 500, 2000, Duration::from_secs(60), Table::Warm);
        assert_eq!((r.ops, r.failures), (4000, 0));
        let s = a.stats();
        // An independent count: the allocator's own statistics.
        assert_eq!(s.allocations, 500 + 2000);
        assert_eq!(s.frees, s.allocations);
        assert_eq!(s.live_blocks.peak, 500);
        assert_eq!(s.live_blocks.current, 0);
    }

    #[test]
    fn warm_and_cold_tables_run_the_same_steps() {
        // The hint changes when a slot is read, never which: the same blocks are
        // freed and the same sizes allocated, so the allocator ends with the same
        // counts and peaks (not the figures the workload computes itself).
        let run = |table| {
            let a = slab_on_mock();
            let r = live(&*a, 300, 5000, Duration::from_secs(60), table);
            (r.ops, r.failures, a.stats())
        };
        let (warm, cold) = (run(Table::Warm), run(Table::Cold));
        assert_eq!((warm.0, warm.1), (cold.0, cold.1));
        assert_eq!(warm.2.allocated_bytes, cold.2.allocated_bytes);
        assert_eq!(warm.2.live_bytes, cold.2.live_bytes);
        assert_eq!(warm.2.reserved_bytes, cold.2.reserved_bytes);
        assert_eq!(warm.2.allocations, cold.2.allocations);
        // Different draws would free other blocks: a different seed shows the check
        // can tell (the peak of live requested bytes moves).
        let other = {
            let a = slab_on_mock();
            let _ = live(&*a, 301, 5000, Duration::from_secs(60), Table::Warm);
            a.stats()
        };
        assert_ne!(other.live_bytes, warm.2.live_bytes);
    }
}
