//! What each adaptor adds to an allocation and its free (4 KiB, same stream), over a
//! pool that reuses addresses at once (the shape of a caching strategy's fast path),
//! on the mock backend. (The direct allocator cannot be the base here: the mock never
//! reuses an address, and millions of pairs run through its address space.)
#![allow(missing_docs)]
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use devpool_adaptors::{Guarded, Limit, Logging, OomRetry, Statistics, Tracking};
use devpool_core::{Allocator, MockBackend, MockConfig};
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

#[path = "../tests/common/mod.rs"]
mod common;

type Build = fn(Arc<MockBackend>) -> Box<dyn Allocator>;

fn base(m: Arc<MockBackend>) -> Box<dyn Allocator> {
    Box::new(common::reuse(m))
}

fn builders() -> Vec<(&'static str, Build)> {
    vec![
        ("bare", |m| base(m)),
        ("stats", |m| Box::new(Statistics::new(base(m)))),
        ("limit", |m| Box::new(Limit::new(base(m), 1 << 40))),
        ("log-sink", |m| {
            Box::new(Logging::new(base(m), std::io::sink()))
        }),
        ("tracking", |m| Box::new(Tracking::new(base(m)))),
        ("tracking-backtraces", |m| {
            Box::new(Tracking::new(base(m)).with_backtraces(true))
        }),
        ("oom-retry", |m| Box::new(OomRetry::new(base(m)))),
        ("guarded", |m| Box::new(Guarded::new(base(m)))),
        ("stack", |m| {
            Box::new(Statistics::new(Limit::new(
                Logging::new(Tracking::new(base(m)), std::io::sink()),
                1 << 40,
            )))
        }),
    ]
}

fn pairs(c: &mut Criterion) {
    {
        let mut g = c.benchmark_group("pair_4k_over_reuse");
        for (name, build) in builders() {
            // Guards need real bytes behind the blocks.
            let cfg = if name == "guarded" {
                MockConfig::default().host_backed()
            } else {
                MockConfig::default()
            };
            let a = build(MockBackend::shared_with(cfg));
            g.bench_function(BenchmarkId::from_parameter(name), |b| {
                b.iter(|| {
                    let blk = a.alloc(black_box(4096)).unwrap();
                    a.free(blk).unwrap();
                })
            });
        }
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = pairs
}
criterion_main!(benches);
