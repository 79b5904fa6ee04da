//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};

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

/// A file in the system's temporary folder, removed when dropped.
pub struct TempFile(PathBuf);

impl TempFile {
    /// A fresh path named `name` (the file is not created), in a folder of its own.
    pub fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("devpool-trace-test-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempFile(dir.join(name))
    }

    /// The path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}
