//! [`open_trace`]: a trace file read one event at a time, so that memory stays
//! proportional to what the reader keeps, not to the length of the trace.

use crate::error::TraceError;
use crate::event::{Trace, TraceEvent};
use crate::pytorch::parse_snapshot;
use crate::rmm::RmmLines;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const PICKLE_PROTO: u8 = 0x80;

/// Counts the bytes read from the file, for progress.
struct Counting<R> {
    inner: R,
    read: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.fetch_add(n as u64, Relaxed);
        Ok(n)
    }
}

enum Source {
    /// An RMM CSV log, parsed as it is read.
    Csv(RmmLines<Box<dyn BufRead + Send>>),
    /// A PyTorch snapshot: a pickle is read whole (its structure is not a stream).
    Events(std::vec::IntoIter<TraceEvent>),
}

/// The events of a trace file, read as they are iterated: an RMM CSV log (plain or
/// gzip) holds one line in memory at a time; a PyTorch snapshot is read whole (a
/// pickle cannot be read in pieces), then handed out event by event.
///
/// Iteration yields `Err` once, for the first malformed line or read error, and then
/// ends.
///
/// ```
/// let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../traces/resnet50_train.csv.gz");
/// let mut reader = devpool_trace::open_trace(&path).unwrap();
/// assert_eq!(reader.name(), "resnet50_train");
/// let first = reader.next().unwrap().unwrap();
/// assert_eq!(first.action, devpool_trace::Action::Allocate);
/// assert!(reader.bytes_read() > 0 && reader.bytes_read() <= reader.file_len());
/// ```
pub struct TraceReader {
    name: String,
    source: Source,
    read: Arc<AtomicU64>,
    len: u64,
}

impl TraceReader {
    /// The trace's name (the file name less its extensions).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Size of the file in bytes (compressed, for a gzip file).
    pub fn file_len(&self) -> u64 {
        self.len
    }

    /// Bytes of the file read so far.
    pub fn bytes_read(&self) -> u64 {
        self.read.load(Relaxed)
    }

    /// A handle on [`bytes_read`](Self::bytes_read) for another thread or a
    /// progress callback.
    pub fn bytes_read_handle(&self) -> Arc<AtomicU64> {
        self.read.clone()
    }
}

impl Iterator for TraceReader {
    type Item = Result<TraceEvent, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.source {
            Source::Csv(lines) => lines.next(),
            Source::Events(events) => events.next().map(Ok),
        }
    }
}

/// Open a trace file for reading one event at a time, telling the format by its
/// content: gzip (decompressed as it is read), a Python pickle (a PyTorch memory
/// snapshot), or else RMM's CSV log. Errors name the file.
pub fn open_trace(path: &Path) -> Result<TraceReader, TraceError> {
    let label = path.display().to_string();
    let file = File::open(path).map_err(|e| TraceError::io(&label, e))?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let read = Arc::new(AtomicU64::new(0));
    let counted = Counting {
        inner: file,
        read: read.clone(),
    };
    let mut raw = BufReader::with_capacity(1 << 16, counted);
    let head = raw.fill_buf().map_err(|e| TraceError::io(&label, e))?;
    let gzipped = head.starts_with(&GZIP_MAGIC);
    let mut reader: Box<dyn BufRead + Send> = if gzipped {
        Box::new(BufReader::with_capacity(
            1 << 16,
            flate2::bufread::MultiGzDecoder::new(raw),
        ))
    } else {
        Box::new(raw)
    };
    let head = reader.fill_buf().map_err(|e| TraceError::io(&label, e))?;
    if gzipped && head.starts_with(&GZIP_MAGIC) {
        return Err(TraceError::Format(format!("{label}: gzip inside gzip")));
    }
    let name = trace_name(path);
    let source = if head.first() == Some(&PICKLE_PROTO) {
        let mut bytes = Vec::new();
        reader
            .read_to_end(&mut bytes)
            .map_err(|e| TraceError::io(&label, e))?;
        Source::Events(
            parse_snapshot(&bytes, &name, &label, None)?
                .events
                .into_iter(),
        )
    } else {
        Source::Csv(RmmLines::new(reader, &label))
    };
    Ok(TraceReader {
        name,
        source,
        read,
        len,
    })
}

/// Read a whole trace file into memory, telling the format by its content: gzip
/// (decompressed first), a Python pickle (a PyTorch memory snapshot, see
/// [`read_pytorch_snapshot`](crate::read_pytorch_snapshot)), or else RMM's CSV log
/// (see [`read_rmm_csv`](crate::read_rmm_csv)). For long traces, [`open_trace`] reads
/// one event at a time instead.
///
/// The trace is named after the file, less its extensions (`resnet50_train.csv.gz`
/// gives `resnet50_train`). Errors name the file.
pub fn read_trace(path: &Path) -> Result<Trace, TraceError> {
    let reader = open_trace(path)?;
    let name = reader.name().to_string();
    let events = reader.collect::<Result<Vec<_>, _>>()?;
    Ok(Trace::new(name, events))
}

/// The name of the trace in a file: the file name less its extensions
/// (`a/resnet50_train.csv.gz` gives `resnet50_train`).
pub fn trace_name(path: &Path) -> String {
    let file = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut name = file.as_str();
    for ext in [".gz", ".csv", ".pickle", ".pkl", ".log", ".txt"] {
        if let Some(stem) = name.strip_suffix(ext) {
            if !stem.is_empty() {
                name = stem;
            }
        }
    }
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(
            trace_name(Path::new("a/resnet50_train.csv.gz")),
            "resnet50_train"
        );
        assert_eq!(trace_name(Path::new("mlp_snapshot.pickle")), "mlp_snapshot");
        assert_eq!(trace_name(Path::new("x.bin")), "x.bin");
        assert_eq!(trace_name(Path::new(".csv")), ".csv");
    }
}
