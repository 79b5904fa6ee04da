//! `devpool bench` as a user runs it: settings that would measure nothing are clear
//! errors, and the multi-threaded clock covers every worker's whole run.
use std::process::Command;

fn devpool(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_devpool"))
        .args(args)
        .output()
        .expect("the devpool binary runs")
}

/// The rows of a `devpool bench ... --json` run that must succeed.
fn rows(args: &[&str]) -> Vec<serde_json::Value> {
    let out = devpool(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array().expect("a JSON array").clone()
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
    let v = rows(&[
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
    let threaded: Vec<&serde_json::Value> = v.iter().filter(|r| r["threads"] == 8).collect();
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

#[test]
fn settings_laid_over_the_strategies_change_what_they_concern() {
    // Whole pieces and no moving: the random loop's memory calls fall (an
    // independent count: the same loop without the settings), the rows of the
    // hybrid carry the settings, the slab's (which they do not concern) do not.
    let run = |config: Option<&str>| {
        let mut args = vec![
            "bench",
            "--strategies",
            "slab,hybrid",
            "--threads",
            "1",
            "--pairs",
            "200",
            "--steps",
            "20000",
            "--json",
        ];
        if let Some(c) = config {
            args.extend(["--config", c]);
        }
        rows(&args)
    };
    let calls = |rows: &[serde_json::Value], name: &str| {
        rows.iter()
            .find(|r| r["strategy"] == name && r["workload"] == "random op")
            .unwrap_or_else(|| panic!("no random op row for {name}"))["memory_calls"]
            .as_u64()
            .unwrap()
    };
    let plain = run(None);
    let coarse = run(Some("chunk_divisor=1;move_memory=off"));
    let label = "hybrid [chunk_divisor=1;move_memory=off]";
    assert!(
        calls(&coarse, label) < calls(&plain, "hybrid"),
        "{} against {}",
        calls(&coarse, label),
        calls(&plain, "hybrid")
    );
    assert_eq!(calls(&coarse, "slab"), calls(&plain, "slab"));
    for w in ["pair 4 KiB", "random op", "fifo"] {
        let named = |rows: &[serde_json::Value], n: &str| {
            rows.iter()
                .any(|r| r["strategy"] == n && r["workload"] == w)
        };
        assert!(named(&coarse, label), "{w}: {coarse:?}");
        assert!(!named(&coarse, "hybrid"), "{w}");
    }
    // The C ABI's row of the live-block table runs the hybrid with the settings.
    let v = rows(&[
        "bench",
        "--strategies",
        "hybrid",
        "--threads",
        "1",
        "--pairs",
        "100",
        "--steps",
        "100",
        "--live",
        "100",
        "--config",
        "move_memory=off",
        "--json",
    ]);
    let names: Vec<&str> = v
        .iter()
        .filter(|r| r["workload"] == "live 100")
        .map(|r| r["strategy"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "caller only",
            "hybrid [move_memory=off]",
            "hybrid [move_memory=off] (C ABI)"
        ]
    );
    // Keys that other flags set, and bad settings, are clear errors.
    for (bad, says) in [
        ("strategy=slab", "--strategies"),
        ("chunk_pages=0", "chunk_pages"),
    ] {
        let out = devpool(&["bench", "--strategies", "hybrid", "--config", bad]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{bad} succeeded");
        assert!(err.contains(says), "{bad}: {err}");
        assert!(!err.contains("panicked"), "{bad}: {err}");
    }
}
