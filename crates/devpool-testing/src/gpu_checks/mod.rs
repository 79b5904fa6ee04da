//! Checks that run an allocator against a real device (or a host-backed mock) and
//! look at the bytes: two blocks that overlap, or a block reused while another
//! stream still writes it, show up as wrong data.
//!
//! Any crate can call them on its own allocator. They are plain functions returning
//! [`Error::Corrupted`](devpool_core::Error::Corrupted) on a finding, so a test only
//! has to unwrap:
//!
//! ```
//! use devpool_core::direct;
//! use devpool_testing::gpu_checks::OverlapCheck;
//! use devpool_testing::{MockBackend, MockConfig};
//! let mock = MockBackend::shared_with(MockConfig::default().host_backed());
//! let report = OverlapCheck::new(200, 1).sizes(64 << 10, 1 << 20).run(&direct(mock)).unwrap();
//! assert_eq!(report.allocations, 200);
//! ```
//!
//! On a GPU, [`check_no_overlap`] uses thousands of blocks of up to 64 MiB (a few
//! GiB in all) and [`check_stream_order`] keeps a 1 GiB scratch region busy for tens
//! of milliseconds.
//!
//! Streams: the checks make the streams they use with
//! [`Backend::create_stream`](devpool_core::Backend::create_stream) and leave them
//! alive, since the allocator's per-stream pools may still refer to them.

mod overlap;
mod stream_order;

pub use overlap::{check_no_overlap, OverlapCheck, OverlapReport};
pub use stream_order::{check_stream_order, HandOff, StreamOrderCheck, StreamOrderReport};
