//! Tuning the page layer's policy: replay the bundled traces in traces/ through the
//! hybrid's training preset and variants of it (each with one setting changed), and
//! print for each the fragmentation ratio, backend memory calls per 1000
//! operations, how many allocations reached the backend, and a model of the driver
//! time that would cost on an H200 (see `cost.rs`: a model, not a measurement; GPU
//! figures come from `devpool compare --backend cuda`).
//!
//! `cargo run --release -p devpool-hybrid --example page_policy [VARIANT...]` runs
//! the variants named (all without one). With `PAGE_POLICY_SYNTH=1`, two synthetic
//! inference-shaped workloads are replayed too (`synth.rs`); `PAGE_POLICY_CALLS=1`
//! breaks the calls down; `PAGE_POLICY_WHEN=1` says when the allocations that
//! reached the backend came; `--breakdown [TRACE...]` says where the memory held at
//! the peak sits (`breakdown.rs`).

mod breakdown;
mod cost;
mod synth;

use cost::Costed;
use devpool_core::{Allocator, Backend, Block, Request, Result};
use devpool_hybrid::{hybrid, HybridConfig, LargeStrategy};
use devpool_testing::MockBackend;
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
    devpool_core::forward_allocator!(|p| &p.inner; name, backend, deallocate, record_stream, stats, trim);
}

type Variant = (&'static str, Box<dyn Fn() -> HybridConfig>);

fn with_pages(mut cfg: HybridConfig, f: impl Fn(VmConfig) -> VmConfig) -> HybridConfig {
    match &mut cfg.large {
        LargeStrategy::Tlsf(t) => t.pages = f(t.pages.clone()),
        LargeStrategy::Buddy(b) => b.pages = f(b.pages.clone()),
    }
    cfg
}

/// The training preset with its page settings changed by `f`.
fn pages(f: fn(VmConfig) -> VmConfig) -> Box<dyn Fn() -> HybridConfig> {
    Box::new(move || with_pages(HybridConfig::training(), f))
}

/// The training preset changed by `f`.
fn preset(f: fn(HybridConfig) -> HybridConfig) -> Box<dyn Fn() -> HybridConfig> {
    Box::new(move || f(HybridConfig::training()))
}

fn variants() -> Vec<Variant> {
    vec![
        ("training", Box::new(HybridConfig::training)),
        ("inference", Box::new(HybridConfig::inference)),
        ("buddy", Box::new(HybridConfig::with_buddy)),
        ("no-moves", pages(|p| p.move_memory(false))),
        ("margin-2%", pages(|p| p.move_margin(0.02))),
        ("chunk-1", pages(|p| p.chunk_pages(1))),
        ("chunk-8", pages(|p| p.chunk_pages(8))),
        ("whole-8", pages(|p| p.chunk_pages(8).chunk_divisor(1))),
        ("div-8", pages(|p| p.chunk_divisor(8))),
        ("div-4", pages(|p| p.chunk_divisor(4))),
        ("div-1", pages(|p| p.chunk_divisor(1))),
        ("min-2", pages(|p| p.chunk_min_pages(2))),
        ("min-4", pages(|p| p.chunk_min_pages(4))),
        ("batch-8", pages(|p| p.map_batch_pages(8))),
        ("batch-32", pages(|p| p.map_batch_pages(32))),
        ("batch-64", pages(|p| p.map_batch_pages(64))),
        ("no-cap", pages(|p| p.batch_cap(0))),
        ("floor-32M", pages(|p| p.floor_max(1.0))),
        ("floor-0", pages(|p| p.cache(0, 0.0))),
        (
            "slab-regions",
            preset(|c| HybridConfig {
                slabs_from_large: false,
                slab: devpool_slab::SlabConfig::geometric(4, 64 << 10),
                ..c
            }),
        ),
        (
            "slab-1M",
            preset(|c| HybridConfig {
                small_max: 1 << 20,
                slab: devpool_slab::SlabConfig::geometric(4, 1 << 20)
                    .min_slab_bytes(64 << 10)
                    .keep_empty(0),
                ..c
            }),
        ),
        ("tlsf-only", preset(|c| HybridConfig { small_max: 0, ..c })),
        (
            "eager",
            pages(|p| {
                p.cache(0, 0.0)
                    .window_ops(1)
                    .move_memory(false)
                    .chunk_pages(1)
            }),
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
    if std::env::var_os("PAGE_POLICY_SYNTH").is_some() {
        v.push(synth::decoder(12, 1));
        v.push(synth::encoder(300, 2));
    }
    v
}

fn main() {
    let filters: Vec<String> = std::env::args().skip(1).collect();
    if filters.first().map(String::as_str) == Some("--breakdown") {
        let small_max: usize = std::env::var("SMALL_MAX")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(64 << 10);
        for t in traces() {
            if filters.len() > 1 && !filters[1..].iter().any(|f| t.name.contains(f.as_str())) {
                continue;
            }
            breakdown::run(
                &t,
                small_max,
                devpool_tlsf::TlsfConfig::default().mode(devpool_tlsf::TlsfMode::Virtual),
            );
        }
        return;
    }
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
            if !filters.is_empty()
                && !filters
                    .iter()
                    .any(|f| name == f.as_str() || (f.len() > 2 && name.contains(f.as_str())))
            {
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
            if std::env::var_os("PAGE_POLICY_CALLS").is_some() {
                let c = cost.counters();
                println!(
                    "{} {name}: map {} (alias {}), unmap {}, regions {}+{}, chunks made {}",
                    trace.name,
                    c.map_calls - c.alias_calls,
                    c.alias_calls,
                    c.unmap_calls,
                    c.region_allocs,
                    c.region_frees,
                    c.chunks_created
                );
            }
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
