//! `devpool bench`: latency workloads per strategy.

use crate::target::fresh_backend;
use crate::BackendArgs;
use devpool_core::Rng;
use devpool_core::{Allocator, Block, Request, StreamId};
use serde::Serialize;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

pub struct BenchArgs {
    pub json: bool,
    pub strategies: Vec<String>,
    pub threads: Vec<usize>,
    pub steps: usize,
    pub pairs: usize,
    /// Live-block counts of the scaling workload (`live N`); none: not run.
    pub live: Vec<usize>,
}

/// One measured figure.
#[derive(Serialize, Clone, Debug)]
pub struct BenchResult {
    pub strategy: String,
    pub workload: String,
    pub threads: usize,
    /// Wall-clock nanoseconds per operation (a pair, or a step of the random loop),
    /// all threads together.
    pub ns_per_op: f64,
    pub ops: u64,
    /// Operations per second, all threads together.
    pub ops_per_sec: f64,
    pub failures: u64,
    pub backend: String,
    /// FIFO workload only: peak device bytes held over peak live bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_over_live: Option<f64>,
    /// FIFO workload only: backend calls that took or gave back memory after the
    /// warm-up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steady_memory_calls: Option<u64>,
}

/// Most time one figure may take; slow baselines stop early.
const BUDGET: Duration = Duration::from_millis(1500);

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
    let mut n = 0u64;
    while (n as usize) < max {
        for _ in 0..64 {
            match alloc.allocate(req) {
                Ok(b) => alloc.free(b).expect("free of a block just allocated"),
                Err(_) => fails += 1,
            }
        }
        n += 64;
        if start.elapsed() > budget {
            break;
        }
    }
    (n, start.elapsed(), fails)
}

/// The RMM-style loop: up to 1000 live blocks, sizes log-uniform in [256 B, 16 MiB],
/// each step allocates or frees a random live block with equal odds.
fn random_loop(alloc: &dyn Allocator, steps: usize, seed: u64) -> (u64, Duration, u64) {
    let mut rng = Rng::new(seed);
    let sizes: Vec<usize> = (0..4096).map(|_| rng.log_uniform(256, 16 << 20)).collect();
    let mut live: Vec<Block> = Vec::with_capacity(1000);
    let mut fails = 0;
    let start = Instant::now();
    let mut n = 0u64;
    while (n as usize) < steps {
        let r = rng.next_u64();
        if live.is_empty() || (live.len() < 1000 && r & 1 == 0) {
            match alloc.alloc(sizes[(r >> 8) as usize & 4095]) {
                Ok(b) => live.push(b),
                Err(_) => fails += 1,
            }
        } else {
            let i = ((r >> 1) % live.len() as u64) as usize;
            let b = live.swap_remove(i);
            alloc.free(b).expect("free of a live block");
        }
        n += 1;
        if n.is_multiple_of(1024) && start.elapsed() > BUDGET * 2 {
            break;
        }
    }
    let took = start.elapsed();
    for b in live {
        alloc.free(b).expect("free of a live block");
    }
    (n, took, fails)
}

fn threads_pairs(alloc: Arc<dyn Allocator>, threads: usize, size: usize) -> (u64, Duration, u64) {
    let barrier = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let alloc = alloc.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let stream = alloc
                    .backend()
                    .create_stream()
                    .unwrap_or(StreamId(1000 + t as u64));
                pair(&*alloc, size, stream, 64, Duration::ZERO); // warm this stream's pool
                barrier.wait();
                let r = pair(
                    &*alloc,
                    size,
                    stream,
                    usize::MAX,
                    Duration::from_millis(800),
                );
                let _ = alloc.trim();
                r
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    let mut total = 0;
    let mut fails = 0;
    for h in handles {
        let (n, _, f) = h.join().expect("bench thread");
        total += n;
        fails += f;
    }
    (total, start.elapsed(), fails)
}

pub(crate) fn result(
    strategy: &str,
    workload: &str,
    threads: usize,
    r: (u64, Duration, u64),
    backend: &str,
) -> BenchResult {
    let ns = r.1.as_nanos() as f64 / r.0.max(1) as f64;
    BenchResult {
        strategy: strategy.to_string(),
        workload: workload.to_string(),
        threads,
        ns_per_op: ns,
        ops: r.0,
        ops_per_sec: 1e9 / ns,
        failures: r.2,
        backend: backend.to_string(),
        held_over_live: None,
        steady_memory_calls: None,
    }
}

