//! A small number per thread, to pick its cache.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

static NEXT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static INDEX: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// This thread's number: threads are numbered in the order they first ask.
#[inline]
pub(crate) fn index() -> usize {
    INDEX.with(|c| {
        let v = c.get();
        if v != usize::MAX {
            return v;
        }
        let v = NEXT.fetch_add(1, Ordering::Relaxed) & (usize::MAX >> 1);
        c.set(v);
        v
    })
}
