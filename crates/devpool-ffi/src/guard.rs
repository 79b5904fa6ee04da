//! Every entry point runs its body through [`shielded`], so that a panic inside the
//! library becomes an error value instead of unwinding into C, Python or C++ frames
//! (which would abort the process). The library must be built with `panic = "unwind"`
//! (the default) for this to work.

use crate::report::{fail, Kind};
use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Panics caught since the library was loaded.
static PANICS: AtomicU64 = AtomicU64::new(0);

/// Panics caught so far, in every entry point.
pub(crate) fn panics() -> u64 {
    PANICS.load(Relaxed)
}

/// Run `body`; if it panics, record the panic as `call`'s last error and return
/// `fallback` instead.
///
/// The state a panicking body leaves behind stays usable: the locks are
/// `parking_lot`'s and devpool's spin locks, which are never poisoned (a guard
/// dropped by the unwinding gives its lock back), and every table update is a
/// single insert or remove, so a body that stops halfway leaves each table whole.
#[inline]
pub(crate) fn shielded<T>(call: &'static str, fallback: T, body: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(v) => v,
        Err(payload) => {
            PANICS.fetch_add(1, Relaxed);
            let msg = format!("{call}: internal panic caught: {}", describe(&*payload));
            // The payload's destructor is user-visible code too: keep it inside.
            let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
            fail(Kind::Panic, &msg);
            fallback
        }
    }
}

fn describe(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "(no message)"
    }
}
