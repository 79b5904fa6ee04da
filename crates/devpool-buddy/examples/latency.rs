//! Latency of the buddy allocator, warm, on the mock backend, as the best of many
//! short batches: on a machine shared with other work the minimum is what the code
//! costs, where a mean also counts the time other processes took. The same workloads
//! as the criterion benchmark (benches/buddy.rs):
//!
//! - a same-size allocate-and-free pair at 2 MiB and 64 MiB;
//! - the random loop: up to 1000 live blocks with sizes log-uniform in [256 B, 256 MiB],
//!   each step allocating or freeing a random live block with equal odds.
//!
//! ```sh
//! cargo run --release -p devpool-buddy --example latency
//! ```

use devpool_buddy::{buddy, BuddyConfig};
use devpool_core::{Allocator, Block};
use devpool_testing::conformance::Rng;
use devpool_testing::MockBackend;
use std::hint::black_box;
use std::time::Instant;

/// The least ns per call of `f` over 300 batches of `per` calls.
fn best_ns(mut f: impl FnMut(), per: usize) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..300 {
        let t = Instant::now();
        for _ in 0..per {
            f();
        }
        best = best.min(t.elapsed().as_nanos() as f64 / per as f64);
    }
    best
}

fn main() {
    for (mode, cfg) in [
        ("region", BuddyConfig::region()),
        ("virtual", BuddyConfig::virtual_ranges()),
    ] {
        for size in [2usize << 20, 64 << 20] {
            let a = buddy(MockBackend::shared(), cfg.clone());
            let ns = best_ns(
                || {
                    a.free(black_box(a.alloc(black_box(size)).unwrap()))
                        .unwrap()
                },
                2000,
            );
            println!("pair {mode:<8} {:>3} MiB: {ns:6.1} ns", size >> 20);
        }
        let a = buddy(MockBackend::shared(), cfg);
        let mut rng = Rng::new(1);
        let sizes: Vec<usize> = (0..4096).map(|_| rng.log_uniform(256, 256 << 20)).collect();
        let mut live: Vec<Block> = Vec::with_capacity(1000);
        let mut step = || {
            let r = rng.next_u64();
            if live.is_empty() || (live.len() < 1000 && r & 1 == 0) {
                if let Ok(b) = a.alloc(sizes[(r >> 8) as usize & 4095]) {
                    live.push(b);
                }
            } else {
                let i = ((r >> 1) % live.len() as u64) as usize;
                a.free(live.swap_remove(i)).unwrap();
            }
        };
        for _ in 0..50_000 {
            step();
        }
        let before = a.backend().counters();
        let ns = best_ns(&mut step, 5000);
        let c = a.backend().counters();
        let ops = 300.0 * 5000.0;
        println!(
            "random {mode:<8}: {ns:6.1} ns/op; per 1000 ops {:.2} map and {:.2} unmap calls",
            (c.map_calls - before.map_calls) as f64 * 1000.0 / ops,
            (c.unmap_calls - before.unmap_calls) as f64 * 1000.0 / ops,
        );
    }
}
