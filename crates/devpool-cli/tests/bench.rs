//! `devpool bench` as a user runs it: settings that would measure nothing are clear
//! errors, and the multi-threaded clock covers every worker's whole run.
use std::process::Command;

fn devpool(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_devpool"))
        .args(args)
        .output()
        .expect("the devpool binary runs")
}

#[test]
fn settings_that_measure_nothing_are_errors() {
    for (args, says) in [
        (&["bench", "--threads", "0"][..], "--threads 0"),
        (&["bench", "--threads", "1,0"][..], "--threads 0"),
        (&["bench", "--steps", "0"][..], "--steps 0"),
        (&["bench", "--pairs", "0"][..], "--pairs 0"),
        (&["bench", "--live", "1000,0"][..], "--live 0"),
        (&["bench", "--threads", "100000000000"][..], "at most"),
    ] {
        let out = devpool(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}: no figures are printed");
    }
}

#[test]
fn the_clock_covers_every_worker() {
    // Each worker runs for 800 ms of its own time once let go; the clock starts
    // before they are let go and stops after the last one ends, so it can never
    // read less, however the threads were scheduled (more threads than cores here).
    let out = devpool(&[
        "bench",
        "--strategies",
        "slab",
        "--threads",
        "8",
        "--pairs",
        "1000",
        "--steps",
        "1000",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let threaded: Vec<&serde_json::Value> = v
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["threads"] == 8)
        .collect();
    assert_eq!(threaded.len(), 1);
    let r = threaded[0];
    let seconds = r["seconds"].as_f64().unwrap();
    assert!(
        seconds >= 0.8,
        "timed {seconds} s, less than one worker's run: {r}"
    );
    let ops = r["ops"].as_f64().unwrap();
    let rate = r["ops_per_sec"].as_f64().unwrap();
    assert!((ops / rate - seconds).abs() <= seconds * 1e-9, "{r}");
    assert_eq!(r["failures"], 0);
}
