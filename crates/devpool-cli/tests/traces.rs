//! `devpool compare` and `devpool replay` on bad traces and bad settings: a clear
//! message, an exit status that says what happened, and no panic.
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn devpool(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_devpool"))
        .args(args)
        .output()
        .expect("the devpool binary runs")
}

/// A scratch folder of this test, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Self {
        let d = std::env::temp_dir().join(format!("devpool-cli-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
    fn file(&self, name: &str, content: &[u8]) -> PathBuf {
        let p = self.0.join(name);
        if let Some(dir) = p.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(&p, content).unwrap();
        p
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const HEADER: &str = "Thread,Time,Action,Pointer,Size,Stream\n";

fn csv(rows: &[(&str, u64, usize)]) -> Vec<u8> {
    let mut s = HEADER.to_string();
    for (i, (action, ptr, size)) in rows.iter().enumerate() {
        s.push_str(&format!(
            "0,00:00:{:02}.0,{action},{ptr:#x},{size},0x0\n",
            i % 60
        ));
    }
    s.into_bytes()
}

/// A trace of one block of `size` bytes, allocated and freed, written as `name`.
fn one_block(dir: &Scratch, name: &str, size: usize) -> PathBuf {
    dir.file(
        name,
        &csv(&[("allocate", 0x1000, size), ("free", 0x1000, size)]),
    )
}

/// A trace of `n` blocks of `size` bytes, all allocated and none freed, as `name`.
fn never_freed(dir: &Scratch, name: &str, n: u64, size: usize) -> PathBuf {
    let rows: Vec<(&str, u64, usize)> = (0..n)
        .map(|i| ("allocate", 0x1000 * (i + 1), size))
        .collect();
    dir.file(name, &csv(&rows))
}

/// `devpool replay` of `trace` with `strategy`.
fn replay(trace: &Path, strategy: &str) -> Output {
    devpool(&["replay", s(trace), "--strategy", strategy])
}

/// `devpool replay` with `direct` of a trace file `name` holding `data`, in a
/// scratch folder tagged `tag`.
fn replay_bytes(tag: &str, name: &str, data: &[u8]) -> Output {
    let dir = Scratch::new(tag);
    replay(&dir.file(name, data), "direct")
}

/// The arguments of `devpool compare` of `traces` with `strategies`, plots in `plots`.
fn compare_args<'a>(traces: &[&'a Path], strategies: &'a str, plots: &'a Path) -> Vec<&'a str> {
    let mut args = vec!["compare"];
    args.extend(traces.iter().map(|p| s(p)));
    args.extend(["--strategies", strategies, "--plots", s(plots)]);
    args
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A clean failure whose message is short: a long input is not echoed whole.
fn short_failure(out: &Output, code: i32, says: &str) {
    clean_failure(out, code, says);
    assert!(
        out.stderr.len() < 1000,
        "{} bytes of message",
        out.stderr.len()
    );
}

fn clean_failure(out: &Output, code: i32, says: &str) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{err}");
    assert!(err.contains(says), "wanted {says:?} in: {err}");
    assert!(
        !err.contains("panicked") && !err.contains("overflow"),
        "{err}"
    );
}

#[test]
fn a_deeply_nested_pickle_is_a_clear_error() {
    // Protocol 2, then 150,000 empty lists each appended to the one before.
    let n = 150_000;
    let data = [&[0x80, 0x02][..], &vec![b']'; n], &vec![b'a'; n - 1], b"."].concat();
    let out = replay_bytes("deep", "deep.pickle", &data);
    clean_failure(&out, 1, "150000 levels deep");
}

#[test]
fn inconsistent_traces_are_reported_with_counts_and_status_2() {
    let dir = Scratch::new("faults");
    let twice = dir.file(
        "twice.csv",
        &csv(&[
            ("allocate", 0x1000, 4096),
            ("allocate", 0x1000, 512),
            ("free", 0x1000, 512),
        ]),
    );
    let out = devpool(&["replay", s(&twice), "--strategy", "direct", "--json"]);
    clean_failure(&out, 2, "1 allocations at an address still live");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["missing_frees"], 1, "the JSON says the same: {v}");

    // A block freed twice, then a free of an address never allocated.
    let mut rows = vec![("allocate", 0x1000, 4096), ("free", 0x1000, 4096)];
    rows.extend([("free", 0x1000, 4096), ("free", 0x9000, 16)]);
    let frees = dir.file("frees.csv", &csv(&rows));
    let out = replay(&frees, "hybrid");
    clean_failure(&out, 2, "1 double frees");
    assert!(text(&out.stderr).contains("1 frees of addresses the trace never allocated"));
    assert!(text(&out.stdout).contains("1 double frees, 1 frees of unknown addresses"));
    let out = devpool(&compare_args(&[&frees], "direct,slab", &dir.0));
    clean_failure(&out, 2, "1 double frees");
    assert_eq!(
        text(&out.stderr).matches("warning").count(),
        1,
        "one warning per trace"
    );

    // A clean trace: no warning, status 0.
    let clean = one_block(&dir, "clean.csv", 4096);
    let out = replay(&clean, "direct");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!text(&out.stderr).contains("warning"));
}

