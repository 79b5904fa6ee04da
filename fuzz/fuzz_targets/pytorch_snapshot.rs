//! `devpool_trace::read_pytorch_snapshot` on arbitrary bytes: `Ok` or `Err`, never a panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| devpool_fuzz::readers::pytorch_snapshot(data));
