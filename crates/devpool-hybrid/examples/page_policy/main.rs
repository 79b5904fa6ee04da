//! Tuning the page layer's policy: replay the bundled traces (and any inference
//! traces in traces/) plus synthetic inference-shaped workloads through variants of
//! the hybrid, and print for each the fragmentation ratio, backend memory calls per
//! 1000 operations, how many allocations reached the driver, and a model of the
//! driver time that would cost on an H200 (see `cost.rs`: a model, not a
//! measurement; GPU figures come from `devpool compare --backend cuda`).
//!
//! `cargo run --release -p devpool-hybrid --example page_policy [FILTER...]`
//! runs the variants whose names contain any FILTER (all without one).

mod cost;
mod synth;

use cost::Costed;
use devpool_core::{Allocator, Backend, Block, MockBackend, Request, Result, Stats, StreamId};
use devpool_hybrid::{hybrid, HybridConfig, LargeStrategy};
use devpool_trace::{read_trace, replay, ReplayOptions, Trace};
use devpool_vm::VmConfig;
use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// An allocator that notes the modeled driver time of each allocation.
struct Probe {
    inner: Box<dyn Allocator>,
    cost: Arc<Costed>,
    allocs: Mutex<Vec<u64>>,
    /// Allocations that mapped, and that unmapped.
    mapping: Mutex<(u64, u64)>,
}

impl Allocator for Probe {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn backend(&self) -> &Arc<dyn Backend> {
        self.inner.backend()
    }
    fn allocate(&self, req: Request) -> Result<Block> {
        let before = self.cost.ns.load(Relaxed);
        let c = self.cost.counters();
        let r = self.inner.allocate(req);
        self.allocs.lock().push(self.cost.ns.load(Relaxed) - before);
        let d = self.cost.counters();
        let mut m = self.mapping.lock();
        m.0 += u64::from(d.map_calls > c.map_calls);
        m.1 += u64::from(d.unmap_calls > c.unmap_calls);
        r
    }
    fn deallocate(&self, block: Block, stream: StreamId) -> Result<()> {
        self.inner.deallocate(block, stream)
    }
    fn record_stream(&self, block: &Block, stream: StreamId) -> Result<()> {
        self.inner.record_stream(block, stream)
    }
    fn stats(&self) -> Stats {
        self.inner.stats()
    }
    fn trim(&self) -> Result<usize> {
        self.inner.trim()
    }
}

