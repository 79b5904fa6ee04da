//! Malformed input gives a parse error that names the line, never a panic.
mod common;

use devpool_trace::{read_pytorch_snapshot, read_rmm_csv, read_trace, TraceError};
use proptest::prelude::*;

const HEADER: &str = "Thread,Time,Action,Pointer,Size,Stream";
const GOOD: &str = "0,12:09:01.393955,allocate,0x7f701be00000,37632,0x0";

/// The bad lines, one of each kind of mistake.
const BAD: &[(&str, &str)] = &[
    (
        "too few fields",
        "0,12:09:01.393955,allocate,0x7f701be00000,37632",
    ),
    (
        "too many fields",
        "0,12:09:01.393955,allocate,0x7f701be00000,37632,0x0,7",
    ),
    (
        "size not a number",
        "0,12:09:01.393955,allocate,0x7f701be00000,big,0x0",
    ),
    (
        "negative size",
        "0,12:09:01.393955,allocate,0x7f701be00000,-1,0x0",
    ),
    (
        "size overflows",
        "0,12:09:01.393955,allocate,0x10,99999999999999999999999,0x0",
    ),
    (
        "pointer not hex",
        "0,12:09:01.393955,allocate,0x7g,37632,0x0",
    ),
    (
        "stream not hex",
        "0,12:09:01.393955,allocate,0x10,37632,stream",
    ),
    (
        "thread not a number",
        "main,12:09:01.393955,allocate,0x10,37632,0x0",
    ),
    ("unknown action", "0,12:09:01.393955,alloc,0x10,37632,0x0"),
    ("empty action", "0,12:09:01.393955,,0x10,37632,0x0"),
    ("time without seconds", "0,12:09,allocate,0x10,37632,0x0"),
    (
        "minutes out of range",
        "0,12:75:01.393955,allocate,0x10,37632,0x0",
    ),
    ("time not a number", "0,noon,allocate,0x10,37632,0x0"),
    ("empty fraction", "0,12:09:01.,allocate,0x10,37632,0x0"),
];

/// Build a file: a header, `before` good lines (and a blank line), the bad line.
fn file_with_bad_line(before: usize, bad: &str) -> (String, usize) {
    let mut text = format!("{HEADER}\n");
    let mut line = 1;
    for i in 0..before {
        text.push_str(GOOD);
        text.push('\n');
        line += 1;
        if i == 0 {
            text.push('\n');
            line += 1;
        }
    }
    text.push_str(bad);
    text.push('\n');
    text.push_str(GOOD);
    text.push('\n');
    (text, line + 1)
}

#[test]
fn every_kind_names_its_line() {
    for (i, (kind, bad)) in BAD.iter().enumerate() {
        let (text, line) = file_with_bad_line(i, bad);
        match read_rmm_csv(text.as_bytes(), "bad_trace") {
            Err(TraceError::Parse {
                file,
                line: at,
                msg,
            }) => {
                assert_eq!(at, line, "{kind}: {msg}");
                assert_eq!(file, "bad_trace");
                assert!(!msg.is_empty());
            }
            other => panic!("{kind}: expected a parse error, got {other:?}"),
        }
    }
}

#[test]
fn file_errors_name_the_file_and_line() {
    let path = common::TempFile::new("broken.csv");
    let path = path.path();
    let (text, line) = file_with_bad_line(3, BAD[8].1);
    std::fs::write(path, text).unwrap();
    let e = read_trace(path).unwrap_err();
    assert_eq!(e.line(), Some(line));
    let shown = e.to_string();
    assert!(
        shown.starts_with(&format!("{}:{line}:", path.display())),
        "{shown}"
    );
    assert!(shown.contains("alloc"), "{shown}");
}

#[test]
fn missing_file_and_broken_gzip() {
    let missing = common::TempFile::new("no_such_trace.csv");
    let missing = missing.path();
    let e = read_trace(missing).unwrap_err();
    assert!(matches!(e, TraceError::Io { .. }), "{e}");
    assert!(e.to_string().contains("no_such_trace.csv"));

    // The first half of a real gzip file: the stream ends early.
    let full = std::fs::read(common::bundled("resnet50_train.csv.gz")).unwrap();
    let path = common::TempFile::new("truncated.csv.gz");
    let path = path.path();
    std::fs::write(path, &full[..full.len() / 2]).unwrap();
    let e = read_trace(path).unwrap_err();
    assert!(matches!(e, TraceError::Io { .. }), "{e}");
}

