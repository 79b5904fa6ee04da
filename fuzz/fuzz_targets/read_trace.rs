//! `devpool_trace::read_trace` on a file of arbitrary bytes (gzip, pickle or CSV).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| devpool_fuzz::readers::read_trace_file(data));
