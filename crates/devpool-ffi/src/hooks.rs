//! Test-only hooks (feature `test-hooks`, never in the shipped library): make the
//! allocation and free paths panic on one chosen size, to prove that every entry
//! point catches its panics instead of unwinding into the caller.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

static ARMED: AtomicBool = AtomicBool::new(false);
static SIZE: AtomicUsize = AtomicUsize::new(0);

/// Make `devpool_malloc` / `devpool_cupy_malloc` of exactly `size` bytes, and
/// `devpool_free` told that size, panic inside the library; `None` disarms.
pub fn panic_on_size(size: Option<usize>) {
    match size {
        Some(s) => {
            SIZE.store(s, Relaxed);
            ARMED.store(true, Relaxed);
        }
        None => ARMED.store(false, Relaxed),
    }
}

#[inline]
pub(crate) fn maybe_panic(size: usize) {
    if ARMED.load(Relaxed) && SIZE.load(Relaxed) == size {
        panic!("test hook: planned panic on a call for {size} B");
    }
}
