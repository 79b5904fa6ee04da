//! A small number per thread, to pick its cache: the lowest number no running
//! thread holds, given back when the thread exits. A new thread thus takes over the
//! caches of threads that are gone, with their slabs, instead of starting empty ones.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// Numbers handed out: bit `i` set while a running thread holds `i`.
static TAKEN: AtomicU64 = AtomicU64::new(0);

struct Number(Cell<usize>);

impl Drop for Number {
    fn drop(&mut self) {
        let n = self.0.get();
        // Later calls in this thread's exit take the slow path and get cache 0.
        let _ = FAST.try_with(|f| f.set(usize::MAX));
        if n < 64 {
            TAKEN.fetch_and(!(1 << n), Ordering::AcqRel);
        }
    }
}

thread_local! {
    /// This thread's number once it has one: without a destructor, reading it is a
    /// plain load of thread-local memory.
    static FAST: Cell<usize> = const { Cell::new(usize::MAX) };
    /// The same number, given back by its destructor when the thread exits.
    static NUMBER: Number = const { Number(Cell::new(usize::MAX)) };
}

/// This thread's number: below 64 while fewer than 64 threads hold one, otherwise
/// shared with another thread (which is correct, only slower).
#[inline]
pub(crate) fn index() -> usize {
    let v = FAST.with(Cell::get);
    if v != usize::MAX {
        return v;
    }
    index_slow()
}

/// This thread's number if it has one already: a plain thread-local load that
/// calls nothing, for fast paths ([`index`] gives one the first time).
#[inline]
pub(crate) fn index_if_known() -> Option<usize> {
    let v = FAST.with(Cell::get);
    (v != usize::MAX).then_some(v)
}

#[cold]
fn index_slow() -> usize {
    NUMBER
        .try_with(|n| {
            let mut v = n.0.get();
            if v == usize::MAX {
                v = take();
                n.0.set(v);
            }
            FAST.with(|f| f.set(v));
            v
        })
        // During thread exit, after the number was given back: any cache will do.
        .unwrap_or(0)
}

#[cold]
fn take() -> usize {
    let mut cur = TAKEN.load(Ordering::Acquire);
    loop {
        if cur == u64::MAX {
            return 64;
        }
        let n = (!cur).trailing_zeros() as usize;
        match TAKEN.compare_exchange_weak(cur, cur | (1 << n), Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => return n,
            Err(now) => cur = now,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn numbers_are_distinct_while_held_and_reused_after() {
        let mine = super::index();
        assert_eq!(super::index(), mine, "stable within a thread");
        let (tx, rx) = std::sync::mpsc::channel();
        let held: Vec<_> = (0..4)
            .map(|_| {
                let tx = tx.clone();
                let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
                let h = std::thread::spawn(move || {
                    tx.send(super::index()).unwrap();
                    done_rx.recv().unwrap();
                });
                (h, done_tx)
            })
            .collect();
        let mut got: Vec<usize> = (0..4).map(|_| rx.recv().unwrap()).collect();
        got.push(mine);
        got.sort_unstable();
        got.dedup();
        assert_eq!(got.len(), 5, "running threads hold distinct numbers");
        for (h, done) in held {
            done.send(()).unwrap();
            h.join().unwrap();
        }
        // The numbers are given back: a new thread gets a small one, not a sixth.
        let again = std::thread::spawn(super::index).join().unwrap();
        assert!(again < 64);
    }
}
