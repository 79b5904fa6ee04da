//! [`TraceError`]: what can go wrong reading, writing or plotting a trace.

/// Errors from reading, writing or plotting traces. Every message names the file it
/// is about, and a parse error names the line.
#[derive(thiserror::Error, Debug)]
#[non_exhaustive]
pub enum TraceError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A line of a CSV trace is malformed.
    #[error("{file}:{line}: {msg}")]
    Parse {
        /// The file (or the trace's name when read from a stream).
        file: String,
        /// The line, counted from 1 (the header is line 1).
        line: usize,
        /// What is wrong with it.
        msg: String,
    },
    /// The content is not a trace in any known format, or a snapshot lacks what a
    /// trace needs. The message names the file.
    #[error("{0}")]
    Format(String),
    /// A plot could not be drawn.
    #[error("{path}: cannot draw the plot: {msg}")]
    Plot {
        /// The output file.
        path: String,
        /// What went wrong.
        msg: String,
    },
}

impl TraceError {
    /// An I/O error on `path`.
    pub(crate) fn io(path: impl Into<String>, source: std::io::Error) -> Self {
        TraceError::Io {
            path: path.into(),
            source,
        }
    }

    /// A parse error at `line` of `file`.
    pub(crate) fn parse(file: &str, line: usize, msg: impl Into<String>) -> Self {
        TraceError::Parse {
            file: file.to_string(),
            line,
            msg: msg.into(),
        }
    }

    /// The line number of a parse error.
    pub fn line(&self) -> Option<usize> {
        match self {
            TraceError::Parse { line, .. } => Some(*line),
            _ => None,
        }
    }
}
