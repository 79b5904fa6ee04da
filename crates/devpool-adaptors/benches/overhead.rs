//! What each adaptor adds to an allocation and its free (4 KiB, same stream), over the
//! slab strategy and over a simple pool that reuses addresses at once, on the mock
//! backend. (The direct allocator cannot be the base here: the mock never reuses an
//! address, and millions of pairs run through its address space.)
#![allow(missing_docs)]
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use devpool_adaptors::{Guarded, Limit, Logging, OomRetry, Statistics, Tracking};
use devpool_core::Allocator;
use devpool_testing::{MockBackend, MockConfig};
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

#[path = "../tests/common/mod.rs"]
mod common;

type Build = fn(Arc<MockBackend>, bool) -> Box<dyn Allocator>;

fn base(m: Arc<MockBackend>, slab: bool) -> Box<dyn Allocator> {
    if slab {
        Box::new(devpool_slab::slab(m, devpool_slab::SlabConfig::default()))
    } else {
        Box::new(common::reuse(m))
    }
}

fn builders() -> Vec<(&'static str, Build)> {
    vec![
        ("bare", |m, s| base(m, s)),
        ("stats", |m, s| Box::new(Statistics::new(base(m, s)))),
        ("limit", |m, s| Box::new(Limit::new(base(m, s), 1 << 40))),
        ("log-sink", |m, s| {
            Box::new(Logging::new(base(m, s), std::io::sink()))
        }),
        ("tracking", |m, s| Box::new(Tracking::new(base(m, s)))),
        ("tracking-backtraces", |m, s| {
            Box::new(Tracking::new(base(m, s)).with_backtraces(true))
        }),
        ("oom-retry", |m, s| Box::new(OomRetry::new(base(m, s)))),
        ("guarded", |m, s| Box::new(Guarded::new(base(m, s)))),
        ("stack", |m, s| {
            Box::new(Statistics::new(Limit::new(
                Logging::new(Tracking::new(base(m, s)), std::io::sink()),
                1 << 40,
            )))
        }),
    ]
}

fn pairs(c: &mut Criterion) {
    for (label, slab) in [("slab", true), ("reuse", false)] {
        let mut g = c.benchmark_group(format!("pair_4k_over_{label}"));
        for (name, build) in builders() {
            // Guards need real bytes behind the blocks.
            let cfg = if name == "guarded" {
                MockConfig::default().host_backed()
            } else {
                MockConfig::default()
            };
            let a = build(MockBackend::shared_with(cfg), slab);
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
