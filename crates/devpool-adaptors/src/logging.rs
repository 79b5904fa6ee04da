//! [`Logging`]: every allocation and free as a row of RAPIDS RMM's logging CSV.

use devpool_core::{Allocator, Block, DevicePtr, Request, Result, StreamId};
use devpool_trace::{write_rmm_row, Action, TraceEvent, RMM_CSV_HEADER};
use parking_lot::Mutex;
use std::cell::Cell;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::{SystemTime, UNIX_EPOCH};

static NEXT_THREAD: AtomicU32 = AtomicU32::new(0);

thread_local! {
    static THREAD: Cell<Option<u32>> = const { Cell::new(None) };
}

/// A small number for the calling thread: 0 for the first thread that logs, then 1...
fn thread_number() -> u32 {
    THREAD.with(|t| {
        t.get().unwrap_or_else(|| {
            let n = NEXT_THREAD.fetch_add(1, Relaxed);
            t.set(Some(n));
            n
        })
    })
}

/// Microseconds since midnight (UTC).
fn time_of_day() -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (now.as_secs() % 86_400) * 1_000_000 + u64::from(now.subsec_micros())
}

/// Writes RAPIDS RMM's logging CSV of everything the wrapped allocator does.
///
/// The header is [`RMM_CSV_HEADER`]; each row is `Thread,Time,Action,Pointer,Size,Stream`:
/// a small number per thread, the wall-clock time of day (UTC) as `HH:MM:SS.micro`,
/// `allocate`, `free` or `allocate failure`, the pointer and stream in hex and the
/// requested size. This is the format of the bundled traces in `traces/`, so a logged
/// run can be replayed by the project's trace tools: rows are written by
/// [`devpool_trace::write_rmm_row`], next to the reader.
///
/// Rows come in an order a replay can follow: the free of an address is always
/// written before that address is handed out again. Only accepted frees are written.
/// The sink sits behind a mutex; failing writes never fail an allocation: they are
/// counted in [`write_errors`](Logging::write_errors).
///
/// ```
/// use devpool_adaptors::Logging;
/// use devpool_core::{direct, Allocator};
/// use devpool_testing::MockBackend;
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
        let failed = writeln!(sink, "{RMM_CSV_HEADER}").is_err();
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
        let event = TraceEvent {
            thread: thread_number(),
            time_us: time_of_day(),
            action,
            ptr: ptr.0,
            size,
            stream: s.raw(),
        };
        if write_rmm_row(sink, &event).is_err() {
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
