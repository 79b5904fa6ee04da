//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::io::Read;
use std::path::PathBuf;

/// The bundled traces in traces/ at the repository root.
pub fn traces_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../traces")
}

/// The path of a bundled trace.
pub fn bundled(file: &str) -> PathBuf {
    traces_dir().join(file)
}

/// The text of a gzip file, decompressed here without the crate under test.
pub fn gunzip_text(file: &str) -> String {
    let bytes = std::fs::read(bundled(file)).expect("bundled trace");
    let mut text = String::new();
    flate2::read::GzDecoder::new(&bytes[..])
        .read_to_string(&mut text)
        .expect("gzip");
    text
}

/// A fresh path in the system's temporary folder.
pub fn temp_path(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("devpool-trace-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir.join(name)
}
