//! A small trace replayed through any strategy on a small mock device.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| devpool_fuzz::replay::run(data));
