//! Arena latency on the mock backend: a frame of 1000 mixed allocations then a reset
//! (time per frame; divide by 1000 for the time per allocation) through the allocator
//! and on one pool, allocate + free pairs, and a frame bumped by four threads.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use devpool_arena::{arena, ArenaConfig, ArenaPool};
use devpool_core::{Allocator, Pool, Request};
use devpool_testing::conformance::Rng;
use devpool_testing::MockBackend;
use std::time::Duration;

fn frame(c: &mut Criterion) {
    let a = arena(MockBackend::shared(), ArenaConfig::default());
    let mut rng = Rng::new(42);
    let sizes: Vec<usize> = (0..1000).map(|_| rng.log_uniform(1, 64 << 10)).collect();
    let mut g = c.benchmark_group("arena");
    g.throughput(Throughput::Elements(sizes.len() as u64));
    g.bench_function("frame_1000_mixed_then_reset", |b| {
        b.iter(|| {
            for &s in &sizes {
                black_box(a.allocate(Request::new(s)).unwrap());
            }
            a.reset().unwrap();
        })
    });
    g.finish();
}

fn pool_frame(c: &mut Criterion) {
    // The same frame on one pool, without the per-stream layer.
    let pool = ArenaPool::new(MockBackend::shared(), ArenaConfig::default());
    let mut rng = Rng::new(42);
    let reqs: Vec<Request> = (0..1000)
        .map(|_| Request::new(rng.log_uniform(1, 64 << 10)))
        .collect();
    let mut g = c.benchmark_group("arena");
    g.throughput(Throughput::Elements(reqs.len() as u64));
    g.bench_function("pool_frame_1000_mixed_then_reset", |b| {
        b.iter(|| {
            for r in &reqs {
                black_box(pool.allocate(r).unwrap());
            }
            pool.reset().unwrap();
        })
    });
    g.finish();
}

fn pairs(c: &mut Criterion) {
    let mut g = c.benchmark_group("arena");
    for (name, one_live) in [("pair_4k", false), ("pair_4k_one_block_live", true)] {
        let a = arena(MockBackend::shared(), ArenaConfig::default());
        // Each pair frees the block bumped last, so its room comes back at once; with a
        // block kept live the arena also never rewinds.
        let _anchor = one_live.then(|| a.alloc(256).unwrap());
        g.bench_function(name, |b| {
            b.iter(|| {
                let x = a.alloc(black_box(4096)).unwrap();
                a.free(x).unwrap();
            })
        });
    }
    g.finish();
}

fn threads(c: &mut Criterion) {
    let mut g = c.benchmark_group("arena");
    let t = 4usize;
    let per = 1000usize;
    g.throughput(Throughput::Elements((t * per) as u64));
    g.bench_function("frame_4_threads_x1000_then_reset", |b| {
        let a = arena(MockBackend::shared(), ArenaConfig::default());
        b.iter(|| {
            std::thread::scope(|s| {
                for _ in 0..t {
                    s.spawn(|| {
                        for _ in 0..per {
                            black_box(a.alloc(black_box(1000)).unwrap());
                        }
                    });
                }
            });
            a.reset().unwrap();
        })
    });
    g.finish();
}

// The macro makes an undocumented public function.
#[allow(missing_docs)]
mod group {
    use super::*;
    criterion_group! {
        name = benches;
        config = Criterion::default()
            .sample_size(20)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(2));
        targets = frame, pool_frame, pairs, threads
    }
}
criterion_main!(group::benches);
