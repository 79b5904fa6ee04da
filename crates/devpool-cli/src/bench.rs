//! `devpool bench`: latency workloads per strategy.

use crate::error::{CliError, Result};
use crate::target::fresh_backend;
use crate::BackendArgs;
use devpool_core::Rng;
use devpool_core::{Allocator, Block, Request, Reuse, StreamId};
use serde::Serialize;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// What `devpool bench` runs.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Print a JSON array of {strategy, workload, threads, ns_per_op, ...}.
    #[arg(long)]
    pub json: bool,
    /// Comma-separated strategies (default: all that suit each workload).
    #[arg(long, value_delimiter = ',')]
    pub strategies: Vec<String>,
    /// Thread counts for the multi-threaded pairs (default: 1 and the number of cores).
    #[arg(long, value_delimiter = ',')]
    pub threads: Vec<usize>,
    /// Steps of the random loop.
    #[arg(long, default_value_t = 200_000)]
    pub steps: usize,
    /// Pairs per single-thread pair workload.
    #[arg(long, default_value_t = 200_000)]
    pub pairs: usize,
    /// The scaling workload for these live-block counts (e.g. 1000,1000000): N
    /// blocks of 256 B to 256 KiB stay live while each step frees a random one
    /// and allocates another; ns per operation at each N. Not run by default.
    #[arg(long, value_delimiter = ',')]
    pub live: Vec<usize>,
    /// How the scaling workload reads its own table of live blocks: `warm` fetches
    /// each step's slot a few steps early, so the block freed is in the cache as a
    /// program's record of a tensor is when it frees it; `cold` reads it when the
    /// step comes, and at 10^6 blocks every step then waits for memory first.
    #[arg(long, value_enum, default_value_t = crate::live::Table::Warm)]
    pub live_table: crate::live::Table,
    /// Settings laid over every strategy they concern, as for `compare --config`
    /// (e.g. "burst=on", "move_memory=off;chunk_divisor=1"); rows of the strategies
    /// they change, the C ABI's row too, carry them in their name.
    #[arg(long)]
    pub config: Option<String>,
}

/// One measured figure.
#[derive(Serialize, Clone, Debug)]
pub struct BenchResult {
    pub strategy: String,
    pub workload: String,
    pub threads: usize,
    /// Wall-clock nanoseconds per completed operation (a pair, or a step of the
    /// random loop), all threads together; none when no operation completed.
    pub ns_per_op: Option<f64>,
    /// Operations completed (failed allocations are not).
    pub ops: u64,
    /// Completed operations per second, all threads together.
    pub ops_per_sec: Option<f64>,
    /// Wall-clock seconds the workload was timed: on several threads, from before the
    /// workers start to after the last one ends.
    pub seconds: f64,
    pub failures: u64,
    pub backend: String,
    /// FIFO workload and random op: peak device bytes held over peak live bytes
    /// (requested) during the timed steps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_over_live: Option<f64>,
    /// FIFO workload only: backend calls that took or gave back memory after the
    /// warm-up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steady_memory_calls: Option<u64>,
    /// Random op only: backend calls that took or gave back memory during the
    /// timed steps, which start from an empty pool (on a GPU each costs tens of
    /// microseconds, so they say how much of the figure is the driver's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_calls: Option<u64>,
}

/// Most time one figure may take; slow baselines stop early.
const BUDGET: Duration = Duration::from_millis(1500);

/// `max` pairs (or as many as `budget` allows) of one allocation and its free, after
/// a warm-up; (pairs completed, time, failed allocations). A failed allocation is
/// not a completed pair.
fn pair(
    alloc: &dyn Allocator,
    size: usize,
    stream: StreamId,
    max: usize,
    budget: Duration,
) -> (u64, Duration, u64) {
    let req = Request::new(size).on_stream(stream);
    let mut fails = 0;
    for _ in 0..100 {
        match alloc.allocate(req) {
            Ok(b) => alloc.free(b).expect("free of a block just allocated"),
            Err(_) => fails += 1,
        }
    }
    let start = Instant::now();
    let (mut n, mut tried) = (0u64, 0u64);
    while (tried as usize) < max {
        for _ in 0..64 {
            match alloc.allocate(req) {
                Ok(b) => {
                    alloc.free(b).expect("free of a block just allocated");
                    n += 1;
                }
                Err(_) => fails += 1,
            }
        }
        tried += 64;
        if start.elapsed() > budget {
            break;
        }
    }
    (n, start.elapsed(), fails)
}

