//! [`Logging`]: every allocation and free as a row of RAPIDS RMM's logging CSV.

use devpool_core::{Allocator, Block, DevicePtr, Request, Result, StreamId};
use parking_lot::Mutex;
use std::cell::Cell;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{SystemTime, UNIX_EPOCH};

/// The first line of every log, as RMM writes it.
pub const LOG_HEADER: &str = "Thread,Time,Action,Pointer,Size,Stream";

/// What a row records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// A block was handed out.
    Allocate,
    /// A block was given back.
    Free,
    /// An allocation failed (the pointer is written as `0x0`).
    AllocateFailure,
}

impl Action {
    /// The word in the `Action` column.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Allocate => "allocate",
            Action::Free => "free",
            Action::AllocateFailure => "allocate failure",
        }
    }
}

/// One row, without its line break: `thread,HH:MM:SS.micro,action,0xptr,size,0xstream`.
/// `since_midnight` is the wall-clock time of day.
///
/// ```
/// use devpool_adaptors::{format_row, Action};
/// use devpool_core::{DevicePtr, StreamId};
/// use std::time::Duration;
/// let t = Duration::from_micros(((12 * 60 + 9) * 60 + 1) * 1_000_000 + 393_955);
/// let row = format_row(0, t, Action::Allocate, DevicePtr(0x7f701be00000), 37632, StreamId(0));
/// assert_eq!(row, "0,12:09:01.393955,allocate,0x7f701be00000,37632,0x0");
/// ```
pub fn format_row(
    thread: u64,
    since_midnight: std::time::Duration,
    action: Action,
    ptr: DevicePtr,
    size: usize,
    stream: StreamId,
) -> String {
    let mut v = Vec::with_capacity(64);
    write_row(&mut v, thread, since_midnight, action, ptr, size, stream)
        .expect("writing to a Vec cannot fail");
    v.pop(); // the line break
    String::from_utf8(v).expect("rows are ASCII")
}

/// Write one row and its line break to `w`, with no intermediate string.
fn write_row(
    w: &mut impl Write,
    thread: u64,
    since_midnight: std::time::Duration,
    action: Action,
    ptr: DevicePtr,
    size: usize,
    stream: StreamId,
) -> io::Result<()> {
    let s = since_midnight.as_secs() % 86_400;
    writeln!(
        w,
        "{thread},{:02}:{:02}:{:02}.{:06},{},{:#x},{size},{:#x}",
        s / 3600,
        s / 60 % 60,
        s % 60,
        since_midnight.subsec_micros(),
        action.as_str(),
        ptr.0,
        stream.0
    )
}

static NEXT_THREAD: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static THREAD: Cell<Option<u64>> = const { Cell::new(None) };
}

/// A small number for the calling thread: 0 for the first thread that logs, then 1...
fn thread_number() -> u64 {
    THREAD.with(|t| {
        t.get().unwrap_or_else(|| {
            let n = NEXT_THREAD.fetch_add(1, Relaxed);
            t.set(Some(n));
            n
        })
    })
}

fn time_of_day() -> std::time::Duration {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    std::time::Duration::new(now.as_secs() % 86_400, now.subsec_nanos())
}

