//! Ring latency on the mock: allocate-free pairs, and a FIFO stream of blocks (each
//! step allocates one and frees the oldest of 64).
use criterion::{criterion_group, criterion_main, Criterion};
use devpool_core::{Allocator, Pool, Request};
use devpool_ring::{ring, RingConfig, RingPool};
use devpool_testing::MockBackend;
use std::collections::VecDeque;
use std::hint::black_box;

fn pairs(c: &mut Criterion) {
    let pool = RingPool::new(MockBackend::shared(), RingConfig::default());
    let req = Request::new(4096);
    c.bench_function("ring pool pair 4 KiB", |b| {
        b.iter(|| {
            let x = pool.allocate(black_box(&req)).unwrap();
            pool.deallocate(&x).unwrap();
        })
    });
    let r = ring(MockBackend::shared(), RingConfig::default());
    c.bench_function("ring pair 4 KiB", |b| {
        b.iter(|| {
            let x = r.allocate(black_box(req)).unwrap();
            r.free(x).unwrap();
        })
    });
}

fn fifo(c: &mut Criterion) {
    let r = ring(MockBackend::shared(), RingConfig::default());
    let sizes: Vec<usize> = (0..256)
        .map(|i| (64 << 10) + (i * 7919 % 251) * 4096)
        .collect();
    let mut live = VecDeque::new();
    let mut i = 0;
    c.bench_function("ring fifo step (64 live)", |b| {
        b.iter(|| {
            live.push_back(r.alloc(sizes[i & 255]).unwrap());
            i += 1;
            if live.len() > 64 {
                r.free(live.pop_front().unwrap()).unwrap();
            }
        })
    });
    for x in live {
        r.free(x).unwrap();
    }
}

#[allow(missing_docs)]
mod group {
    use super::*;
    criterion_group! {
        name = benches;
        config = Criterion::default()
            .warm_up_time(std::time::Duration::from_millis(300))
            .measurement_time(std::time::Duration::from_secs(1));
        targets = pairs, fifo
    }
}
criterion_main!(group::benches);
