//! Every strategy side by side on the mock backend: same-size pairs and the
//! RMM-style random loop.

#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use devpool::MockBackend;
use devpool::StrategySpec;
use devpool_benches::RandomLoop;
use devpool_core::Allocator;
use std::hint::black_box;

const STRATEGIES: &[&str] = &["direct", "slab", "buddy-virtual", "tlsf-virtual", "hybrid"];

fn pairs(c: &mut Criterion) {
    let mut g = c.benchmark_group("pair");
    for &s in STRATEGIES {
        let alloc = s
            .parse::<StrategySpec>()
            .expect("strategy")
            .build(MockBackend::shared());
        for (label, size) in [
            ("4KiB", 4usize << 10),
            ("1MiB", 1 << 20),
            ("64MiB", 64 << 20),
        ] {
            g.bench_with_input(BenchmarkId::new(s, label), &size, |b, &size| {
                b.iter(|| {
                    let blk = alloc.alloc(black_box(size)).expect("alloc");
                    alloc.free(blk).expect("free");
                })
            });
        }
    }
    g.finish();
}

fn random(c: &mut Criterion) {
    let mut g = c.benchmark_group("random op 256B-16MiB");
    for &s in STRATEGIES {
        let alloc = s
            .parse::<StrategySpec>()
            .expect("strategy")
            .build(MockBackend::shared());
        let mut l = RandomLoop::new(42, 256, 16 << 20, 1000);
        for _ in 0..20_000 {
            l.step(&*alloc);
        }
        g.bench_function(s, |b| b.iter(|| l.step(&*alloc)));
        l.finish(&*alloc);
    }
    g.finish();
}

criterion_group!(benches, pairs, random);
criterion_main!(benches);
