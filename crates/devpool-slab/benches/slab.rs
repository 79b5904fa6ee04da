//! Slab allocator benchmarks on the mock backend, through `slab()` (stream-ordered
//! wrapper included) unless the name says `pool`:
//!
//! - `pair/*`: one allocation and its free, same size, warm.
//! - `pair-threads/*`: the same with 2 threads at once; the time is per pair of all
//!   threads together (wall time over total pairs).
//! - `random/*`: the RMM-style loop: up to 1000 live blocks, sizes log-uniform from
//!   256 B to 1 MiB, each step allocates or frees a random live block with equal
//!   odds; time per step (of all threads together with 2 threads).
//!
//! Before the benchmarks it prints the host metadata per live block of the warm
//! random loop.
use criterion::{BenchmarkId, Criterion};
use devpool_core::{Allocator, Block, Pool, Request, Rng, StreamId};
use devpool_slab::{fixed, slab, SlabConfig, SlabPool};
use devpool_testing::MockBackend;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const MAX_LIVE: usize = 1000;
const TABLE: usize = 1 << 16;

/// One thread's random loop: its live blocks and pre-drawn random numbers.
struct Loop {
    live: Vec<Block>,
    sizes: Vec<usize>,
    coins: Vec<u32>,
    at: usize,
    stream: StreamId,
}

impl Loop {
    fn new(seed: u64, stream: StreamId) -> Self {
        let mut rng = Rng::new(seed);
        Loop {
            live: Vec::with_capacity(MAX_LIVE),
            sizes: (0..TABLE).map(|_| rng.log_uniform(256, 1 << 20)).collect(),
            coins: (0..TABLE).map(|_| rng.next_u64() as u32).collect(),
            at: 0,
            stream,
        }
    }

    #[inline]
    fn step(&mut self, a: &dyn Allocator) {
        let i = self.at;
        self.at = (i + 1) & (TABLE - 1);
        let coin = self.coins[i];
        let n = self.live.len();
        if n == 0 || (n < MAX_LIVE && coin & 1 == 0) {
            let req = Request::new(self.sizes[i]).on_stream(self.stream);
            self.live.push(a.allocate(req).expect("alloc"));
        } else {
            let pick = (((coin >> 1) as u64 * n as u64) >> 31) as usize;
            let b = self.live.swap_remove(pick);
            a.free(b).expect("free");
        }
    }

    fn drain(&mut self, a: &dyn Allocator) {
        for b in self.live.drain(..) {
            a.free(b).expect("free");
        }
    }
}

fn pairs(c: &mut Criterion) {
    let mut g = c.benchmark_group("pair");
    for size in [256usize, 4096, 65536, 1 << 20] {
        let a = slab(MockBackend::shared(), SlabConfig::default());
        let warm = a.alloc(size).unwrap();
        a.free(warm).unwrap();
        g.bench_with_input(BenchmarkId::new("slab", size), &size, |b, &s| {
            b.iter(|| {
                let x = a.alloc(black_box(s)).unwrap();
                a.free(x).unwrap();
            })
        });
    }
    let a = fixed(MockBackend::shared(), 4096);
    g.bench_function("fixed/4096", |b| {
        b.iter(|| {
            let x = a.alloc(black_box(4096)).unwrap();
            a.free(x).unwrap();
        })
    });
    let pool = SlabPool::new(MockBackend::shared(), SlabConfig::default());
    g.bench_function("pool/4096", |b| {
        b.iter(|| {
            let x = pool.allocate(&Request::new(black_box(4096))).unwrap();
            pool.deallocate(&x).unwrap();
        })
    });
    g.finish();
}

/// Worker threads that live through a whole benchmark, each with its own state,
/// so every sample runs on the same threads (and thread caches).
struct Crew {
    start: Arc<Barrier>,
    done: Arc<Barrier>,
    each: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Crew {
    /// One thread per state; `work(state, n)` runs n steps, `finish` cleans up.
    fn new<S: Send + 'static>(
        states: Vec<S>,
        work: impl Fn(&mut S, u64) + Send + Sync + 'static,
        finish: impl Fn(&mut S) + Send + Sync + 'static,
    ) -> Crew {
        let n = states.len();
        let (start, done) = (Arc::new(Barrier::new(n + 1)), Arc::new(Barrier::new(n + 1)));
        let each = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (work, finish) = (Arc::new(work), Arc::new(finish));
        let threads = states
            .into_iter()
            .map(|mut st| {
                let (start, done, each, stop) =
                    (start.clone(), done.clone(), each.clone(), stop.clone());
                let (work, finish) = (work.clone(), finish.clone());
                std::thread::spawn(move || loop {
                    start.wait();
                    if stop.load(Ordering::Acquire) {
                        finish(&mut st);
                        return;
                    }
                    work(&mut st, each.load(Ordering::Acquire));
                    done.wait();
                })
            })
            .collect();
        Crew {
            start,
            done,
            each,
            stop,
            threads,
        }
    }