#[test]
fn empty_traces_are_errors_not_a_ratio_of_zero() {
    let dir = Scratch::new("empty");
    for (name, content) in [("empty.csv", &b""[..]), ("header.csv", HEADER.as_bytes())] {
        let p = dir.file(name, content);
        let out = replay(&p, "direct");
        clean_failure(&out, 1, "no allocation");
        assert!(
            !text(&out.stdout).contains("0.000"),
            "{}",
            text(&out.stdout)
        );
        let out = devpool(&compare_args(&[&p], "direct", &dir.0));
        clean_failure(&out, 1, "no allocation");
    }
}

#[test]
fn failed_strategies_are_marked_not_given_a_ratio_as_if_they_ran() {
    let dir = Scratch::new("failed");
    // Far more than the mock's 141 GiB live at once: nothing can serve it all.
    let p = never_freed(&dir, "huge.csv", 6, 40 << 30);
    let out = devpool(&compare_args(&[&p], "direct", &dir.0));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let t = text(&out.stdout);
    assert!(t.contains("* allocations failed"), "{t}");
    let row = t.lines().find(|l| l.starts_with("huge")).unwrap();
    assert!(
        row.split_whitespace().nth(2).unwrap().ends_with('*'),
        "{row}"
    );
}

#[test]
fn bad_settings_are_refused_before_any_work() {
    let dir = Scratch::new("settings");
    let p = one_block(&dir, "t.csv", 4096);
    let out = devpool(&["replay", s(&p), "--device", "99"]);
    clean_failure(&out, 1, "--device 99");
    let out = devpool(&["info", "--device", "3"]);
    clean_failure(&out, 1, "--device 3");
    let png = dir.0.join("out.png");
    let out = devpool(&["replay", s(&p), "--plot", s(&png)]);
    clean_failure(&out, 1, ".svg");
    assert!(!png.exists(), "no SVG written under a PNG name");
    let svg = dir.0.join("out.svg");
    let out = devpool(&["replay", s(&p), "--plot", s(&svg)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));
    let long = "x".repeat(100_000);
    let out = devpool(&["replay", s(&p), "--strategy", &long]);
    short_failure(&out, 1, "unknown strategy");
}

#[test]
fn a_huge_field_is_not_echoed_whole() {
    let size = vec![b'9'; 5 << 20];
    let row = [&b"0,00:00:01.0,allocate,0x10,"[..], &size, b",0x0\n"].concat();
    let out = replay_bytes("field", "wide.csv", &[HEADER.as_bytes(), &row].concat());
    short_failure(&out, 1, "bad size");
}

#[test]
fn traces_with_the_same_name_keep_their_own_rows_and_plots() {
    let dir = Scratch::new("names");
    let a = one_block(&dir, "a/run.csv", 4096);
    let b = one_block(&dir, "b/run.csv", 1 << 20);
    let plots = dir.0.join("plots");
    let mut args = compare_args(&[&a, &b], "direct", &plots);
    args.push("--json");
    let out = devpool(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["trace"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a/run", "b/run"]);
    let mut files: Vec<String> = std::fs::read_dir(&plots)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files, ["a_run.svg", "b_run.svg"]);
}

#[test]
fn a_closed_pipe_ends_the_command_quietly() {
    // Enough output (a timeline of 2000 points) that the writer is still writing
    // when the reader goes away.
    let dir = Scratch::new("pipe");
    let p = never_freed(&dir, "many.csv", 3000, 4096);
    let mut child = Command::new(env!("CARGO_BIN_EXE_devpool"))
        .args(compare_args(&[&p], "direct", &dir.0))
        .arg("--json")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut head = [0u8; 10];
    let mut stdout = child.stdout.take().unwrap();
    stdout.read_exact(&mut head).unwrap();
    // The reader is gone, as `| head -c 10` leaves it.
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert!(
        !err.contains("panicked") && !err.contains("Broken pipe"),
        "{err}"
    );
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert!(
            out.status.success() || out.status.signal() == Some(libc_sigpipe()),
            "{:?}: {err}",
            out.status
        );
    }
}

/// SIGPIPE's number on the platforms this runs on.
#[cfg(unix)]
fn libc_sigpipe() -> i32 {
    13
}

#[test]
fn config_settings_reach_the_strategies_they_concern_and_bad_ones_are_refused() {
    let dir = Scratch::new("config");
    // Blocks of 3 pages and a bit, freed and allocated again at other sizes, so
    // that the page layer's settings make a difference.
    let mut rows = Vec::new();
    for round in 0..40u64 {
        let size = (6 << 20) + (round as usize % 5) * (3 << 20);
        rows.push(("allocate", 0x1000 * (round + 1), size));
        if round >= 4 {
            rows.push(("free", 0x1000 * (round - 3), 0));
        }
    }
    let p = dir.file("t.csv", &csv(&rows));
    let plots = dir.0.join("plots");
    let mut args = compare_args(&[&p], "hybrid,slab", &plots);
    args.extend(["--json", "--config", "move_memory=off;chunk_divisor=1"]);
    let out = devpool(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let reports: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = reports
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["strategy"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["hybrid [move_memory=off;chunk_divisor=1]", "slab"],
        "only the strategy with a page layer is changed and named so"
    );
    let out = devpool(&["replay", s(&p), "--config", "strategy=slab"]);
    clean_failure(&out, 1, "set with --strategies");
    let out = devpool(&["replay", s(&p), "--config", "chunk_pages=0"]);
    clean_failure(&out, 1, "chunk_pages");
    let long = format!("move_margin=0.{}x", "9".repeat(100_000));
    let out = devpool(&["replay", s(&p), "--config", &long]);
    short_failure(&out, 1, "move_margin");
}
