//! Latency of strategies side by side on a busy machine: the best of many short
//! batches, interleaved, so that every strategy meets the same noise. Workloads: an
//! allocate-free pair of 4 KiB and of 1 MiB, and a step of the FIFO stream of
//! `devpool bench` (256 blocks live, sizes log-uniform in [256 KiB, 8 MiB], each step
//! one allocation and a free of the oldest).
//!
//! ```sh
//! cargo run --release -p devpool --example fifo_latency -- [STRATEGY,...]
//! ```
use devpool::core::Rng;
use devpool::{Allocator, Block, MockBackend, Request, StrategySpec};
use std::collections::VecDeque;
use std::time::Instant;

const BATCH: usize = 20_000;
const ROUNDS: usize = 30;

fn pair(a: &dyn Allocator, size: usize, failures: &mut u64) -> f64 {
    let req = Request::new(size);
    let t = Instant::now();
    for _ in 0..BATCH {
        match a.allocate(req) {
            Ok(b) => a.free(b).expect("free of a block just allocated"),
            Err(_) => *failures += 1,
        }
    }
    t.elapsed().as_nanos() as f64 / BATCH as f64
}

struct Fifo {
    sizes: Vec<usize>,
    live: VecDeque<Block>,
    i: usize,
    failures: u64,
}

impl Fifo {
    fn new() -> Self {
        let mut rng = Rng::new(7);
        let sizes = (0..4096)
            .map(|_| rng.log_uniform(256 << 10, 8 << 20))
            .collect();
        Fifo {
            sizes,
            live: VecDeque::new(),
            i: 0,
            failures: 0,
        }
    }

    fn steps(&mut self, a: &dyn Allocator, n: usize) -> f64 {
        let t = Instant::now();
        for _ in 0..n {
            match a.alloc(self.sizes[self.i % self.sizes.len()]) {
                Ok(b) => self.live.push_back(b),
                Err(_) => self.failures += 1,
            }
            self.i += 1;
            if self.live.len() > 256 {
                a.free(self.live.pop_front().unwrap()).expect("free");
            }
        }
        t.elapsed().as_nanos() as f64 / n as f64
    }
}

fn main() {
    let names: Vec<String> = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "slab,tlsf-virtual,ring,hybrid".into())
        .split(',')
        .map(String::from)
        .collect();
    let allocs: Vec<Box<dyn Allocator>> = names
        .iter()
        .map(|n| {
            let spec: StrategySpec = n.parse().unwrap_or_else(|e| {
                eprintln!("{e}");
                std::process::exit(2)
            });
            spec.build(MockBackend::shared())
        })
        .collect();
    let mut fifos: Vec<Fifo> = names.iter().map(|_| Fifo::new()).collect();
    for (a, f) in allocs.iter().zip(&mut fifos) {
        f.steps(&**a, 4096 + 256); // warm: once through the sizes
    }
    let mut best = vec![[f64::MAX; 3]; names.len()];
    for _ in 0..ROUNDS {
        for (i, a) in allocs.iter().enumerate() {
            let f = &mut fifos[i];
            let got = [
                pair(&**a, 4 << 10, &mut f.failures),
                pair(&**a, 1 << 20, &mut f.failures),
                f.steps(&**a, BATCH),
            ];
            for (b, g) in best[i].iter_mut().zip(got) {
                *b = b.min(g);
            }
        }
    }
    println!(
        "best of {ROUNDS} batches of {BATCH}, ns per pair or step\n{:<16} {:>12} {:>12} {:>12}",
        "strategy", "pair 4 KiB", "pair 1 MiB", "fifo step"
    );
    for ((n, b), f) in names.iter().zip(&best).zip(&fifos) {
        let mark = if f.failures > 0 { "*" } else { "" };
        println!(
            "{n:<16} {:>12.1} {:>12.1} {:>11.1}{mark:1}",
            b[0], b[1], b[2]
        );
    }
    println!("(* some allocations failed)");
}