    /// Wall time for `iters` steps shared among the threads.
    fn run(&self, iters: u64) -> Duration {
        self.each
            .store(iters.div_ceil(self.threads.len() as u64), Ordering::Release);
        let t = Instant::now();
        self.start.wait();
        self.done.wait();
        t.elapsed()
    }
}

impl Drop for Crew {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.start.wait();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn pair_threads(c: &mut Criterion) {
    let mut g = c.benchmark_group("pair-threads");
    for (name, streams) in [
        ("2-threads-1-stream", [0u64, 0]),
        ("2-threads-2-streams", [1, 2]),
    ] {
        let a = Arc::new(slab(MockBackend::shared(), SlabConfig::default()));
        let a2 = a.clone();
        let crew = Crew::new(
            streams
                .iter()
                .map(|&s| devpool_testing::MockBackend::stream(s))
                .collect(),
            move |&mut s, k| {
                for _ in 0..k {
                    let x = a2
                        .allocate(Request::new(black_box(65536)).on_stream(s))
                        .unwrap();
                    a2.free(x).unwrap();
                }
            },
            |_| {},
        );
        g.bench_function(BenchmarkId::new(name, 65536), |b| {
            b.iter_custom(|iters| crew.run(iters))
        });
    }
    g.finish();
}

fn random(c: &mut Criterion) {
    let mut g = c.benchmark_group("random");
    let a = slab(MockBackend::shared(), SlabConfig::default());
    let mut l = Loop::new(1, StreamId::DEFAULT);
    for _ in 0..200_000 {
        l.step(&a);
    }
    g.bench_function("1-thread", |b| b.iter(|| l.step(&a)));
    l.drain(&a);
    for (name, streams) in [
        ("2-threads-1-stream", [0u64, 0]),
        ("2-threads-2-streams", [1, 2]),
    ] {
        let a = Arc::new(slab(MockBackend::shared(), SlabConfig::default()));
        let (a2, a3) = (a.clone(), a.clone());
        let loops = streams
            .iter()
            .enumerate()
            .map(|(i, &s)| Loop::new(i as u64 + 1, devpool_testing::MockBackend::stream(s)))
            .collect();
        let crew = Crew::new(
            loops,
            move |l: &mut Loop, k| {
                for _ in 0..k {
                    l.step(&*a2);
                }
            },
            move |l| l.drain(&*a3),
        );
        crew.run(400_000);
        g.bench_function(name, |b| b.iter_custom(|iters| crew.run(iters)));
    }
    g.finish();
}

/// Host metadata per live block in the warm single-thread random loop.
fn metadata_figure() {
    let a = slab(MockBackend::shared(), SlabConfig::default());
    let mut l = Loop::new(1, StreamId::DEFAULT);
    let mut worst: f64 = 0.0;
    let mut sum = 0.0;
    let samples = 100;
    for _ in 0..samples {
        for _ in 0..20_000 {
            l.step(&a);
        }
        let pool = a.pool(StreamId::DEFAULT).expect("pool");
        let per = pool.metadata_bytes() as f64 / l.live.len().max(1) as f64;
        worst = worst.max(per);
        sum += per;
    }
    let s = a.stats();
    println!(
        "host metadata per live block, random loop (~{} live, {} slabs' worth reserved): mean {:.1} B, worst {:.1} B",
        l.live.len(),
        devpool_core::human_bytes(s.reserved_bytes.current),
        sum / samples as f64,
        worst
    );
    l.drain(&a);
}

fn main() {
    metadata_figure();
    let mut c = Criterion::default().configure_from_args();
    pairs(&mut c);
    pair_threads(&mut c);
    random(&mut c);
    c.final_summary();
}
