//! Latency of the buddy allocator on the mock backend, warm, in both modes:
//!
//! - `pair`: one allocation and its free, same size, at 2 MiB and 64 MiB;
//! - `random`: an RMM-style loop, up to 1000 live blocks with sizes log-uniform in
//!   [256 B, 256 MiB], each step allocating or freeing a random live block with equal
//!   odds (one step per iteration).
//!
//! Both go through the allocator (`StreamOrdered` over one pool per stream) and
//! straight to the pool.
//!
//! ```sh
//! cargo bench -p devpool-buddy --bench buddy -- --warm-up-time 1 --measurement-time 2
//! ```

#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use devpool_buddy::{buddy, BuddyConfig, BuddyPool};
use devpool_core::{Allocator, Block, Pool, Request};
use devpool_testing::conformance::Rng;
use devpool_testing::MockBackend;
use std::hint::black_box;
use std::time::Duration;

/// A mode's name and its default settings.
type Mode = (&'static str, fn() -> BuddyConfig);

const MODES: [Mode; 2] = [
    ("region", BuddyConfig::region),
    ("virtual", BuddyConfig::virtual_ranges),
];

/// The random loop's state: precomputed sizes, the live blocks.
struct RandomLoop {
    rng: Rng,
    sizes: Vec<usize>,
    live: Vec<Block>,
}

impl RandomLoop {
    fn new(seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let sizes = (0..4096).map(|_| rng.log_uniform(256, 256 << 20)).collect();
        RandomLoop {
            rng,
            sizes,
            live: Vec::with_capacity(1000),
        }
    }

    #[inline]
    fn step(&mut self, alloc: impl Fn(usize) -> Option<Block>, free: impl Fn(Block)) {
        let r = self.rng.next_u64();
        if self.live.is_empty() || (self.live.len() < 1000 && r & 1 == 0) {
            if let Some(b) = alloc(self.sizes[(r >> 8) as usize & 4095]) {
                self.live.push(b);
            }
        } else {
            let i = ((r >> 1) % self.live.len() as u64) as usize;
            free(self.live.swap_remove(i));
        }
    }
}

fn pair(c: &mut Criterion) {
    let mut g = c.benchmark_group("pair");
    for (mode, cfg) in MODES {
        for size in [2usize << 20, 64 << 20] {
            let id = format!("{mode}/{}MiB", size >> 20);
            let a = buddy(MockBackend::shared(), cfg());
            a.free(a.alloc(size).unwrap()).unwrap();
            g.bench_function(BenchmarkId::new("allocator", &id), |b| {
                b.iter(|| {
                    a.free(black_box(a.alloc(black_box(size)).unwrap()))
                        .unwrap()
                })
            });
            let p = BuddyPool::new(MockBackend::shared(), cfg());
            let req = Request::new(size);
            g.bench_function(BenchmarkId::new("pool", &id), |b| {
                b.iter(|| {
                    let blk = p.allocate(black_box(&req)).unwrap();
                    p.deallocate(black_box(&blk)).unwrap()
                })
            });
        }
    }
    g.finish();
}

fn random(c: &mut Criterion) {
    let mut g = c.benchmark_group("random");
    for (mode, cfg) in MODES {
        let a = buddy(MockBackend::shared(), cfg());
        let mut lp = RandomLoop::new(1);
        let alloc = |s: usize| a.alloc(s).ok();
        let free = |b: Block| a.free(b).unwrap();
        for _ in 0..50_000 {
            lp.step(alloc, free);
        }
        g.bench_function(BenchmarkId::new("allocator", mode), |b| {
            b.iter(|| lp.step(alloc, free))
        });
        let p = BuddyPool::new(MockBackend::shared(), cfg());
        let mut lp = RandomLoop::new(1);
        let alloc = |s: usize| p.allocate(&Request::new(s)).ok();
        let free = |b: Block| p.deallocate(&b).unwrap();
        for _ in 0..50_000 {
            lp.step(alloc, free);
        }
        g.bench_function(BenchmarkId::new("pool", mode), |b| {
            b.iter(|| lp.step(alloc, free))
        });
    }
    g.finish();
}

fn short() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20)
}

criterion_group! {
    name = benches;
    config = short();
    targets = pair, random
}
criterion_main!(benches);
