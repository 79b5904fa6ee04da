//! Fragmentation of the buddy allocator on the bundled real traces.
//!
//! Replays each trace in traces/ (gzip CSV in RMM's log format) through the buddy
//! allocator on a fresh mock device per run, and prints the peak device bytes held
//! from the backend over the peak live requested bytes (1.000 is the floor), with the
//! backend's map, unmap and region calls per 1000 operations (map and unmap also over
//! the second half of the trace alone, once warm), for the default settings and a few
//! variants.
//!
//! ```sh
//! cargo run --release -p devpool-buddy --example trace_frag [TRACE_DIR]
//! ```

use devpool_buddy::{buddy, BuddyConfig, VmConfig};
use devpool_core::{Allocator, Backend, Block, MockBackend, Request, StreamId};
use flate2::read::GzDecoder;
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// One row of a trace.
enum Op {
    Alloc { ptr: u64, size: usize, stream: u64 },
    Free { ptr: u64 },
}

fn hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok()
}

/// Read a gzip RMM CSV log: `Thread,Time,Action,Pointer,Size,Stream`.
fn read_trace(path: &Path) -> std::io::Result<Vec<Op>> {
    let file = std::fs::File::open(path)?;
    let mut ops = Vec::new();
    for line in BufReader::new(GzDecoder::new(file)).lines().skip(1) {
        let line = line?;
        let f: Vec<&str> = line.split(',').collect();
        if f.len() < 6 {
            continue;
        }
        let (Some(ptr), Ok(size), Some(stream)) = (hex(f[3]), f[4].trim().parse(), hex(f[5]))
        else {
            continue;
        };
        match f[2].trim() {
            "allocate" => ops.push(Op::Alloc { ptr, size, stream }),
            "free" => ops.push(Op::Free { ptr }),
            _ => {} // "allocate failure": nothing was handed out
        }
    }
    Ok(ops)
}

/// Peak of live requested bytes over the trace.
fn peak_live(ops: &[Op]) -> u64 {
    let (mut live, mut peak) = (0u64, 0u64);
    let mut sizes = HashMap::new();
    for op in ops {
        match *op {
            Op::Alloc { ptr, size, .. } => {
                sizes.insert(ptr, size as u64);
                live += size as u64;
                peak = peak.max(live);
            }
            Op::Free { ptr } => live -= sizes.remove(&ptr).unwrap_or(0),
        }
    }
    peak
}

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

fn replay(ops: &[Op], cfg: BuddyConfig) -> Outcome {
    let mock = MockBackend::shared();
    let alloc = buddy(mock.clone(), cfg);
    let mut live: HashMap<u64, Block> = HashMap::new();
    let mut failed = 0;
    let t = Instant::now();
    let mut half = None;
    for (k, op) in ops.iter().enumerate() {
        if k == ops.len() / 2 {
            half = Some(mock.counters());
        }
        match *op {
            Op::Alloc { ptr, size, stream } => {
                match alloc.allocate(Request::new(size).on_stream(StreamId(stream))) {
                    Ok(b) => {
                        live.insert(ptr, b);
                    }
                    Err(_) => failed += 1,
                }
            }
            Op::Free { ptr } => {
                if let Some(b) = live.remove(&ptr) {
                    alloc.free(b).expect("free of a live block");
                }
            }
        }
    }
    let ns_per_op = t.elapsed().as_nanos() as f64 / ops.len().max(1) as f64;
    let c = mock.counters();
    let h = half.unwrap_or(c);
    let second = (ops.len() - ops.len() / 2).max(1) as f64;
    Outcome {
        warm_map: (c.map_calls - h.map_calls) as f64 * 1000.0 / second,
        warm_unmap: (c.unmap_calls - h.unmap_calls) as f64 * 1000.0 / second,
        peak_device: c.bytes_in_use.peak,
        map_calls: c.map_calls,
        unmap_calls: c.unmap_calls,
        region_calls: c.region_allocs + c.region_frees,
        ops: ops.len() as u64,
        ns_per_op,
        failed,
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
            "region, 2 GiB arenas",
            BuddyConfig::region().arena_size(2 << 30),
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
        let ops = match read_trace(&path) {
            Ok(ops) => ops,
            Err(e) => {
                eprintln!("{}: {e}", path.display());
                continue;
            }
        };
        let peak = peak_live(&ops);
        println!("{name:<20} {:<30} {:>10}", "(peak live bytes)", peak);
        for (label, cfg) in &runs {
            let o = replay(&ops, cfg.clone());
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
