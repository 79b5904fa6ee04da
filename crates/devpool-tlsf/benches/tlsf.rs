//! Criterion benchmarks of the TLSF allocator in virtual mode on the mock backend,
//! warm: an allocate+free pair of one size, and the RMM-style random loop (up to
//! 1000 live blocks, sizes log-uniform in 1 MiB..256 MiB, allocate or free a random
//! live block with equal odds).
//!
//! ```sh
//! cargo bench -p devpool-tlsf --bench tlsf -- --warm-up-time 1 --measurement-time 3
//! ```

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use devpool_core::{Allocator, Block, Pool, Request};
use devpool_testing::conformance::Rng;
use devpool_testing::MockBackend;
use devpool_tlsf::{tlsf, TlsfConfig, TlsfMode, TlsfPool};
use std::hint::black_box;

fn cfg() -> TlsfConfig {
    TlsfConfig::default().mode(TlsfMode::Virtual)
}

fn pair(c: &mut Criterion) {
    let mut g = c.benchmark_group("pair");
    for (label, size) in [("2MiB", 2usize << 20), ("64MiB", 64 << 20)] {
        let alloc = tlsf(MockBackend::shared(), cfg());
        // Warm: the pages are mapped by a first pair.
        alloc.free(alloc.alloc(size).unwrap()).unwrap();
        g.bench_function(format!("allocator/{label}"), |b| {
            b.iter(|| {
                let blk = alloc.alloc(black_box(size)).unwrap();
                alloc.free(black_box(blk)).unwrap();
            })
        });
        let pool = TlsfPool::new(MockBackend::shared(), cfg());
        let req = Request::new(size);
        pool.deallocate(&pool.allocate(&req).unwrap()).unwrap();
        g.bench_function(format!("pool/{label}"), |b| {
            b.iter(|| {
                let blk = pool.allocate(black_box(&req)).unwrap();
                pool.deallocate(black_box(&blk)).unwrap();
            })
        });
    }
    g.finish();
}

/// The random loop's state: live blocks and pre-drawn sizes and choices, so that
/// drawing random numbers is not measured.
struct Loop {
    live: Vec<Block>,
    sizes: Vec<usize>,
    picks: Vec<u64>,
    at: usize,
}

impl Loop {
    fn new(seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        Loop {
            live: Vec::with_capacity(1000),
            sizes: (0..1 << 16)
                .map(|_| rng.log_uniform(1 << 20, 256 << 20))
                .collect(),
            picks: (0..1 << 16).map(|_| rng.next_u64()).collect(),
            at: 0,
        }
    }

    #[inline]
    fn step(&mut self, alloc: &impl Allocator) {
        let k = self.at & (self.sizes.len() - 1);
        self.at += 1;
        let r = self.picks[k];
        if self.live.len() < 1000 && (self.live.is_empty() || r & 1 == 0) {
            self.live.push(alloc.alloc(self.sizes[k]).unwrap());
        } else {
            let i = ((r >> 1) % self.live.len() as u64) as usize;
            alloc.free(self.live.swap_remove(i)).unwrap();
        }
    }
}

fn random_loop(c: &mut Criterion) {
    let mut g = c.benchmark_group("random");
    let mock = MockBackend::shared();
    let alloc = tlsf(mock.clone(), cfg());
    let mut state = Loop::new(42);
    // Warm up to the steady state: the pages of the working set are mapped.
    for _ in 0..200_000 {
        state.step(&alloc);
    }
    g.bench_function("op", |b| b.iter(|| state.step(&alloc)));
    g.bench_function("op/1000-steps", |b| {
        b.iter_batched(
            || (),
            |_| {
                for _ in 0..1000 {
                    state.step(&alloc);
                }
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
    let d = alloc.pools().next().map(|(_, p)| p.detail());
    if let Some(d) = d {
        eprintln!("after the random loop: {d}");
    }
}

#[allow(missing_docs)] // the macro's generated function has no doc comment
mod group {
    use super::*;
    criterion_group! {
        name = benches;
        config = Criterion::default().sample_size(20);
        targets = pair, random_loop
    }
}
criterion_main!(group::benches);