/// What one run of the random loop did.
struct RandomRun {
    /// Steps completed, time, failed allocations.
    ops: (u64, Duration, u64),
    /// The backend's memory calls during the timed steps.
    calls: u64,
    /// The most bytes (as requested) live at once.
    peak_live: u64,
}

/// The random op of `strategy`: the loop, its memory calls, and the most device
/// memory held during it over the most live. The backend's high-water mark starts
/// again at the loop (the pair workloads before it held up to 64 MiB); the driver's
/// own pool (cuMemAllocAsync), which the backend does not see, reports its pool's
/// high-water mark since it was made, which the pairs' few blocks stay below. None
/// for the host's `malloc`, which holds no device memory.
fn random_op(strategy: &str, alloc: &dyn Allocator, steps: usize, backend: &str) -> BenchResult {
    alloc.backend().reset_peak_bytes();
    let run = random_loop(alloc, steps, 42);
    let mut held = alloc.backend().counters().bytes_in_use.peak;
    if crate::target::BASELINES.contains(&strategy) && held == 0 {
        held = alloc.stats().reserved_bytes.peak;
    }
    BenchResult {
        memory_calls: Some(run.calls),
        // The host's `malloc` holds no device memory: no figure, rather than 0.
        held_over_live: (run.peak_live > 0 && held > 0).then(|| held as f64 / run.peak_live as f64),
        ..result(strategy, "random op", 1, run.ops, backend)
    }
}

/// The RMM-style loop: up to 1000 live blocks, sizes log-uniform in [256 B, 16 MiB],
/// each step allocates or frees a random live block with equal odds; (steps
/// completed, time, failed allocations): a step whose allocation failed is not
/// completed. Also the backend's memory calls during the timed steps, and the peak
/// of live bytes.
fn random_loop(alloc: &dyn Allocator, steps: usize, seed: u64) -> RandomRun {
    let mut rng = Rng::new(seed);
    let sizes: Vec<usize> = (0..4096).map(|_| rng.log_uniform(256, 16 << 20)).collect();
    let mut live: Vec<Block> = Vec::with_capacity(1000);
    let (mut live_bytes, mut peak_live) = (0u64, 0u64);
    let mut fails = 0;
    let calls = || alloc.backend().counters().memory_calls();
    let calls_before = calls();
    let start = Instant::now();
    let (mut n, mut tried) = (0u64, 0u64);
    while (tried as usize) < steps {
        let r = rng.next_u64();
        if live.is_empty() || (live.len() < 1000 && r & 1 == 0) {
            match alloc.alloc(sizes[(r >> 8) as usize & 4095]) {
                Ok(b) => {
                    live_bytes += b.requested as u64;
                    peak_live = peak_live.max(live_bytes);
                    live.push(b);
                    n += 1;
                }
                Err(_) => fails += 1,
            }
        } else {
            let i = ((r >> 1) % live.len() as u64) as usize;
            let b = live.swap_remove(i);
            live_bytes -= b.requested as u64;
            alloc.free(b).expect("free of a live block");
            n += 1;
        }
        tried += 1;
        if tried.is_multiple_of(1024) && start.elapsed() > BUDGET * 2 {
            break;
        }
    }
    let took = start.elapsed();
    let made = calls() - calls_before;
    for b in live {
        alloc.free(b).expect("free of a live block");
    }
    RandomRun {
        ops: (n, took, fails),
        calls: made,
        peak_live,
    }
}

/// Pairs on `threads` threads, each on its own stream; (pairs completed by all,
/// time from before the workers start to after the last one ends, failures).
fn threads_pairs(
    alloc: Arc<dyn Allocator>,
    threads: usize,
    size: usize,
) -> Result<(u64, Duration, u64)> {
    // Two barriers: every worker has warmed its stream's pool, then the clock starts
    // and the workers are let go. The clock stops when the last one has ended, so a
    // worker that waited for a core is counted in full.
    let warm = Arc::new(Barrier::new(threads + 1));
    let go = Arc::new(Barrier::new(threads + 1));
    let streams = (0..threads)
        .map(|_| alloc.backend().create_stream())
        .collect::<std::result::Result<Vec<StreamId>, _>>()
        .map_err(|source| CliError::Backend {
            what: "a stream for each bench thread".into(),
            source,
        })?;
    let mut handles = Vec::with_capacity(threads);
    for (t, stream) in streams.into_iter().enumerate() {
        let (alloc, warm, go) = (alloc.clone(), warm.clone(), go.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("bench-{t}"))
            .spawn(move || {
                pair(&*alloc, size, stream, 64, Duration::ZERO); // warm this stream's pool
                warm.wait();
                go.wait();
                pair(
                    &*alloc,
                    size,
                    stream,
                    usize::MAX,
                    Duration::from_millis(800),
                )
            });
        match spawned {
            Ok(h) => handles.push(h),
            Err(e) => {
                // The workers already started wait at the barriers forever: this is
                // only reached before any work, and the process ends with the error.
                return Err(CliError::Thread {
                    index: t,
                    threads,
                    source: e,
                });
            }
        }
    }
    warm.wait();
    let start = Instant::now();
    go.wait();
    let mut total = 0;
    let mut fails = 0;
    for h in handles {
        let (n, _, f) = h.join().map_err(|_| CliError::ThreadPanicked)?;
        total += n;
        fails += f;
    }
    let took = start.elapsed();
    let _ = alloc.trim();
    Ok((total, took, fails))
}

