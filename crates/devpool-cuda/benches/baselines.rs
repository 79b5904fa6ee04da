//! The driver's own allocators on a real GPU (device 0), as the published anchors
//! measure them: allocate+free pairs of 4 KiB, 1 MiB and 64 MiB, and the RMM-style
//! random loop (up to 1000 live blocks, sizes log-uniform in 256 B..16 MiB, allocate
//! or free a random live block with equal odds). Without a CUDA device it says why
//! and measures nothing.

use criterion::{BenchmarkId, Criterion};
use devpool_core::{Allocator, Block};
use devpool_cuda::{cuda_malloc, CudaBackend, CudaMallocAsync};
use devpool_testing::conformance::Rng;
use std::time::{Duration, Instant};

fn pairs(c: &mut Criterion, allocs: &[Box<dyn Allocator>]) {
    let mut g = c.benchmark_group("pair");
    for a in allocs {
        for (label, size) in [
            ("4KiB", 4usize << 10),
            ("1MiB", 1 << 20),
            ("64MiB", 64 << 20),
        ] {
            g.bench_with_input(BenchmarkId::new(a.name(), label), &size, |b, &s| {
                b.iter(|| {
                    let blk = a.alloc(s).expect("alloc");
                    a.free(blk).expect("free");
                })
            });
        }
    }
    g.finish();
}

fn random_ops(c: &mut Criterion, allocs: &[Box<dyn Allocator>]) {
    let mut g = c.benchmark_group("random_op");
    for a in allocs {
        g.bench_function(a.name(), |b| {
            b.iter_custom(|iters| {
                let mut rng = Rng::new(iters);
                let mut live: Vec<Block> = Vec::with_capacity(1000);
                let start = Instant::now();
                for _ in 0..iters {
                    if live.is_empty() || (live.len() < 1000 && rng.below(2) == 0) {
                        live.push(a.alloc(rng.log_uniform(256, 16 << 20)).expect("alloc"));
                    } else {
                        let i = rng.below(live.len() as u64) as usize;
                        a.free(live.swap_remove(i)).expect("free");
                    }
                }
                let took = start.elapsed();
                for blk in live {
                    a.free(blk).expect("free");
                }
                took
            })
        });
    }
    g.finish();
}

fn main() {
    let gpu = match CudaBackend::new(0) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("baselines: nothing measured: {e}");
            return;
        }
    };
    let mut allocs: Vec<Box<dyn Allocator>> = vec![Box::new(cuda_malloc(gpu.clone()))];
    match CudaMallocAsync::new(gpu) {
        Ok(a) => allocs.push(Box::new(a)),
        Err(e) => eprintln!("baselines: no cuda-malloc-async: {e}"),
    }
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20)
        .configure_from_args();
    pairs(&mut c, &allocs);
    random_ops(&mut c, &allocs);
    c.final_summary();
}
