//! Fragmentation of the buddy allocator on the bundled real traces.
//!
//! Replays each trace in traces/ (read and replayed by devpool-trace) through the
//! buddy allocator on a fresh mock device per run, and prints the peak device bytes held
//! from the backend over the peak live requested bytes (1.000 is the floor), with the
//! backend's map, unmap and region calls per 1000 operations (map and unmap also over
//! the second half of the trace alone, once warm), for the default settings and a few
//! variants.
//!
//! ```sh
//! cargo run --release -p devpool-buddy --example buddy_trace_frag [TRACE_DIR]
//! ```

use devpool_buddy::{buddy, BuddyConfig, VmConfig};
use devpool_core::{Backend, BackendCounters};
use devpool_testing::MockBackend;
use devpool_trace::{read_trace, replay_events, ReplayOptions, Trace};
use std::cell::Cell;
use std::path::{Path, PathBuf};

struct Outcome {
    warm_map: f64,
    warm_unmap: f64,
    peak_device: u64,
    map_calls: u64,
    unmap_calls: u64,
    region_calls: u64,
    ops: u64,
    ns_per_op: f64,
    failed: u64,
}

/// Replay `trace` through a buddy allocator on a fresh mock; the backend's counters
/// are also taken when the second half of the trace begins.
fn replay(trace: &Trace, cfg: BuddyConfig) -> Outcome {
    let mock = MockBackend::shared();
    let alloc = buddy(mock.clone(), cfg);
    let n = trace.events.len();
    let half: Cell<Option<BackendCounters>> = Cell::new(None);
    let events = trace.events.iter().enumerate().map(|(k, e)| {
        if k == n / 2 {
            half.set(Some(mock.counters()));
        }
        Ok::<_, std::convert::Infallible>(*e)
    });
    let opts = ReplayOptions {
        timeline_points: 0,
        measure_latency: false,
        progress: None,
    };
    let r = match replay_events(&trace.name, events, &alloc, &opts) {
        Ok(r) => r,
        Err(never) => match never {},
    };
    let c = mock.counters();
    let h = half.get().unwrap_or(c);
    let second = (n - n / 2).max(1) as f64;
    Outcome {
        warm_map: (c.map_calls - h.map_calls) as f64 * 1000.0 / second,
        warm_unmap: (c.unmap_calls - h.unmap_calls) as f64 * 1000.0 / second,
        peak_device: r.peak_reserved_bytes,
        map_calls: c.map_calls,
        unmap_calls: c.unmap_calls,
        region_calls: c.region_allocs + c.region_frees,
        ops: n as u64,
        ns_per_op: r.wall_ms * 1e6 / n.max(1) as f64,
        failed: r.failed_allocations,
    }
}

fn main() {
    let dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../traces")
                .to_path_buf()
        });
    let cache = |floor: usize, fraction: f64| VmConfig::default().cache(floor, fraction);
    let runs: Vec<(&str, BuddyConfig)> = vec![
        ("region", BuddyConfig::region()),
        (
            "region, whole blocks",
            BuddyConfig::region().trim_tail(false),
        ),
        (
            "region, 2 GiB spans",
            BuddyConfig::region().span_size(2 << 30),
        ),
        ("virtual", BuddyConfig::virtual_ranges()),
        (
            "virtual, whole blocks",
            BuddyConfig::virtual_ranges().trim_tail(false),
        ),
        (
            "virtual, no quick lists",
            BuddyConfig::virtual_ranges().quick_depth(0),
        ),
        (
            "virtual, no cache floor",
            BuddyConfig::virtual_ranges().pages(cache(0, 0.0)),
        ),
        (
            "virtual, floor 1/16",
            BuddyConfig::virtual_ranges().pages(cache(32 << 20, 1.0 / 16.0)),
        ),
        (
            "virtual, chunks of 8 pages",
            BuddyConfig::virtual_ranges().pages(VmConfig::default().chunk_pages(8)),
        ),
    ];
    println!(
        "{:<20} {:<30} {:>10} {:>8} {:>9} {:>11} {:>9} {:>11} {:>12} {:>8}",
        "trace",
        "allocator",
        "peak dev",
        "ratio",
        "map/1k",
        "unmap/1k",
        "map/1k*",
        "unmap/1k*",
        "region/1k",
        "ns/op"
    );
    println!("(* in the second half of the trace only, once warm; ratio: peak device bytes over peak live bytes)");
    for name in ["resnet50_train", "gpt2_train_varlen"] {
        let path = dir.join(format!("{name}.csv.gz"));
        let trace = match read_trace(&path) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("{e}");
                continue;
            }
        };
        let peak = trace.peak_live_bytes();
        println!("{name:<20} {:<30} {:>10}", "(peak live bytes)", peak);
        for (label, cfg) in &runs {
            let o = replay(&trace, cfg.clone());
            let per_k = |x: u64| x as f64 * 1000.0 / o.ops as f64;
            println!(
                "{:<20} {:<30} {:>10} {:>8.3} {:>9.2} {:>11.2} {:>9.2} {:>11.2} {:>12.2} {:>8.0}{}",
                name,
                label,
                o.peak_device,
                o.peak_device as f64 / peak as f64,
                per_k(o.map_calls),
                per_k(o.unmap_calls),
                o.warm_map,
                o.warm_unmap,
                per_k(o.region_calls),
                o.ns_per_op,
                if o.failed > 0 {
                    format!("  ({} allocations failed)", o.failed)
                } else {
                    String::new()
                }
            );
        }
    }
}
