//! [`CliError`]: everything a command can fail with, each with the message printed.

use devpool_core::BackendError;
use devpool_trace::TraceError;
use std::path::PathBuf;

/// Why a command stopped.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A strategy name that is neither in the table nor one of the driver's own.
    #[error("unknown strategy '{0}': see `devpool strategies`")]
    UnknownStrategy(String),
    /// One of the driver's own allocators without the CUDA backend.
    #[error("{0} needs --backend cuda")]
    NeedsCuda(String),
    /// A device ordinal other than 0 on the mock.
    #[error("--device {0}: the mock backend is a single device (0); use --backend cuda for a GPU")]
    MockDevice(u32),
    /// The CUDA backend, or something of it, could not be opened.
    #[error("{what}: {source}")]
    Backend {
        /// What was opened.
        what: String,
        /// What the driver (or the mock) said.
        source: BackendError,
    },
    /// A `--config` string that was refused.
    #[error("--config: {0}")]
    Config(String),
    /// A trace that could not be read or replayed.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// A trace with no allocation.
    #[error(
        "{}: no allocation in {events} events: an empty trace (or a header only) has nothing \
         to measure",
        path.display()
    )]
    EmptyTrace {
        /// The file.
        path: PathBuf,
        /// Its events.
        events: u64,
    },
    /// No trace named and no bundled traces.
    #[error("no trace given and no bundled traces/ folder ({}): {source}", dir.display())]
    NoTraceFolder {
        /// The folder looked in.
        dir: PathBuf,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// The bundled traces folder holds no trace.
    #[error("no traces in {}", .0.display())]
    NoTraces(PathBuf),
    /// A file or folder that could not be written.
    #[error("{}: {source}", path.display())]
    Write {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A plot that could not be drawn.
    #[error("{}: {source}", path.display())]
    Plot {
        /// The plot's file.
        path: PathBuf,
        /// Why.
        source: TraceError,
    },
    /// A plot file that is not SVG.
    #[error("--plot {}: plots are SVG files: give a name ending in .svg", .0.display())]
    NotSvg(PathBuf),
    /// A setting that would measure nothing or could not run.
    #[error("{flag}: {why}")]
    Setting {
        /// The flag and its value, as given.
        flag: String,
        /// What it must be instead.
        why: String,
    },
    /// A benchmark thread that could not start.
    #[error("cannot start bench thread {index} of {threads}: {source}")]
    Thread {
        /// Its index.
        index: usize,
        /// Threads asked for.
        threads: usize,
        /// Why.
        source: std::io::Error,
    },
    /// A benchmark thread that panicked.
    #[error("a bench thread panicked")]
    ThreadPanicked,
    /// The C ABI of this process refused the settings of its row.
    #[error("{row}: the C ABI refused its settings (error {code}); it runs once per process")]
    CAbi {
        /// The row's name.
        row: String,
        /// The C ABI's answer.
        code: i32,
    },
    /// Output that could not be written as JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

impl CliError {
    /// A setting refused: `flag` as given, and what it must be.
    pub fn setting(flag: impl Into<String>, why: impl Into<String>) -> Self {
        CliError::Setting {
            flag: flag.into(),
            why: why.into(),
        }
    }
}

/// A command's result.
pub type Result<T> = std::result::Result<T, CliError>;
