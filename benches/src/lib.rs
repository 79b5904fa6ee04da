//! Workloads shared by the cross-strategy benchmarks in `benches/`.
#![warn(missing_docs)]

use devpool_core::{Allocator, Block, Rng};

/// The RMM-style random loop: up to `max_live` live blocks, sizes log-uniform in
/// `[lo, hi]`, each step allocates or frees a random live block with equal odds.
pub struct RandomLoop {
    rng: Rng,
    sizes: Vec<usize>,
    live: Vec<Block>,
    max_live: usize,
}

impl RandomLoop {
    /// A loop with its own seeded generator.
    pub fn new(seed: u64, lo: usize, hi: usize, max_live: usize) -> Self {
        let mut rng = Rng::new(seed);
        let sizes = (0..4096).map(|_| rng.log_uniform(lo, hi)).collect();
        RandomLoop {
            rng,
            sizes,
            live: Vec::with_capacity(max_live),
            max_live,
        }
    }

    /// One step.
    #[inline]
    pub fn step(&mut self, alloc: &dyn Allocator) {
        let r = self.rng.next_u64();
        if self.live.is_empty() || (self.live.len() < self.max_live && r & 1 == 0) {
            if let Ok(b) = alloc.alloc(self.sizes[(r >> 8) as usize & 4095]) {
                self.live.push(b);
            }
        } else {
            let i = ((r >> 1) % self.live.len() as u64) as usize;
            let b = self.live.swap_remove(i);
            let _ = alloc.free(b);
        }
    }

    /// Free every live block.
    pub fn finish(&mut self, alloc: &dyn Allocator) {
        for b in self.live.drain(..) {
            let _ = alloc.free(b);
        }
    }
}