pub(crate) fn result(
    strategy: &str,
    workload: &str,
    threads: usize,
    r: (u64, Duration, u64),
    backend: &str,
) -> BenchResult {
    // No completed operation, no figure: never a rate made up from failures.
    let ns = (r.0 > 0).then(|| r.1.as_nanos() as f64 / r.0 as f64);
    BenchResult {
        strategy: strategy.to_string(),
        workload: workload.to_string(),
        threads,
        ns_per_op: ns,
        ops: r.0,
        ops_per_sec: ns.map(|ns| 1e9 / ns),
        seconds: r.1.as_secs_f64(),
        failures: r.2,
        backend: backend.to_string(),
        held_over_live: None,
        steady_memory_calls: None,
        memory_calls: None,
    }
}

/// Most threads `--threads` may ask for.
pub const MAX_THREADS: usize = 1024;

/// Refuse settings that would measure nothing or could not run.
fn check_args(args: &BenchArgs) -> Result<()> {
    if args.steps == 0 {
        return Err(CliError::setting(
            "--steps 0",
            "the random loop needs at least one step",
        ));
    }
    if args.pairs == 0 {
        return Err(CliError::setting(
            "--pairs 0",
            "the pair workloads need at least one pair",
        ));
    }
    if args.live.contains(&0) {
        return Err(CliError::setting(
            "--live 0",
            "a live-block count must be at least 1",
        ));
    }
    for &t in &args.threads {
        if t == 0 {
            return Err(CliError::setting(
                "--threads 0",
                "each thread count must be at least 1",
            ));
        }
        if t > MAX_THREADS {
            return Err(CliError::setting(
                format!("--threads {t}"),
                format!("at most {MAX_THREADS} threads (one stream and pool each)"),
            ));
        }
    }
    Ok(())
}

pub fn bench(args: BenchArgs, backend_args: &BackendArgs) -> Result<()> {
    check_args(&args)?;
    let overlay = args
        .config
        .as_deref()
        .map(crate::overlay::Overlay::parse)
        .transpose()?;
    let overlay = overlay.as_ref();
    let names = crate::reference::with_references(&args.strategies, backend_args)?;
    let mut threads = args.threads.clone();
    if threads.is_empty() {
        let n = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2);
        threads = if n > 1 { vec![1, n] } else { vec![1] };
    }
    let mut out = Vec::new();
    let be = backend_args.backend.name();
    for name in &names {
        let target = fresh_backend(backend_args)?;
        let (alloc, label) = crate::reference::build(name, &target, overlay)?;
        let alloc: Arc<dyn Allocator> = Arc::from(alloc);
        let s = &label;
        for (w, size) in [
            ("pair 4 KiB", 4usize << 10),
            ("pair 1 MiB", 1 << 20),
            ("pair 64 MiB", 64 << 20),
        ] {
            let r = pair(&*alloc, size, StreamId::DEFAULT, args.pairs, BUDGET);
            out.push(result(s, w, 1, r, be));
            if !args.json {
                eprintln!("{s:>18} {w:<14} {:>10} ns", figure(out.last()));
            }
        }
        // A strategy that reuses memory only once empty would grow without bound.
        if alloc.reuse() == Reuse::OnFree {
            out.push(random_op(s, &*alloc, args.steps, be));
            if !args.json {
                let r = out.last();
                let held = r
                    .and_then(|r| r.held_over_live)
                    .map_or(String::new(), |h| format!("; held / live {h:.3}"));
                eprintln!(
                    "{s:>18} {:<14} {:>10} ns  ({} memory calls{held})",
                    "random op",
                    figure(r),
                    r.and_then(|r| r.memory_calls).unwrap_or(0),
                );
            }
        }
        let _ = alloc.trim();
        for &t in &threads {
            let r = threads_pairs(alloc.clone(), t, 64 << 10)?;
            out.push(result(s, "pair 64 KiB, own stream per thread", t, r, be));
            if !args.json {
                eprintln!(
                    "{s:>18} {:<14} {:>10} ns  ({} M pairs/s on {t} threads)",
                    "threads",
                    figure(out.last()),
                    rate(out.last())
                );
            }
        }
    }
    let live = crate::live::run_all(
        &names,
        &args.live,
        backend_args,
        args.live_table,
        args.json,
        overlay,
    )?;
    let table_rows = out.len();
    out.extend(live.iter().cloned());
    // The FIFO workload measures device memory held: the host reference has none.
    for name in names
        .iter()
        .filter(|s| !crate::reference::REFERENCES.contains(&s.as_str()))
    {
        let r = crate::fifo::run(name, backend_args, args.pairs, BUDGET, overlay)?;
        let s = &r.strategy;
        if !args.json {
            eprintln!(
                "{s:>18} {:<14} {:>10} ns  (held / live {:.4}, {} memory calls in the steady state)",
                crate::fifo::WORKLOAD,
                figure(Some(&r)),
                r.held_over_live.unwrap_or(0.0),
                r.steady_memory_calls.unwrap_or(0)
            );
        }
        out.push(r);
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{}", table(&out[..table_rows], &threads));
        crate::live::print_results(&live, &args.live);
        crate::fifo::print_table(&out);
    }
    Ok(())
}

