//! How the hybrid's thresholds were chosen: replay the bundled traces through the
//! hybrid with several small-route limits and slab class spacings, and print the
//! fragmentation ratio and backend calls of each.
//!
//! `cargo run --release -p devpool-hybrid --example thresholds [TRACE...]`

use devpool_hybrid::{hybrid, HybridConfig};
use devpool_slab::SlabConfig;
use devpool_testing::MockBackend;
use devpool_trace::{read_trace, replay, ReplayOptions};
use std::path::PathBuf;

fn main() {
    let mut traces: Vec<PathBuf> = std::env::args().skip(1).map(PathBuf::from).collect();
    if traces.is_empty() {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../traces");
        traces = ["resnet50_train.csv.gz", "gpt2_train_varlen.csv.gz"]
            .iter()
            .map(|n| dir.join(n))
            .collect();
    }
    let opts = ReplayOptions {
        measure_latency: false,
        ..ReplayOptions::default()
    };
    println!(
        "{:<20} {:>10} {:>8} {:>8} {:>10}",
        "trace", "small max", "classes", "frag", "calls/kop"
    );
    for path in &traces {
        let trace = read_trace(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for small_max in [0usize, 4 << 10, 64 << 10, 256 << 10, 1 << 20] {
            for per in [4usize, 8] {
                if small_max == 0 && per == 8 {
                    continue;
                }
                let cfg = HybridConfig {
                    small_max,
                    slab: SlabConfig::geometric(per, small_max.max(256)),
                    ..HybridConfig::training()
                };
                let r = replay(&trace, &hybrid(MockBackend::shared(), cfg), &opts);
                println!(
                    "{:<20} {:>10} {:>8} {:>8.4} {:>10.2}",
                    trace.name,
                    devpool_core::human_bytes(small_max as u64),
                    per,
                    r.fragmentation_ratio,
                    r.backend.per_1000_ops.memory_calls
                );
            }
        }
    }
}
