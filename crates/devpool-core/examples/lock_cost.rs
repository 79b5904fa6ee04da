//! What one uncontended lock round trip costs on this machine's processor: the
//! slab's thread cache takes its lock once per allocation and once per free (an
//! atomic swap, then a plain store to give it back), so a pair pays two.
//!
//! ```sh
//! cargo run --release -p devpool-core --example lock_cost
//! ```
//!
//! Each figure is the best of 30 batches of 1 000 000 steps (a busy machine slows
//! some batches, never speeds one up). A step does the same small work, a few
//! dependent loads and stores, in each variant: without a lock, under
//! [`SpinLock`], and next to an atomic add, so the differences are the lock's and
//! the atomic's own cost, with the stalls they put on the work around them.

use devpool_core::SpinLock;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The work of a step: bump two counters and a slot of a small table, as a
/// pool's bookkeeping does.
#[inline(always)]
fn work(s: &mut [u64; 8], i: u64) {
    s[0] += 1;
    s[1] += i;
    let j = (s[0] & 3) as usize + 2;
    s[j] ^= i;
}

fn best(mut step: impl FnMut(u64)) -> f64 {
    const STEPS: u64 = 1_000_000;
    for i in 0..STEPS {
        step(i);
    }
    let mut best = f64::MAX;
    for _ in 0..30 {
        let t = Instant::now();
        for i in 0..STEPS {
            step(black_box(i));
        }
        best = best.min(t.elapsed().as_nanos() as f64 / STEPS as f64);
    }
    best
}

fn main() {
    let mut plain = [0u64; 8];
    let base = best(|i| work(black_box(&mut plain), i));
    let locked = SpinLock::new([0u64; 8]);
    let with_lock = best(|i| {
        let mut g = black_box(&locked).try_lock().expect("uncontended");
        work(&mut g, i);
    });
    let counter = AtomicU64::new(0);
    let mut beside = [0u64; 8];
    let with_atomic = best(|i| {
        black_box(&counter).fetch_add(1, Ordering::Relaxed);
        work(black_box(&mut beside), i);
    });
    println!("ns per step            ");
    println!("work alone           {base:>6.2}");
    println!(
        "work under SpinLock  {with_lock:>6.2}  (lock round trip {:.2})",
        with_lock - base
    );
    println!(
        "work + atomic add    {with_atomic:>6.2}  (atomic add {:.2})",
        with_atomic - base
    );
    black_box((plain, beside, counter.load(Ordering::Relaxed)));
}
