//! [`Lock`]: the pool's lock. One atomic swap to take it and a plain store to give it
//! back, where a parking mutex pays a second atomic operation to give it back (about
//! 9 ns on the development machine, a tenth of an allocate-and-free pair).
//!
//! A pool serves one stream, so its lock is rarely contended; a waiter spins briefly,
//! then yields its time slice until the lock is free.

#[cfg(loom)]
use loom::sync::atomic::{AtomicBool, Ordering};
use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicBool, Ordering};

/// Spins before a waiter starts yielding.
const SPINS: u32 = 64;

/// Set `flag` if it was clear (with Acquire); whether it was.
#[inline]
fn take(flag: &AtomicBool) -> bool {
    #[cfg(not(loom))]
    let taken = !flag.swap(true, Ordering::Acquire);
    // The loom model spells it as the compare-exchange it is equivalent to on a flag:
    // loom mis-orders a swap against a concurrent store (tokio-rs/loom#254).
    #[cfg(loom)]
    let taken = flag
        .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_ok();
    taken
}

/// A lock around a `T`.
pub(crate) struct Lock<T> {
    held: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the lock gives access to the value to one thread at a time (the guard holds
// `held`, taken with Acquire and given back with Release), so sharing the lock between
// threads is sound whenever the value itself may move between them.
unsafe impl<T: Send> Sync for Lock<T> {}

impl<T> Lock<T> {
    /// A free lock around `value`.
    pub fn new(value: T) -> Self {
        Lock {
            held: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Take the lock, waiting for it if needed.
    #[inline]
    pub fn lock(&self) -> Guard<'_, T> {
        if !take(&self.held) {
            self.wait();
        }
        Guard { lock: self }
    }

    #[cold]
    fn wait(&self) {
        #[cfg(not(loom))]
        let mut spins = 0;
        loop {
            while self.held.load(Ordering::Relaxed) {
                // Under the loom model, waiting lets the model run the holder.
                #[cfg(loom)]
                loom::thread::yield_now();
                #[cfg(not(loom))]
                if spins < SPINS {
                    spins += 1;
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
            if take(&self.held) {
                return;
            }
        }
    }

    /// The value, through an exclusive borrow of the lock (no locking needed).
    pub fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }
}

/// The lock, held; gives it back when dropped.
pub(crate) struct Guard<'a, T> {
    lock: &'a Lock<T>,
}

impl<T> Deref for Guard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock, so no other reference to the value exists
        // until it is dropped.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for Guard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: this guard holds the lock, and `&mut self` makes this borrow the only
        // one through it.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for Guard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.lock.held.store(false, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn threads_take_turns() {
        let lock = Arc::new(Lock::new(0u64));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let lock = lock.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        let mut g = lock.lock();
                        let v = *g;
                        std::hint::black_box(&v);
                        *g = v + 1;
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(*lock.lock(), 80_000);
    }
}

/// Model test with loom: `RUSTFLAGS="--cfg loom" cargo test -p devpool-buddy --lib --release loom`.
/// The flag is loom's atomic and the value a loom cell, so the model checks, under
/// every interleaving (within a preemption bound: a waiter's spinning makes an
/// unbounded search endless), that no two threads touch the value at once and that
/// no increment is lost.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::cell::UnsafeCell as Cell;
    use loom::sync::Arc;
    use loom::thread;

    fn add_one(lock: &Lock<Cell<u64>>) {
        let guard = lock.lock();
        // SAFETY: the guard holds the lock; loom reports a race if it does not exclude.
        guard.with_mut(|v| unsafe { *v += 1 });
    }

    #[test]
    fn lock_excludes_and_loses_nothing() {
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(3);
        b.check(|| {
            let lock = Arc::new(Lock::new(Cell::new(0u64)));
            let other = {
                let lock = lock.clone();
                thread::spawn(move || add_one(&lock))
            };
            add_one(&lock);
            other.join().unwrap();
            // SAFETY: read under the lock.
            let total = lock.lock().with(|v| unsafe { *v });
            assert_eq!(total, 2, "both increments are kept");
        });
    }
}
