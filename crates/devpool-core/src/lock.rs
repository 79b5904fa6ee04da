//! [`SpinLock`]: the one spin lock of the strategies (a slab's thread caches, a buddy
//! pool). Taking it is one atomic swap and giving it back one plain store, where a
//! parking mutex pays a second atomic operation to give it back (about 9 ns on the
//! development machine, a tenth of an allocate-and-free pair). It suits locks that
//! are rarely contended: a slab's cache is taken on the hot path by its own thread
//! only, a buddy pool serves one stream. A waiter spins, then yields its time slice.

#[cfg(not(loom))]
use crossbeam_utils::Backoff;
#[cfg(loom)]
use loom::sync::atomic::{AtomicBool, Ordering};
use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicBool, Ordering};

/// Set `flag` if it was clear (with Acquire); whether it was.
#[inline]
fn take(flag: &AtomicBool) -> bool {
    #[cfg(not(any(loom, devpool_unlocked)))]
    let taken = !flag.swap(true, Ordering::Acquire);
    // The loom model spells it as the compare-exchange it is equivalent to on a flag:
    // loom mis-orders a swap against a concurrent store (tokio-rs/loom#254).
    #[cfg(loom)]
    let taken = flag
        .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_ok();
    // A build for measurement only (`RUSTFLAGS="--cfg devpool_unlocked"`): a plain
    // load and store instead of the atomic swap, to time what the swap costs on a
    // processor (docs/BENCHMARKS.md). Not a lock between threads: never ship it.
    #[cfg(all(devpool_unlocked, not(loom)))]
    let taken = !flag.load(Ordering::Relaxed) && {
        flag.store(true, Ordering::Relaxed);
        true
    };
    taken
}

/// A lock around a `T`.
///
/// ```
/// use devpool_core::SpinLock;
/// let lock = SpinLock::new(1);
/// *lock.lock() += 1;
/// let held = lock.lock();
/// assert!(lock.try_lock().is_none());
/// assert_eq!(*held, 2);
/// ```
#[derive(Debug, Default)]
pub struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the lock gives access to `value` to one thread at a time (the `locked` flag
// is taken with Acquire and given back with Release), so sharing it between threads
// is sound whenever `T` may move between threads.
unsafe impl<T: Send> Sync for SpinLock<T> {}

/// Access to the value while the lock is held; gives the lock back when dropped.
pub struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> SpinLock<T> {
    /// A free lock around `value`.
    pub fn new(value: T) -> Self {
        SpinLock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Take the lock if it is free.
    #[inline]
    pub fn try_lock(&self) -> Option<SpinGuard<'_, T>> {
        take(&self.locked).then(|| SpinGuard { lock: self })
    }

    /// Take the lock, waiting for it.
    #[inline]
    pub fn lock(&self) -> SpinGuard<'_, T> {
        match self.try_lock() {
            Some(g) => g,
            None => self.lock_slow(),
        }
    }

    #[cold]
    fn lock_slow(&self) -> SpinGuard<'_, T> {
        #[cfg(not(loom))]
        let backoff = Backoff::new();
        loop {
            while self.locked.load(Ordering::Relaxed) {
                // Under the loom model, waiting lets the model run the holder.
                #[cfg(loom)]
                loom::thread::yield_now();
                #[cfg(not(loom))]
                backoff.snooze();
            }
            if let Some(g) = self.try_lock() {
                return g;
            }
        }
    }

    /// The value, through exclusive access to the lock.
    pub fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while this thread holds the lock, so no other
        // reference to the value exists.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this the only use of the guard.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.lock.locked.store(false, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn excludes_other_threads() {
        let lock = Arc::new(SpinLock::<u64>::default());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let lock = lock.clone();
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        let mut g = lock.lock();
                        // A read-modify-write that loses counts if two threads overlap.
                        let v = *g;
                        std::hint::black_box(&v);
                        *g = v + 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*lock.lock(), 80_000);
        let g = lock.try_lock().expect("free");
        assert!(lock.try_lock().is_none(), "held");
        drop(g);
    }
}

/// Model test with loom: `RUSTFLAGS="--cfg loom" cargo test -p devpool-core --lib --release loom`.
/// The lock's flag is loom's atomic and the value a loom cell, so the model checks,
/// under every interleaving, that no two threads touch the value at once (a missing
/// Acquire or Release shows up as a data race on the cell) and that no increment is
/// lost.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::cell::UnsafeCell as Cell;
    use loom::sync::Arc;
    use loom::thread;

    fn add_one(lock: &SpinLock<Cell<u64>>, wait: bool) -> bool {
        let guard = if wait {
            lock.lock()
        } else {
            match lock.try_lock() {
                Some(g) => g,
                None => return false,
            }
        };
        // SAFETY: the guard holds the lock; loom reports a race if it does not exclude.
        guard.with_mut(|v| unsafe { *v += 1 });
        true
    }

    /// Runs `f` under every interleaving loom finds within a preemption bound of 3
    /// (the spinning of a waiter makes an unbounded search endless).
    fn model(f: impl Fn() + Sync + Send + 'static) {
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(3);
        b.check(f);
    }

    #[test]
    fn lock_excludes_and_loses_nothing() {
        model(|| {
            let lock = Arc::new(SpinLock::new(Cell::new(0u64)));
            let other = {
                let lock = lock.clone();
                thread::spawn(move || add_one(&lock, true))
            };
            let mine = add_one(&lock, true);
            assert!(mine && other.join().unwrap());
            // SAFETY: read under the lock.
            let total = lock.lock().with(|v| unsafe { *v });
            assert_eq!(total, 2, "both increments are kept");
            assert!(lock.try_lock().is_some(), "the lock is free at the end");
        });
    }

    #[test]
    fn try_lock_never_shares() {
        model(|| {
            let lock = Arc::new(SpinLock::new(Cell::new(0u64)));
            let other = {
                let lock = lock.clone();
                thread::spawn(move || add_one(&lock, false))
            };
            let mine = add_one(&lock, false) as u64;
            let theirs = other.join().unwrap() as u64;
            // SAFETY: read under the lock.
            let total = lock.lock().with(|v| unsafe { *v });
            assert_eq!(total, mine + theirs);
            assert!(
                mine + theirs >= 1,
                "one of two attempts on a free lock succeeds"
            );
        });
    }
}
