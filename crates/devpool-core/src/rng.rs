//! A small deterministic random generator for tests, benchmarks and workloads.

/// A small deterministic random generator (SplitMix64) for tests, benchmarks and synthetic workloads.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n`; 0 when `n` is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
    /// Log-uniform in `[lo, hi]` (`lo` raised to 1, `hi` to `lo`).
    pub fn log_uniform(&mut self, lo: usize, hi: usize) -> usize {
        let lo = lo.max(1);
        let hi = hi.max(lo);
        let (a, b) = ((lo as f64).ln(), (hi as f64).ln());
        let u = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        ((a + (b - a) * u).exp() as usize).clamp(lo, hi)
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn log_uniform_stays_in_range_and_spreads() {
        let mut r = Rng::new(5);
        let v: Vec<usize> = (0..10_000).map(|_| r.log_uniform(1, 1 << 23)).collect();
        assert!(v.iter().all(|&x| (1..=1 << 23).contains(&x)));
        // Log-uniform: about as many below 2^11.5 as above.
        let small = v.iter().filter(|&&x| x < 2896).count();
        assert!((4000..6000).contains(&small), "{small} of 10000 small");
        assert_eq!(r.below(0), 0);
        assert_eq!(r.log_uniform(9, 3), 9, "an empty range gives its low end");
    }
}