pub fn bench(args: BenchArgs, backend_args: &BackendArgs) -> Result<(), String> {
    let names = crate::reference::with_references(&args.strategies, backend_args)?;
    let mut threads = args.threads.clone();
    if threads.is_empty() {
        let n = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2);
        threads = if n > 1 { vec![1, n] } else { vec![1] };
    }
    let mut out = Vec::new();
    let be = backend_args.backend.as_str();
    for s in &names {
        let target = fresh_backend(backend_args)?;
        let alloc: Arc<dyn Allocator> = Arc::from(crate::reference::build(s, &target)?);
        for (w, size) in [
            ("pair 4 KiB", 4usize << 10),
            ("pair 1 MiB", 1 << 20),
            ("pair 64 MiB", 64 << 20),
        ] {
            let r = pair(&*alloc, size, StreamId::DEFAULT, args.pairs, BUDGET);
            out.push(result(s, w, 1, r, be));
            if !args.json {
                eprintln!(
                    "{s:>18} {w:<14} {:>10.1} ns",
                    out.last().map(|r| r.ns_per_op).unwrap_or(0.0)
                );
            }
        }
        if s != "arena" {
            let r = random_loop(&*alloc, args.steps, 42);
            out.push(result(s, "random op", 1, r, be));
            if !args.json {
                eprintln!(
                    "{s:>18} {:<14} {:>10.1} ns",
                    "random op",
                    out.last().map(|r| r.ns_per_op).unwrap_or(0.0)
                );
            }
        }
        let _ = alloc.trim();
        for &t in &threads {
            let r = threads_pairs(alloc.clone(), t, 64 << 10);
            out.push(result(s, "pair 64 KiB, own stream per thread", t, r, be));
            if !args.json {
                eprintln!(
                    "{s:>18} {:<14} {:>10.1} ns  ({:.2} M pairs/s on {t} threads)",
                    "threads",
                    out.last().map(|r| r.ns_per_op).unwrap_or(0.0),
                    out.last().map(|r| r.ops_per_sec / 1e6).unwrap_or(0.0)
                );
            }
        }
    }
    let live = crate::live::run_all(&names, &args.live, backend_args, args.json)?;
    out.extend(live.iter().cloned());
    // The FIFO workload measures device memory held: the host reference has none.
    for s in names
        .iter()
        .filter(|s| !crate::reference::REFERENCES.contains(&s.as_str()))
    {
        let r = crate::fifo::run(s, backend_args, args.pairs, BUDGET)?;
        if !args.json {
            eprintln!(
                "{s:>18} {:<14} {:>10.1} ns  (held / live {:.4}, {} memory calls in the steady state)",
                crate::fifo::WORKLOAD,
                r.ns_per_op,
                r.held_over_live.unwrap_or(0.0),
                r.steady_memory_calls.unwrap_or(0)
            );
        }
        out.push(r);
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&out).map_err(|e| e.to_string())?
        );
    } else {
        print_table(&out, &threads);
        crate::live::print_results(&live, &args.live);
        crate::fifo::print_table(&out);
    }
    Ok(())
}

fn print_table(out: &[BenchResult], threads: &[usize]) {
    let mut names: Vec<&str> = Vec::new();
    for r in out {
        if !names.contains(&r.strategy.as_str()) {
            names.push(&r.strategy);
        }
    }
    print!(
        "\n{:<18} {:>12} {:>12} {:>12} {:>12}",
        "ns per op", "pair 4 KiB", "pair 1 MiB", "pair 64 MiB", "random op"
    );
    for t in threads {
        print!(" {:>14}", format!("{t} thr M pairs/s"));
    }
    println!();
    for n in names {
        let get = |w: &str, t: usize| {
            out.iter()
                .find(|r| r.strategy == n && r.workload == w && r.threads == t)
        };
        print!("{n:<18}");
        for w in ["pair 4 KiB", "pair 1 MiB", "pair 64 MiB", "random op"] {
            match get(w, 1) {
                Some(r) if r.failures == 0 => print!(" {:>12.1}", r.ns_per_op),
                Some(r) => print!(" {:>12}", format!("{:.1}*", r.ns_per_op)),
                None => print!(" {:>12}", "-"),
            }
        }
        for &t in threads {
            match get("pair 64 KiB, own stream per thread", t) {
                Some(r) => print!(" {:>14.2}", r.ops_per_sec / 1e6),
                None => print!(" {:>14}", "-"),
            }
        }
        println!();
    }
    println!("(* some allocations failed in that workload)");
}
