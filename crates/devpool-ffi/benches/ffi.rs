//! The cost of the C ABI over the allocator it wraps, on the mock backend with the
//! hybrid strategy:
//!
//! - `pair/{ffi,rust}/*`: one allocation and its free, same size, warm: through
//!   `devpool_malloc` / `devpool_free` (device lookup, panic guard, pointer table),
//!   and through the same allocator called from Rust.
//! - `random/{ffi,rust}`: the RMM-style loop: up to 1000 live blocks, sizes
//!   log-uniform from 256 B to 16 MiB, each step allocates or frees a random live
//!   block with equal odds; time per step.
//! - `pair-threads/ffi/N`: 64 KiB pairs from N threads at once, each on its own
//!   stream; time per pair of all threads together.
//! - `live/{ffi,rust}/N`: N blocks of 256 B to 64 KiB stay live while each step
//!   frees a random one and allocates another in its place; time per operation (a
//!   free or an allocation), N from 10^3 to 10^6: does a call cost more when many
//!   blocks are live? Through the C ABI the table from pointer to block is on the
//!   path.
use criterion::{BenchmarkId, Criterion};
use devpool_core::{Allocator, Request, Rng};
use devpool_ffi::{devpool_configure, devpool_free, devpool_malloc, CudaStream, DEVPOOL_OK};
use devpool_testing::MockBackend;
use std::ffi::c_void;
use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const MAX_LIVE: usize = 1000;
const TABLE: usize = 1 << 16;

fn stream(s: u64) -> CudaStream {
    std::ptr::without_provenance_mut(s as usize)
}

/// Pre-drawn sizes and coins of the random loop.
struct Draws {
    sizes: Vec<usize>,
    coins: Vec<u32>,
}

impl Draws {
    fn new(seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        Draws {
            sizes: (0..TABLE).map(|_| rng.log_uniform(256, 16 << 20)).collect(),
            coins: (0..TABLE).map(|_| rng.next_u64() as u32).collect(),
        }
    }

    /// Whether step `i` allocates (else it frees live block number `pick`).
    #[inline]
    fn step(&self, i: usize, live: usize) -> (bool, usize) {
        let coin = self.coins[i];
        let alloc = live == 0 || (live < MAX_LIVE && coin & 1 == 0);
        (alloc, (((coin >> 1) as u64 * live as u64) >> 31) as usize)
    }
}

fn bench(c: &mut Criterion) {
    // SAFETY: a NUL-terminated literal.
    let rc = unsafe { devpool_configure(c"backend=mock;strategy=hybrid;log=off".as_ptr()) };
    assert_eq!(rc, DEVPOOL_OK);
    let rust = devpool::StrategySpec::default().build(MockBackend::shared());
    let null = stream(0);

    let mut g = c.benchmark_group("pair");
    for (label, size) in [("4KiB", 4096usize), ("1MiB", 1 << 20), ("64MiB", 64 << 20)] {
        g.bench_function(BenchmarkId::new("ffi", label), |b| {
            b.iter(|| {
                let p = devpool_malloc(black_box(size), 0, null);
                devpool_free(p, size, 0, null);
            })
        });
        g.bench_function(BenchmarkId::new("rust", label), |b| {
            b.iter(|| {
                let blk = rust.allocate(Request::new(black_box(size))).unwrap();
                rust.free(blk).unwrap();
            })
        });
    }
    g.finish();

    let draws = Draws::new(42);
    let mut g = c.benchmark_group("random");
    g.bench_function("ffi", |b| {
        let mut live: Vec<(*mut c_void, usize)> = Vec::with_capacity(MAX_LIVE);
        let mut at = 0;
        b.iter(|| {
            let i = at;
            at = (at + 1) & (TABLE - 1);
            match draws.step(i, live.len()) {
                (true, _) => {
                    let size = draws.sizes[i];
                    live.push((devpool_malloc(size, 0, null), size));
                }
                (false, pick) => {
                    let (p, size) = live.swap_remove(pick);
                    devpool_free(p, size, 0, null);
                }
            }
        });
        for (p, size) in live.drain(..) {
            devpool_free(p, size, 0, null);
        }
    });
    g.bench_function("rust", |b| {
        let mut live = Vec::with_capacity(MAX_LIVE);
        let mut at = 0;
        b.iter(|| {
            let i = at;
            at = (at + 1) & (TABLE - 1);
            match draws.step(i, live.len()) {
                (true, _) => live.push(rust.allocate(Request::new(draws.sizes[i])).unwrap()),
                (false, pick) => rust.free(live.swap_remove(pick)).unwrap(),
            }
        });
        for blk in live.drain(..) {
            rust.free(blk).unwrap();
        }
    });
    g.finish();

    let mut g = c.benchmark_group("pair-threads");
    g.measurement_time(Duration::from_secs(3));
    for threads in [1u64, 2, 4] {
        g.bench_function(BenchmarkId::new("ffi", threads), |b| {
            b.iter_custom(|iters| {
                let barrier = Arc::new(Barrier::new(threads as usize + 1));
                let handles: Vec<_> = (0..threads)
                    .map(|t| {
                        let barrier = barrier.clone();
                        std::thread::spawn(move || {
                            let s = stream(0x100 + t);
                            // Warm this thread's stream pool.
                            let p = devpool_malloc(64 << 10, 1, s);
                            devpool_free(p, 64 << 10, 1, s);
                            barrier.wait();
                            for _ in 0..iters.div_ceil(threads) {
                                let p = devpool_malloc(black_box(64 << 10), 1, s);
                                devpool_free(p, 64 << 10, 1, s);
                            }
                        })
                    })
                    .collect();
                barrier.wait();
                let t0 = Instant::now();
                for h in handles {
                    h.join().unwrap();
                }
                t0.elapsed()
            })
        });
    }
    g.finish();
}

