//! # devpool-fuzz
//!
//! What each fuzz target does with its input, as plain functions: the targets in
//! `fuzz_targets/` only hand libFuzzer's bytes to these, and the tests in `tests/`
//! run the seed inputs in `seeds/` through the same functions without libFuzzer.
//!
//! Every function here panics when it finds a bug (a panic in the code under test,
//! or a broken invariant it checks afterwards); that is how libFuzzer sees a crash.
//!
//! | target | function |
//! |---|---|
//! | `rmm_csv` | [`readers::rmm_csv`] |
//! | `pytorch_snapshot` | [`readers::pytorch_snapshot`] |
//! | `read_trace` | [`readers::read_trace_file`] |
//! | `replay` | [`replay::run`] |
//! | `ffi` | [`ffi::run`] |
#![warn(missing_docs)]

pub mod checked;
pub mod ffi;
pub mod known;
pub mod readers;
pub mod replay;
pub mod size;
