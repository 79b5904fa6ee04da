//! Reading the bundled PyTorch snapshot.
mod common;

use common::bundled;
use devpool_trace::{read_pytorch_snapshot, read_trace, Action, TraceError};
use serde_pickle::{DeOptions, HashableValue, Value};
use std::collections::HashMap;

/// The entries of the first device trace, read generically.
fn raw_entries(bytes: &[u8]) -> Vec<HashMap<String, Value>> {
    let v: Value =
        serde_pickle::value_from_slice(bytes, DeOptions::new().replace_recursive_structures())
            .unwrap();
    let Value::Dict(top) = v else {
        panic!("not a dict")
    };
    let Some(Value::List(devices)) = top.get(&HashableValue::String("device_traces".into())) else {
        panic!("no device_traces")
    };
    let Some(Value::List(entries)) = devices.first() else {
        panic!("no device")
    };
    entries
        .iter()
        .map(|e| match e {
            Value::Dict(d) => d
                .iter()
                .filter_map(|(k, v)| match k {
                    HashableValue::String(k) => Some((k.clone(), v.clone())),
                    _ => None,
                })
                .collect(),
            _ => panic!("entry is not a dict"),
        })
        .collect()
}

fn action(e: &HashMap<String, Value>) -> String {
    match e.get("action") {
        Some(Value::String(s)) => s.clone(),
        _ => panic!("no action"),
    }
}

#[test]
fn snapshot_reads_and_pairs_up() {
    let path = bundled("mlp_snapshot.pickle");
    let trace = read_trace(&path).unwrap();
    assert_eq!(trace.name, "mlp_snapshot");
    assert!(!trace.events.is_empty());

    let bytes = std::fs::read(&path).unwrap();
    let raw = raw_entries(&bytes);
    let n = |word: &str| raw.iter().filter(|e| action(e) == word).count();
    assert_eq!(trace.count(Action::Allocate), n("alloc"));
    assert_eq!(trace.count(Action::Free), n("free_completed"));
    assert_eq!(trace.count(Action::AllocateFailure), n("oom"));
    assert_eq!(
        read_pytorch_snapshot(&bytes, "mlp_snapshot").unwrap(),
        trace
    );

    // Every free ends a block allocated before it, of the same size.
    let mut live = HashMap::new();
    for e in &trace.events {
        assert!(e.size > 0);
        match e.action {
            Action::Allocate => assert!(live.insert(e.ptr, e.size).is_none()),
            Action::Free => assert_eq!(live.remove(&e.ptr), Some(e.size)),
            Action::AllocateFailure => {}
        }
    }
    assert!(trace
        .events
        .windows(2)
        .all(|w| w[0].time_us <= w[1].time_us));
    assert!(trace.events.iter().all(|e| e.time_us < 2 * 86_400_000_000));
    assert!(trace.peak_live_bytes() > 0);
}

#[test]
fn gzipped_snapshot_reads_the_same() {
    use std::io::Write;
    let bytes = std::fs::read(bundled("mlp_snapshot.pickle")).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&bytes).unwrap();
    let tmp = common::TempFile::new("mlp_snapshot.pickle.gz");
    std::fs::write(tmp.path(), gz.finish().unwrap()).unwrap();
    let trace = read_trace(tmp.path()).unwrap();
    assert_eq!(trace, read_trace(&bundled("mlp_snapshot.pickle")).unwrap());
}

#[test]
fn not_a_snapshot() {
    // A pickle of a plain list: the protocol byte, then an empty list, then stop.
    let bytes = [0x80, 0x04, b']', b'.'];
    let e = read_pytorch_snapshot(&bytes, "x").unwrap_err();
    assert!(matches!(e, TraceError::Format(_)), "{e}");
    let e = read_pytorch_snapshot(&[0x80, 0x04, 0xff], "x").unwrap_err();
    assert!(e.to_string().contains("x:"), "{e}");
}
