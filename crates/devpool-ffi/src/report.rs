//! How failures reach the caller: return codes, a thread-local message for
//! `devpool_last_error`, and at most one line on standard error per kind of misuse.

use crate::config::LogMode;
use std::cell::RefCell;
use std::ffi::{c_char, c_int, CString};
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering::Relaxed};

/// Success.
pub const DEVPOOL_OK: c_int = 0;
/// A bad argument: a configuration string that does not parse, a negative or too
/// large device ordinal, a null pointer where one is needed.
pub const DEVPOOL_ERR_INVALID: c_int = -1;
/// `devpool_configure` after the first allocator was made: the settings are fixed.
pub const DEVPOOL_ERR_TOO_LATE: c_int = -2;
/// The pointer is not a live block of that device.
pub const DEVPOOL_ERR_NOT_FOUND: c_int = -3;
/// The allocator or its backend failed (no CUDA device, a driver error...).
pub const DEVPOOL_ERR_BACKEND: c_int = -4;
/// A panic inside the library was caught; the call did nothing.
pub const DEVPOOL_ERR_PANIC: c_int = -5;

/// The kinds of message that are shown once each (with `log=once`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    UnknownPointer,
    WrongDevice,
    SizeMismatch,
    OutOfMemory,
    Backend,
    Config,
    Panic,
}

const KINDS: usize = 7;
static SHOWN: [AtomicBool; KINDS] = [const { AtomicBool::new(false) }; KINDS];
static MODE: AtomicU8 = AtomicU8::new(1);

/// Longest message kept, in bytes: a message echoing a huge input is cut.
const MAX_MESSAGE: usize = 4096;

thread_local! {
    /// This thread's last error.
    static LAST: RefCell<CString> = RefCell::new(CString::default());
    /// The copy of it `devpool_last_error` handed out last: replaced only by the
    /// thread's next `devpool_last_error`, so no other call frees what a caller holds.
    static HANDED_OUT: RefCell<CString> = RefCell::new(CString::default());
}

/// Set how much is written to standard error.
pub(crate) fn set_log_mode(mode: LogMode) {
    MODE.store(
        match mode {
            LogMode::Off => 0,
            LogMode::Once => 1,
            LogMode::All => 2,
        },
        Relaxed,
    );
}

/// Keep `msg` (at most [`MAX_MESSAGE`] bytes of it) as this thread's last error.
pub(crate) fn set_last_error(msg: &str) {
    let msg = devpool_core::excerpt(msg, MAX_MESSAGE);
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    // During thread teardown the slot may be gone: then the message is dropped.
    let _ = LAST.try_with(|l| *l.borrow_mut() = c);
}

/// This thread's last error message (an empty string when there was none). The
/// pointer is to a copy that stays valid until this thread's next call of this
/// function: other calls, failing or not, leave it alone, so
/// `printf("%d %s", devpool_configure(x), devpool_last_error())` reads valid memory
/// whichever argument C evaluates first.
pub(crate) fn last_error_ptr() -> *const c_char {
    static EMPTY: &[u8] = b"\0";
    let copy = LAST.try_with(|l| l.borrow().clone()).unwrap_or_default();
    HANDED_OUT
        .try_with(|s| {
            let mut s = s.borrow_mut();
            *s = copy;
            s.as_ptr()
        })
        .unwrap_or(EMPTY.as_ptr().cast())
}

/// Record a failure: keep the message for `devpool_last_error`, and write it to
/// standard error as the log mode says.
pub(crate) fn fail(kind: Kind, msg: &str) {
    set_last_error(msg);
    let show = match MODE.load(Relaxed) {
        0 => false,
        1 => !SHOWN[kind as usize].swap(true, Relaxed),
        _ => true,
    };
    if show {
        let tail = if MODE.load(Relaxed) == 1 {
            " (further messages of this kind are not shown)"
        } else {
            ""
        };
        // A failed write to standard error is ignored rather than turned into a panic.
        let _ = writeln!(std::io::stderr(), "devpool: {msg}{tail}");
    }
}
