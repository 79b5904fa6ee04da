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

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
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
    let dir = Scratch::new("deep");
    let n = 150_000;
    let mut data = vec![0x80, 0x02];
    data.extend(std::iter::repeat_n(b']', n));
    data.extend(std::iter::repeat_n(b'a', n - 1));
    data.push(b'.');
    let p = dir.file("deep.pickle", &data);
    let out = devpool(&["replay", s(&p), "--strategy", "direct"]);
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

    let frees = dir.file(
        "frees.csv",
        &csv(&[
            ("allocate", 0x1000, 4096),
            ("free", 0x1000, 4096),
            ("free", 0x1000, 4096),
            ("free", 0x9000, 16),
        ]),
    );
    let out = devpool(&["replay", s(&frees), "--strategy", "hybrid"]);
    clean_failure(&out, 2, "1 double frees");
    assert!(text(&out.stderr).contains("1 frees of addresses the trace never allocated"));
    assert!(text(&out.stdout).contains("1 double frees, 1 frees of unknown addresses"));
    let out = devpool(&[
        "compare",
        s(&frees),
        "--strategies",
        "direct,slab",
        "--plots",
        s(&dir.0),
    ]);
    clean_failure(&out, 2, "1 double frees");
    assert_eq!(
        text(&out.stderr).matches("warning").count(),
        1,
        "one warning per trace"
    );

    // A clean trace: no warning, status 0.
    let clean = dir.file(
        "clean.csv",
        &csv(&[("allocate", 0x1000, 4096), ("free", 0x1000, 4096)]),
    );
    let out = devpool(&["replay", s(&clean), "--strategy", "direct"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!text(&out.stderr).contains("warning"));
}

#[test]
fn empty_traces_are_errors_not_a_ratio_of_zero() {
    let dir = Scratch::new("empty");
    for (name, content) in [("empty.csv", &b""[..]), ("header.csv", HEADER.as_bytes())] {
        let p = dir.file(name, content);
        let out = devpool(&["replay", s(&p), "--strategy", "direct"]);
        clean_failure(&out, 1, "no allocation");
        assert!(
            !text(&out.stdout).contains("0.000"),
            "{}",
            text(&out.stdout)
        );
        let out = devpool(&[
            "compare",
            s(&p),
            "--strategies",
            "direct",
            "--plots",
            s(&dir.0),
        ]);
        clean_failure(&out, 1, "no allocation");
    }
}

#[test]
fn failed_strategies_are_marked_not_given_a_ratio_as_if_they_ran() {
    let dir = Scratch::new("failed");
    // Far more than the mock's 141 GiB live at once: nothing can serve it all.
    let rows: Vec<(&str, u64, usize)> = (0..6u64)
        .map(|i| ("allocate", 0x1000 * (i + 1), 40usize << 30))
        .collect();
    let p = dir.file("huge.csv", &csv(&rows));
    let out = devpool(&[
        "compare",
        s(&p),
        "--strategies",
        "direct",
        "--plots",
        s(&dir.0),
    ]);
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
    let p = dir.file(
        "t.csv",
        &csv(&[("allocate", 0x1000, 4096), ("free", 0x1000, 4096)]),
    );
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
    clean_failure(&out, 1, "unknown strategy");
    assert!(
        out.stderr.len() < 1000,
        "{} bytes of message",
        out.stderr.len()
    );
}

#[test]
fn a_huge_field_is_not_echoed_whole() {
    let dir = Scratch::new("field");
    let mut data = HEADER.as_bytes().to_vec();
    data.extend(b"0,00:00:01.0,allocate,0x10,");
    data.extend(std::iter::repeat_n(b'9', 5 << 20));
    data.extend(b",0x0\n");
    let p = dir.file("wide.csv", &data);
    let out = devpool(&["replay", s(&p), "--strategy", "direct"]);
    clean_failure(&out, 1, "bad size");
    assert!(
        out.stderr.len() < 1000,
        "{} bytes of message",
        out.stderr.len()
    );
}

#[test]
fn traces_with_the_same_name_keep_their_own_rows_and_plots() {
    let dir = Scratch::new("names");
    let a = dir.file(
        "a/run.csv",
        &csv(&[("allocate", 0x1000, 4096), ("free", 0x1000, 4096)]),
    );
    let b = dir.file(
        "b/run.csv",
        &csv(&[("allocate", 0x1000, 1 << 20), ("free", 0x1000, 1 << 20)]),
    );
    let plots = dir.0.join("plots");
    let out = devpool(&[
        "compare",
        s(&a),
        s(&b),
        "--strategies",
        "direct",
        "--plots",
        s(&plots),
        "--json",
    ]);
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
    let rows: Vec<(&str, u64, usize)> = (0..3000u64)
        .map(|i| ("allocate", 0x1000 * (i + 1), 4096))
        .collect();
    let p = dir.file("many.csv", &csv(&rows));
    let mut child = Command::new(env!("CARGO_BIN_EXE_devpool"))
        .args([
            "compare",
            s(&p),
            "--json",
            "--strategies",
            "direct",
            "--plots",
            s(&dir.0),
        ])
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
