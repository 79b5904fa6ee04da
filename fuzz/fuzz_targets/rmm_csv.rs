//! `devpool_trace::read_rmm_csv` on arbitrary bytes: `Ok` or `Err`, never a panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| devpool_fuzz::readers::rmm_csv(data));
