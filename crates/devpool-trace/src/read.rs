//! [`read_trace`]: open a trace file of any supported format, chosen by content.

use crate::error::TraceError;
use crate::event::Trace;
use crate::pytorch::parse_snapshot;
use crate::rmm::parse_rmm_csv;
use std::io::Read;
use std::path::Path;

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const PICKLE_PROTO: u8 = 0x80;

/// Read a trace file, telling the format by its content, not its name: gzip
/// (decompressed first), a Python pickle (a PyTorch memory snapshot, see
/// [`read_pytorch_snapshot`](crate::read_pytorch_snapshot)), or else RMM's CSV log
/// (see [`read_rmm_csv`](crate::read_rmm_csv)).
///
/// The trace is named after the file, less its extensions (`resnet50_train.csv.gz`
/// gives `resnet50_train`). Errors name the file.
pub fn read_trace(path: &Path) -> Result<Trace, TraceError> {
    let label = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| TraceError::io(&label, e))?;
    parse_bytes(bytes, &trace_name(path), &label)
}

/// Parse the content of a trace file.
fn parse_bytes(bytes: Vec<u8>, name: &str, label: &str) -> Result<Trace, TraceError> {
    if bytes.starts_with(&GZIP_MAGIC) {
        let mut out = Vec::with_capacity(bytes.len() * 8);
        flate2::read::MultiGzDecoder::new(&bytes[..])
            .read_to_end(&mut out)
            .map_err(|e| TraceError::io(label, e))?;
        if out.starts_with(&GZIP_MAGIC) {
            return Err(TraceError::Format(format!("{label}: gzip inside gzip")));
        }
        return parse_bytes(out, name, label);
    }
    if bytes.first() == Some(&PICKLE_PROTO) {
        return parse_snapshot(&bytes, name, label, None);
    }
    parse_rmm_csv(&bytes[..], name, label)
}

/// The file name less its extensions.
fn trace_name(path: &Path) -> String {
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
