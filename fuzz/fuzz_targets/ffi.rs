//! A script of C ABI calls on the mock backend (strategy from `DEVPOOL_FUZZ_STRATEGY`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| devpool_fuzz::ffi::run(data));
