//! # devpool-trace
//!
//! Allocation traces, and replaying them through any [`devpool_core::Allocator`]:
//!
//! - Formats: RAPIDS RMM's CSV log ([`read_rmm_csv`], [`write_rmm_csv`]) and PyTorch's
//!   memory snapshots ([`read_pytorch_snapshot`]); [`read_trace`] tells them apart by
//!   content and reads gzip too.
//! - [`Trace::summary`]: counts, peak live bytes and the share of small requests.
//! - [`replay`]: drives an allocator with a trace and reports fragmentation (the
//!   backend's peak of held bytes over the peak of live requested bytes), rounding
//!   waste, latency, backend calls and a timeline ([`ReplayReport`]).
//! - `plot_timelines` (feature `plot`, off by default): an SVG of live bytes and each
//!   strategy's reserved bytes.
//!
//! ```
//! use devpool_core::direct;
//! use devpool_testing::MockBackend;
//! use devpool_trace::{read_rmm_csv, replay, ReplayOptions};
//! let csv = "Thread,Time,Action,Pointer,Size,Stream\n\
//!            0,12:09:01.393955,allocate,0x7f701be00000,37632,0x0\n\
//!            0,12:09:01.394740,allocate,0x7f701be09400,256,0x0\n\
//!            0,12:09:01.398121,free,0x7f701be00000,37632,0x0\n";
//! let trace = read_rmm_csv(csv.as_bytes(), "tiny").unwrap();
//! assert_eq!(trace.peak_live_bytes(), 37632 + 256);
//! let report = replay(&trace, &direct(MockBackend::shared()), &ReplayOptions::default());
//! assert_eq!(report.peak_live_bytes, 37632 + 256);
//! assert!(report.fragmentation_ratio >= 1.0);
//! ```
#![warn(missing_docs)]

mod clock;
mod depth;
mod error;
mod event;
mod hash;
mod latency;
#[cfg(feature = "plot")]
mod plot;
mod pytorch;
mod recent;
mod replay;
mod report;
mod rmm;
mod stream;
mod summary;
mod timeline;

pub use error::TraceError;
pub use event::{Action, Trace, TraceEvent};
#[cfg(feature = "plot")]
pub use plot::plot_timelines;
pub use pytorch::{read_pytorch_snapshot, read_pytorch_snapshot_device};
pub use replay::{replay, replay_events, ProgressFn, ReplayOptions};
pub use report::{
    BackendCallRates, BackendCallsSummary, DriverCall, LatencySummary, OpLatency, ReplayReport,
    TimelinePoint,
};
pub use rmm::{read_rmm_csv, write_rmm_csv, write_rmm_row, RMM_CSV_HEADER};
pub use stream::{open_trace, read_trace, trace_name, TraceReader};
pub use summary::{TraceSummary, SMALL_REQUEST};