type Variant = (&'static str, Box<dyn Fn() -> HybridConfig>);

fn with_pages(mut cfg: HybridConfig, f: impl Fn(VmConfig) -> VmConfig) -> HybridConfig {
    match &mut cfg.large {
        LargeStrategy::Tlsf(t) => t.pages = f(t.pages.clone()),
        LargeStrategy::Buddy(_) => {}
    }
    cfg
}

fn variants() -> Vec<Variant> {
    let t = HybridConfig::training;
    vec![
        ("training", Box::new(t)),
        ("inference", Box::new(HybridConfig::inference)),
        ("buddy", Box::new(HybridConfig::with_buddy)),
        (
            "chunk8",
            Box::new(move || with_pages(t(), |p| p.chunk_pages(8))),
        ),
        (
            "chunk4",
            Box::new(move || with_pages(t(), |p| p.chunk_pages(4))),
        ),
        (
            "chunk16",
            Box::new(move || with_pages(t(), |p| p.chunk_pages(16))),
        ),
        (
            "batch1",
            Box::new(move || with_pages(t(), |p| p.map_batch_pages(1))),
        ),
        (
            "batch32",
            Box::new(move || with_pages(t(), |p| p.map_batch_pages(32))),
        ),
        (
            "floor0",
            Box::new(move || with_pages(t(), |p| p.cache(0, 0.0))),
        ),
        (
            "slack0",
            Box::new(move || with_pages(t(), |p| p.slack_max(0.0))),
        ),
        (
            "slack1/64",
            Box::new(move || with_pages(t(), |p| p.slack_max(1.0 / 64.0))),
        ),
        (
            "slack1/16",
            Box::new(move || with_pages(t(), |p| p.slack_max(1.0 / 16.0))),
        ),
        (
            "tlsfslack0",
            Box::new(move || {
                with_pages(
                    HybridConfig {
                        small_max: 0,
                        ..t()
                    },
                    |p| p.slack_max(0.0),
                )
            }),
        ),
        (
            "tlsfonly",
            Box::new(move || HybridConfig {
                small_max: 0,
                ..t()
            }),
        ),
        (
            "eager",
            Box::new(move || with_pages(t(), |p| p.cache(0, 0.0).window_ops(1).chunk_pages(1))),
        ),
        (
            "eagerslab1m",
            Box::new(move || {
                with_pages(
                    HybridConfig {
                        small_max: 1 << 20,
                        slab: devpool_slab::SlabConfig::geometric(4, 1 << 20),
                        ..t()
                    },
                    |p| p.cache(0, 0.0).window_ops(1).chunk_pages(1),
                )
            }),
        ),
        (
            "floor8",
            Box::new(move || with_pages(t(), |p| p.cache(8 << 20, 0.0))),
        ),
    ]
}

fn traces() -> Vec<Trace> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../traces");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| {
        let n = p.to_string_lossy();
        n.ends_with(".csv.gz") || n.ends_with(".csv")
    });
    files.sort();
    let mut v: Vec<Trace> = files
        .iter()
        .map(|p| read_trace(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .collect();
    v.push(synth::decoder(12, 1));
    v.push(synth::encoder(300, 2));
    v
}

fn main() {
    let filters: Vec<String> = std::env::args().skip(1).collect();
    let opts = ReplayOptions {
        measure_latency: false,
        timeline_points: 0,
        ..ReplayOptions::default()
    };
    println!(
        "{:<20} {:<10} {:>7} {:>9} {:>10} {:>8} {:>8} {:>12} {:>12} {:>11}",
        "trace",
        "variant",
        "frag",
        "calls/kop",
        "driver/kop",
        "maps",
        "unmaps",
        "alloc p99 us",
        "alloc max us",
        "driver ms"
    );
    for trace in traces() {
        for (name, make) in variants() {
            if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
                continue;
            }
            let cost = Costed::new(MockBackend::shared());
            let probe = Probe {
                inner: Box::new(hybrid(cost.clone(), make())),
                cost: cost.clone(),
                allocs: Mutex::new(Vec::new()),
                mapping: Mutex::new((0, 0)),
            };
            let r = replay(&trace, &probe, &opts);
            let mut a = std::mem::take(&mut *probe.allocs.lock());
            if std::env::var_os("PAGE_POLICY_WHEN").is_some() {
                // When the allocations that reached the driver came, by tenth of the trace.
                let mut tenths = [0usize; 10];
                for (i, &x) in a.iter().enumerate() {
                    if x > 0 {
                        tenths[i * 10 / a.len()] += 1;
                    }
                }
                println!(
                    "{} {name}: driver calls by tenth of the allocations: {tenths:?}",
                    trace.name
                );
            }
            let hits = a.iter().filter(|&&x| x > 0).count();
            a.sort_unstable();
            let p99 = a.get(a.len() * 99 / 100).copied().unwrap_or(0);
            let max = a.last().copied().unwrap_or(0);
            let (maps, unmaps) = *probe.mapping.lock();
            println!(
                "{:<20} {:<10} {:>7.4} {:>9.2} {:>10.2} {:>8} {:>8} {:>12.1} {:>12.1} {:>11.2}",
                trace.name,
                name,
                r.fragmentation_ratio,
                r.backend.per_1000_ops.memory_calls,
                hits as f64 * 1000.0 / a.len().max(1) as f64,
                maps,
                unmaps,
                p99 as f64 / 1e3,
                max as f64 / 1e3,
                cost.ns.load(Relaxed) as f64 / 1e6,
            );
        }
        println!();
    }
}