#[test]
fn format_is_told_by_content_not_name() {
    // A plain CSV under a name that says gzip.
    let path = common::TempFile::new("plain.pickle.gz");
    let path = path.path();
    std::fs::write(path, format!("{HEADER}\n{GOOD}\n")).unwrap();
    let t = read_trace(path).unwrap();
    assert_eq!((t.name.as_str(), t.events.len()), ("plain", 1));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any text gives a trace or an error, never a panic.
    #[test]
    fn arbitrary_text_never_panics(lines in prop::collection::vec(
        prop_oneof![
            Just(GOOD.to_string()),
            "[0-9a-z:,. x()-]{0,60}",
            "[0-9]{1,3},[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{1,8},(allocate|free|allocate failure),0x[0-9a-f]{1,17},[0-9]{1,21},0x[0-9a-f]{1,3}",
        ],
        0..20,
    )) {
        let text = lines.join("\n");
        if let Err(e) = read_rmm_csv(text.as_bytes(), "p") {
            prop_assert!(matches!(e, TraceError::Parse { .. }), "{}", e);
        }
    }

    /// Any bytes after the pickle protocol byte give a trace or an error.
    #[test]
    fn arbitrary_pickle_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let mut data = vec![0x80, 0x04];
        data.extend(bytes);
        let _ = read_pytorch_snapshot(&data, "p");
    }
}

/// Found by fuzzing: a time with a huge hour count is a parse error naming the line,
/// and request sizes near `usize::MAX` are summed without overflow.
#[test]
fn fuzz_findings_are_errors_or_saturate() {
    let csv = "0,7942967295:0:1,,,,\n";
    match read_rmm_csv(csv.as_bytes(), "f1") {
        Err(e) => assert_eq!(e.line(), Some(1), "{e}"),
        Ok(t) => panic!("read {} events from a malformed line", t.events.len()),
    }
    let huge = format!(
        "{HEADER}\n0,0:0:0,allocate,1,{m},0\n0,0:0:0,allocate,2,{m},0\n",
        m = usize::MAX
    );
    let t = read_rmm_csv(huge.as_bytes(), "f2").expect("two well-formed rows");
    let s = t.summary();
    assert_eq!(s.allocations, 2);
    assert_eq!(s.peak_live_bytes, u64::MAX, "the sum saturates");
}

/// A pickle nesting lists 150,000 deep (300 KB) is refused with an error that says
/// so, read from bytes or from a file: no stack overflow.
#[test]
fn deeply_nested_pickle_is_an_error() {
    let n = 150_000;
    let mut data = vec![0x80, 0x02];
    data.extend(std::iter::repeat_n(b']', n));
    data.extend(std::iter::repeat_n(b'a', n - 1));
    data.push(b'.');
    let e = read_pytorch_snapshot(&data, "deep").unwrap_err();
    assert!(e.to_string().contains("150000 levels deep"), "{e}");
    let path = common::TempFile::new("deep.pickle");
    let path = path.path();
    std::fs::write(path, &data).unwrap();
    let e = read_trace(path).unwrap_err();
    assert!(matches!(e, TraceError::Format(_)), "{e}");
    assert!(e.to_string().contains("deep.pickle"), "{e}");
    // Just within the limit still reads (as not a snapshot: lists, not a dict).
    let mut ok = vec![0x80, 0x02];
    ok.extend(std::iter::repeat_n(b']', 200));
    ok.extend(std::iter::repeat_n(b'a', 199));
    ok.push(b'.');
    let e = read_pytorch_snapshot(&ok, "shallow").unwrap_err();
    assert!(!e.to_string().contains("levels deep"), "{e}");
}

/// A long trace read as a stream: events come one at a time, errors end it.
#[test]
fn streamed_and_whole_reads_agree() {
    use devpool_trace::open_trace;
    for file in ["resnet50_train.csv.gz", "mlp_snapshot.pickle"] {
        let path = common::bundled(file);
        let whole = read_trace(&path).unwrap();
        let reader = open_trace(&path).unwrap();
        assert_eq!(reader.name(), whole.name);
        let len = reader.file_len();
        let read = reader.bytes_read_handle();
        let events: Vec<_> = reader.map(|e| e.unwrap()).collect();
        assert_eq!(events, whole.events, "{file}");
        assert_eq!(
            read.load(std::sync::atomic::Ordering::Relaxed),
            len,
            "{file}"
        );
    }
    let (text, bad_line) = file_with_bad_line(10, "0,12:09:01.0,allocate,0x10,oops,0x0");
    let path = common::TempFile::new("stream_bad.csv");
    let path = path.path();
    std::fs::write(path, text).unwrap();
    let mut reader = open_trace(path).unwrap();
    let results: Vec<_> = reader.by_ref().collect();
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 10);
    let e = results.last().unwrap().as_ref().unwrap_err();
    assert_eq!(e.line(), Some(bad_line), "{e}");
    assert!(reader.next().is_none(), "nothing after the error");
}
