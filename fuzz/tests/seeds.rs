//! The seed inputs of each target, run through the target's checks without libFuzzer.

use std::path::Path;

/// Every file of `seeds/<target>`, sorted by name.
fn seeds(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("seeds")
        .join(target);
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            let path = e.expect("directory entry").path();
            let bytes = std::fs::read(&path).expect("seed readable");
            (path.display().to_string(), bytes)
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no seeds for {target}");
    out
}

#[test]
fn rmm_csv_seeds() {
    for (name, bytes) in seeds("rmm_csv") {
        // The CSV seeds are valid traces: they must read, not merely not panic.
        devpool_trace::read_rmm_csv(&bytes[..], "seed").unwrap_or_else(|e| panic!("{name}: {e}"));
        devpool_fuzz::readers::rmm_csv(&bytes);
    }
}

#[test]
fn pytorch_snapshot_seeds() {
    let mut read = 0;
    for (_, bytes) in seeds("pytorch_snapshot") {
        read += devpool_trace::read_pytorch_snapshot(&bytes, "seed").is_ok() as usize;
        devpool_fuzz::readers::pytorch_snapshot(&bytes);
    }
    assert!(read >= 3, "only {read} snapshot seeds read");
}

#[test]
fn read_trace_seeds() {
    for (name, bytes) in seeds("read_trace") {
        let dir = std::env::temp_dir().join(format!("devpool-fuzz-seed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let file = dir.join(Path::new(&name).file_name().expect("file name"));
        std::fs::write(&file, &bytes).expect("write seed");
        let trace = devpool_trace::read_trace(&file).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!trace.events.is_empty(), "{name}: no events");
        let _ = std::fs::remove_dir_all(&dir);
        devpool_fuzz::readers::read_trace_file(&bytes);
    }
}

#[test]
fn replay_seeds() {
    for (_, bytes) in seeds("replay") {
        devpool_fuzz::replay::run(&bytes);
    }
}
