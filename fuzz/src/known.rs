//! Known findings (listed in docs/FUZZING.md) that would otherwise end every run at
//! once: with the environment variable [`SKIP_ENV`] naming them, the targets step
//! around inputs that hit them, so that fuzzing can look for other bugs. Without it
//! every input is run.

use std::io::Read;
use std::sync::OnceLock;

/// Comma-separated names of known findings to step around, or `all`.
pub const SKIP_ENV: &str = "DEVPOOL_FUZZ_SKIP";

/// Names of the known findings.
pub const KNOWN: &[&str] = &["csv-hours"];

/// Whether the finding `name` is to be stepped around in this process.
pub fn skipped(name: &str) -> bool {
    static LIST: OnceLock<Vec<String>> = OnceLock::new();
    let list = LIST.get_or_init(|| {
        std::env::var(SKIP_ENV)
            .unwrap_or_default()
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    });
    list.iter().any(|s| s == name || s == "all")
}

/// `csv-hours`: a CSV row whose time has an hour field of ten digits or more (its
/// microseconds overflow `u64` in the time parser).
pub fn long_hours(csv: &[u8]) -> bool {
    csv.split(|&b| b == b'\n').any(|line| {
        let Some(time) = line.split(|&b| b == b',').nth(1) else {
            return false;
        };
        let time = time.trim_ascii();
        let hours = time.split(|&b| b == b':').next().unwrap_or_default();
        hours.len() >= 10
    })
}

/// The bytes a gzip stream holds, at most `limit` of them (none if it is not gzip).
pub fn gunzip(data: &[u8], limit: u64) -> Vec<u8> {
    let mut out = Vec::new();
    if data.starts_with(&[0x1f, 0x8b]) {
        let _ = flate2::read::MultiGzDecoder::new(data)
            .take(limit)
            .read_to_end(&mut out);
    }
    out
}