/// Writes RAPIDS RMM's logging CSV of everything the wrapped allocator does.
///
/// The header is [`LOG_HEADER`]; each row is `Thread,Time,Action,Pointer,Size,Stream`:
/// a small number per thread, the wall-clock time of day (UTC) as `HH:MM:SS.micro`,
/// `allocate`, `free` or `allocate failure`, the pointer and stream in hex and the
/// requested size. This is the format of the bundled traces in `traces/`, so a logged
/// run can be replayed by the project's trace tools.
///
/// Rows come in an order a replay can follow: the free of an address is always
/// written before that address is handed out again. Only accepted frees are written.
/// The sink sits behind a mutex; failing writes never fail an allocation: they are
/// counted in [`write_errors`](Logging::write_errors).
///
/// ```
/// use devpool_adaptors::Logging;
/// use devpool_core::{direct, Allocator, MockBackend};
/// let a = Logging::new(direct(MockBackend::shared()), Vec::new());
/// let b = a.alloc(37632).unwrap();
/// a.free(b).unwrap();
/// let (_, log) = a.into_parts();
/// let text = String::from_utf8(log).unwrap();
/// let lines: Vec<&str> = text.lines().collect();
/// assert_eq!(lines[0], "Thread,Time,Action,Pointer,Size,Stream");
/// assert!(lines[1].ends_with(&format!(",allocate,{},37632,0x0", b.ptr)));
/// assert!(lines[2].ends_with(&format!(",free,{},37632,0x0", b.ptr)));
/// ```
pub struct Logging<A, W: Write + Send> {
    inner: A,
    name: String,
    sink: Mutex<W>,
    write_errors: AtomicU64,
}

impl<A: Allocator> Logging<A, BufWriter<File>> {
    /// Log to a new file at `path` (truncated if it exists).
    pub fn to_file(inner: A, path: impl AsRef<Path>) -> io::Result<Self> {
        Ok(Self::new(inner, BufWriter::new(File::create(path)?)))
    }
}

impl<A: Allocator, W: Write + Send> Logging<A, W> {
    /// Log what `inner` does to `sink`; the header is written at once.
    pub fn new(inner: A, mut sink: W) -> Self {
        let failed = writeln!(sink, "{LOG_HEADER}").is_err();
        Logging {
            name: format!("log({})", inner.name()),
            inner,
            sink: Mutex::new(sink),
            write_errors: AtomicU64::new(failed as u64),
        }
    }

    /// The wrapped allocator.
    pub fn inner(&self) -> &A {
        &self.inner
    }

    /// Rows (and the header) that could not be written.
    pub fn write_errors(&self) -> u64 {
        self.write_errors.load(Relaxed)
    }

    /// Flush the sink.
    pub fn flush(&self) -> io::Result<()> {
        self.sink.lock().flush()
    }

    /// Run `f` on the sink, under its lock.
    pub fn with_sink<R>(&self, f: impl FnOnce(&mut W) -> R) -> R {
        f(&mut self.sink.lock())
    }

    /// The wrapped allocator and the sink.
    pub fn into_parts(self) -> (A, W) {
        (self.inner, self.sink.into_inner())
    }

    fn write(&self, sink: &mut W, action: Action, ptr: DevicePtr, size: usize, s: StreamId) {
        let row = write_row(sink, thread_number(), time_of_day(), action, ptr, size, s);
        if row.is_err() {
            self.write_errors.fetch_add(1, Relaxed);
        }
    }
}

impl<A: Allocator, W: Write + Send> Allocator for Logging<A, W> {
    devpool_core::forward_allocator!(|a| &a.inner; backend, record_stream, stats, trim, parts, reuse);

    fn name(&self) -> &str {
        &self.name
    }

    fn allocate(&self, req: Request) -> Result<Block> {
        let r = self.inner.allocate(req);
        // Written before the block reaches the caller, so before anyone can free it.
        let mut sink = self.sink.lock();
        match &r {
            Ok(b) => self.write(&mut sink, Action::Allocate, b.ptr, req.size, req.stream),
            Err(_) => self.write(
                &mut sink,
                Action::AllocateFailure,
                DevicePtr::NULL,
                req.size,
                req.stream,
            ),
        }
        r
    }

    fn deallocate(&self, block: Block, stream: StreamId) -> Result<()> {
        // The lock is held across the free: another thread that gets this address
        // next cannot write its row before ours.
        let mut sink = self.sink.lock();
        self.inner.deallocate(block, stream)?;
        self.write(&mut sink, Action::Free, block.ptr, block.requested, stream);
        Ok(())
    }
}