/// N live blocks, refilled in place: each step frees a random one and allocates
/// another, through `ffi` (true) or from Rust.
struct Live {
    ffi: bool,
    device: i32,
    rust: Box<dyn Allocator>,
    ptrs: Vec<(*mut c_void, usize)>,
    blocks: Vec<devpool_core::Block>,
    sizes: Vec<usize>,
    rng: Rng,
}

impl Live {
    fn new(ffi: bool, device: i32, n: usize) -> Self {
        let mut rng = Rng::new(n as u64);
        let sizes = (0..TABLE).map(|_| rng.log_uniform(256, 64 << 10)).collect();
        let mut l = Live {
            ffi,
            device,
            rust: devpool::StrategySpec::default().build(MockBackend::shared()),
            ptrs: Vec::new(),
            blocks: Vec::new(),
            sizes,
            rng,
        };
        for _ in 0..n {
            let size = l.size();
            if ffi {
                l.ptrs.push((devpool_malloc(size, device, stream(0)), size));
            } else {
                l.blocks.push(l.rust.alloc(size).unwrap());
            }
        }
        l
    }

    #[inline]
    fn size(&mut self) -> usize {
        self.sizes[self.rng.next_u64() as usize & (TABLE - 1)]
    }

    #[inline]
    fn step(&mut self) {
        let r = self.rng.next_u64();
        let n = if self.ffi {
            self.ptrs.len()
        } else {
            self.blocks.len()
        };
        let i = (((r >> 32) * n as u64) >> 32) as usize;
        let size = self.sizes[r as usize & (TABLE - 1)];
        if self.ffi {
            let (p, s) = self.ptrs[i];
            devpool_free(p, s, self.device, stream(0));
            self.ptrs[i] = (devpool_malloc(size, self.device, stream(0)), size);
        } else {
            self.rust.free(self.blocks[i]).unwrap();
            self.blocks[i] = self.rust.alloc(size).unwrap();
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        for (p, s) in self.ptrs.drain(..) {
            devpool_free(p, s, self.device, stream(0));
        }
        for b in self.blocks.drain(..) {
            self.rust.free(b).unwrap();
        }
    }
}

fn live(c: &mut Criterion) {
    let mut g = c.benchmark_group("live");
    g.sample_size(10);
    for n in [1_000usize, 10_000, 100_000, 1_000_000] {
        for ffi in [true, false] {
            // A device of its own per run: the C ABI's allocators live as long as
            // the process.
            let device = 2 + n.ilog10() as i32;
            let mut l = Live::new(ffi, device, n);
            let name = if ffi { "ffi" } else { "rust" };
            g.bench_function(BenchmarkId::new(name, n), |b| {
                // Two operations per step: report per operation.
                b.iter_custom(|iters| {
                    let t0 = Instant::now();
                    for _ in 0..iters.div_ceil(2) {
                        l.step();
                    }
                    t0.elapsed()
                })
            });
        }
    }
    g.finish();
}

fn main() {
    let mut c = Criterion::default()
        .configure_from_args()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    bench(&mut c);
    live(&mut c);
    c.final_summary();
}