/// A result's ns per operation, with a star when some allocations failed, or
/// "failed" when none completed.
pub(crate) fn figure(r: Option<&BenchResult>) -> String {
    match r {
        None => "-".into(),
        Some(r) => match r.ns_per_op {
            None => "failed".into(),
            Some(ns) if r.failures == 0 => format!("{ns:.1}"),
            Some(ns) => format!("{ns:.1}*"),
        },
    }
}

/// A result's millions of operations per second, marked as [`figure`] marks.
fn rate(r: Option<&BenchResult>) -> String {
    match r {
        None => "-".into(),
        Some(r) => match r.ops_per_sec {
            None => "failed".into(),
            Some(v) if r.failures == 0 => format!("{:.2}", v / 1e6),
            Some(v) => format!("{:.2}*", v / 1e6),
        },
    }
}

/// The table of results, as printed.
fn table(out: &[BenchResult], threads: &[usize]) -> String {
    use std::fmt::Write;
    let mut t = String::new();
    let mut names: Vec<&str> = Vec::new();
    for r in out {
        if !names.contains(&r.strategy.as_str()) {
            names.push(&r.strategy);
        }
    }
    let _ = write!(
        t,
        "\n{:<18} {:>12} {:>12} {:>12} {:>12}",
        "ns per op", "pair 4 KiB", "pair 1 MiB", "pair 64 MiB", "random op"
    );
    for n in threads {
        let _ = write!(t, " {:>14}", format!("{n} thr M pairs/s"));
    }
    t.push('\n');
    for n in names {
        let get = |w: &str, threads: usize| {
            out.iter()
                .find(|r| r.strategy == n && r.workload == w && r.threads == threads)
        };
        let _ = write!(t, "{n:<18}");
        for w in ["pair 4 KiB", "pair 1 MiB", "pair 64 MiB", "random op"] {
            let _ = write!(t, " {:>12}", figure(get(w, 1)));
        }
        for &n in threads {
            let _ = write!(
                t,
                " {:>14}",
                rate(get("pair 64 KiB, own stream per thread", n))
            );
        }
        t.push('\n');
    }
    if out.iter().any(|r| r.failures > 0) {
        t.push_str(
            "(* some allocations failed in that workload; figures count completed operations only)\n",
        );
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use devpool_core::direct;
    use devpool_testing::{FaultOn, MockBackend, MockConfig};

    #[test]
    fn the_random_op_counts_its_memory_calls() {
        // A direct pool makes one region call per completed step (an allocation or a
        // free): an independent count of what the loop reports. The frees after the
        // timed steps are not counted.
        let mock = MockBackend::shared();
        let a = direct(mock.clone());
        let RandomRun {
            ops: (n, _, fails),
            calls,
            ..
        } = random_loop(&a, 2000, 7);
        assert_eq!(fails, 0);
        assert_eq!(calls, n, "one region call per step");
        let all = devpool_core::Backend::counters(&*mock);
        assert!(all.region_allocs + all.region_frees > calls, "{all:?}");
        assert_eq!(
            all.region_allocs, all.region_frees,
            "every block freed at the end"
        );
    }

    #[test]
    fn the_random_op_measures_memory_over_its_own_steps() {
        // A direct pool holds each live block's region and nothing else. Its own
        // count of requested bytes gives the live peak independently of the loop's.
        let mock = MockBackend::shared();
        let a = direct(mock.clone());
        let r = random_op("direct", &a, 300, "mock");
        let ratio = r.held_over_live.expect("blocks were live");
        let held = devpool_core::Backend::counters(&*mock).bytes_in_use.peak;
        let live = a.stats().live_bytes.peak;
        assert!(
            (ratio - held as f64 / live as f64).abs() < 1e-9,
            "{ratio} against {held} / {live}"
        );
        assert!((1.0..1.2).contains(&ratio), "held over live {ratio}");
        assert_eq!(r.workload, "random op");
        assert!(r.memory_calls.is_some_and(|c| c > 0));
        // A 1 GiB block held and freed before the loop stays in the backend's
        // high-water mark unless the loop starts it again; the same loop then
        // reports what it held, not the pair's peak.
        let mock = MockBackend::shared();
        let b = direct(mock.clone());
        let _ = pair(&b, 1 << 30, StreamId::DEFAULT, 10, Duration::from_secs(5));
        assert!(
            held < 1 << 30,
            "the loop alone holds less than the pair: {held}"
        );
        let again = random_op("direct", &b, 300, "mock");
        assert_eq!(again.held_over_live, r.held_over_live);
    }

    #[test]
    fn failed_allocations_are_not_operations() {
        // Every 4 MiB request fails on a 1 MiB device: no pair completes, no figure.
        let small = direct(MockBackend::shared_with(
            MockConfig::default().capacity(1 << 20),
        ));
        let r = pair(
            &small,
            4 << 20,
            StreamId::DEFAULT,
            640,
            Duration::from_secs(5),
        );
        assert_eq!(r.0, 0);
        assert!(r.2 >= 640);
        let res = result("direct", "pair 4 MiB", 1, r, "mock");
        assert_eq!((res.ns_per_op, res.ops_per_sec), (None, None));
        assert_eq!(figure(Some(&res)), "failed");
        // Some fail: only the pairs that completed count.
        let mock = MockBackend::shared();
        let a = direct(mock.clone());
        // The 150th region: past the 100 warm-up pairs, inside the 640 timed ones.
        mock.fail_nth(FaultOn::Region, 150);
        let r = pair(&a, 4096, StreamId::DEFAULT, 640, Duration::from_secs(5));
        assert_eq!(r.2, 1, "one injected fault");
        assert_eq!(r.0, 639, "the failed pair is not counted: {r:?}");
        let RandomRun { ops: steps, .. } = random_loop(&small, 1000, 1);
        assert!(steps.2 > 0, "allocations failed on the 1 MiB device");
        assert_eq!(steps.0 + steps.2, 1000, "each step completed or failed");
    }

    #[test]
    fn the_footnote_only_when_an_allocation_failed() {
        let ok = BenchResult {
            strategy: "slab".into(),
            workload: "pair 4 KiB".into(),
            threads: 1,
            ns_per_op: Some(50.0),
            ops: 10,
            ops_per_sec: Some(2e7),
            seconds: 5e-7,
            failures: 0,
            backend: "mock".into(),
            held_over_live: None,
            steady_memory_calls: None,
            memory_calls: None,
        };
        let t = table(std::slice::from_ref(&ok), &[1]);
        assert!(t.contains("50.0") && !t.contains('*'), "{t}");
        let failed = BenchResult { failures: 3, ..ok };
        let t = table(&[failed], &[1]);
        assert!(
            t.contains("50.0*") && t.contains("some allocations failed"),
            "{t}"
        );
    }

    #[test]
    fn bad_settings_are_refused() {
        let args = |threads: Vec<usize>, steps, pairs| BenchArgs {
            json: false,
            strategies: vec![],
            threads,
            steps,
            pairs,
            live: vec![],
            live_table: crate::live::Table::Warm,
            config: None,
        };
        assert!(check_args(&args(vec![1, 2], 10, 10)).is_ok());
        for bad in [
            args(vec![0], 10, 10),
            args(vec![1, 0], 10, 10),
            args(vec![usize::MAX], 10, 10),
            args(vec![MAX_THREADS + 1], 10, 10),
            args(vec![1], 0, 10),
            args(vec![1], 10, 0),
            BenchArgs {
                live: vec![1000, 0],
                ..args(vec![1], 10, 10)
            },
        ] {
            assert!(check_args(&bad).is_err());
        }
    }
}
