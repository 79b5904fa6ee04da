//! Replay of the bundled traces through the direct allocator on a fresh mock backend:
//! the replay's own overhead plus the direct allocator's.
use criterion::{criterion_main, BatchSize, Criterion};
use devpool_core::direct;
use devpool_testing::MockBackend;
use devpool_trace::{read_trace, replay, ReplayOptions, Trace};
use std::path::Path;

fn load(file: &str) -> Trace {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../traces")
        .join(file);
    read_trace(&path).expect("bundled trace")
}

fn bench_replay(c: &mut Criterion) {
    let mut group = c.benchmark_group("replay_direct");
    group.sample_size(20);
    for file in ["resnet50_train.csv.gz", "gpt2_train_varlen.csv.gz"] {
        let trace = load(file);
        for (label, measure_latency) in [("", true), ("/no_latency", false)] {
            let opts = ReplayOptions {
                measure_latency,
                ..ReplayOptions::default()
            };
            group.bench_function(format!("{}{label}", trace.name), |b| {
                b.iter_batched(
                    || direct(MockBackend::shared()),
                    |alloc| replay(&trace, &alloc, &opts),
                    BatchSize::PerIteration,
                )
            });
        }
    }
    group.finish();
}

fn bench_read(c: &mut Criterion) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../traces/gpt2_train_varlen.csv.gz");
    let mut group = c.benchmark_group("read");
    group.sample_size(20);
    group.bench_function("gpt2_train_varlen", |b| {
        b.iter(|| read_trace(&path).unwrap())
    });
    group.finish();
}

#[allow(missing_docs)]
mod group {
    criterion::criterion_group!(benches, super::bench_replay, super::bench_read);
}
use group::benches;
criterion_main!(benches);
