//! [`SpinLock`]: the lock of a thread cache. Taking it is one atomic swap and giving
//! it back one plain store, about half the cost of a general mutex. Only its own
//! thread takes a cache's lock on the hot path; other threads take it for a
//! cross-thread free, statistics or a trim, and wait by spinning, then yielding.

use crossbeam_utils::Backoff;
use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};

/// A lock around a `T`.
#[derive(Debug, Default)]
pub(crate) struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the lock gives access to `value` to one thread at a time (the `locked` flag
// is taken with Acquire and given back with Release), so sharing it between threads
// is sound whenever `T` may move between threads.
unsafe impl<T: Send> Sync for SpinLock<T> {}

/// Access to the value while the lock is held.
pub(crate) struct SpinGuard<'a, T> {
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
        if self.locked.swap(true, Ordering::Acquire) {
            None
        } else {
            Some(SpinGuard { lock: self })
        }
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
        let backoff = Backoff::new();
        loop {
            while self.locked.load(Ordering::Relaxed) {
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

#[cfg(test)]
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
