//! RAPIDS RMM's allocation log: the CSV that its logging adaptor writes and its
//! replay benchmark reads.
//!
//! ```text
//! Thread,Time,Action,Pointer,Size,Stream
//! 0,12:09:01.393955,allocate,0x7f701be00000,37632,0x0
//! 0,12:09:01.398121,free,0x7f701be00000,37632,0x0
//! ```

use crate::clock::{parse_time, ClockTime, Unwrapper};
use crate::error::TraceError;
use crate::event::{Action, Trace, TraceEvent};
use std::io::{BufRead, BufWriter, Write};

/// The header line RMM writes.
pub const RMM_CSV_HEADER: &str = "Thread,Time,Action,Pointer,Size,Stream";

/// Read a trace in RMM's CSV log format from `reader`; `name` names the trace and
/// the source in error messages.
///
/// The header line is optional; blank lines are skipped. Pointers and streams are
/// hexadecimal (with or without `0x`; `(nil)` is zero), sizes decimal, times
/// `HH:MM:SS.micro` (a time more than twelve hours before the previous one is taken
/// to be past midnight). Thread ids that do not fit in 32 bits are folded into 32.
///
/// ```
/// use devpool_trace::{read_rmm_csv, Action};
/// let csv = "Thread,Time,Action,Pointer,Size,Stream\n\
///            0,12:09:01.393955,allocate,0x7f701be00000,37632,0x0\n\
///            0,12:09:01.398121,free,0x7f701be00000,37632,0x0\n";
/// let t = read_rmm_csv(csv.as_bytes(), "tiny").unwrap();
/// assert_eq!(t.events.len(), 2);
/// assert_eq!(t.events[1].action, Action::Free);
///
/// let err = read_rmm_csv("0,12:09:01.0,allocate,0x10,oops,0x0\n".as_bytes(), "bad").unwrap_err();
/// assert_eq!(err.line(), Some(1));
/// ```
pub fn read_rmm_csv(reader: impl BufRead, name: &str) -> Result<Trace, TraceError> {
    parse_rmm_csv(reader, name, name)
}

/// [`read_rmm_csv`] with a separate label (the file path) for error messages.
pub(crate) fn parse_rmm_csv(
    reader: impl BufRead,
    name: &str,
    label: &str,
) -> Result<Trace, TraceError> {
    let events = RmmLines::new(reader, label).collect::<Result<Vec<_>, _>>()?;
    Ok(Trace::new(name, events))
}

/// The events of an RMM CSV log, read one line at a time: memory for one line, not
/// for the trace. Stops after the first error.
pub(crate) struct RmmLines<R> {
    reader: R,
    label: String,
    buf: String,
    line_no: usize,
    seen_data: bool,
    clock: Unwrapper,
    done: bool,
}

impl<R: BufRead> RmmLines<R> {
    /// The events of `reader`; `label` names the source in errors.
    pub(crate) fn new(reader: R, label: &str) -> Self {
        RmmLines {
            reader,
            label: label.to_string(),
            buf: String::with_capacity(128),
            line_no: 0,
            seen_data: false,
            clock: Unwrapper::default(),
            done: false,
        }
    }

    fn next_event(&mut self) -> Result<Option<TraceEvent>, TraceError> {
        loop {
            self.buf.clear();
            let n = self
                .reader
                .read_line(&mut self.buf)
                .map_err(|e| TraceError::io(&self.label, e))?;
            if n == 0 {
                return Ok(None);
            }
            self.line_no += 1;
            let line = self.buf.trim();
            if line.is_empty() {
                continue;
            }
            if !self.seen_data && is_header(line) {
                self.seen_data = true;
                continue;
            }
            self.seen_data = true;
            let mut ev = parse_line(line)
                .map_err(|msg| TraceError::parse(&self.label, self.line_no, msg))?;
            ev.time_us = self.clock.unwrap(ev.time_us);
            return Ok(Some(ev));
        }
    }
}

impl<R: BufRead> Iterator for RmmLines<R> {
    type Item = Result<TraceEvent, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let r = self.next_event().transpose();
        if !matches!(r, Some(Ok(_))) {
            self.done = true;
        }
        r
    }
}

fn is_header(line: &str) -> bool {
    line.split(',')
        .next()
        .is_some_and(|f| f.trim().eq_ignore_ascii_case("thread"))
}

/// A field as echoed in an error: at most 64 bytes of it.
pub(crate) fn shown(field: &str) -> std::borrow::Cow<'_, str> {
    devpool_core::excerpt(field, 64)
}

/// Parse one data line (time not yet unwrapped).
fn parse_line(line: &str) -> Result<TraceEvent, String> {
    let mut fields = [""; 6];
    let mut n = 0;
    for f in line.split(',') {
        if n < fields.len() {
            fields[n] = f.trim();
        }
        n += 1;
    }
    if n != fields.len() {
        return Err(format!(
            "expected 6 fields (Thread,Time,Action,Pointer,Size,Stream), found {n}"
        ));
    }
    let [thread, time, action, ptr, size, stream] = fields;
    let thread =
        parse_thread(thread).ok_or_else(|| format!("bad thread id '{}'", shown(thread)))?;
    let time_us = parse_time(time)?;
    let action = parse_action(action).ok_or_else(|| {
        format!(
            "unknown action '{}' (expected allocate, free or allocate failure)",
            shown(action)
        )
    })?;
    let ptr = parse_hex(ptr).ok_or_else(|| format!("bad pointer '{}'", shown(ptr)))?;
    let size = size
        .parse::<usize>()
        .map_err(|e| format!("bad size '{}': {e}", shown(size)))?;
    let stream = parse_hex(stream).ok_or_else(|| format!("bad stream '{}'", shown(stream)))?;
    Ok(TraceEvent {
        thread,
        time_us,
        action,
        ptr,
        size,
        stream,
    })
}

fn parse_action(s: &str) -> Option<Action> {
    [Action::Allocate, Action::Free, Action::AllocateFailure]
        .into_iter()
        .find(|a| a.as_str().eq_ignore_ascii_case(s))
}

/// A hexadecimal number, with or without `0x`; the null pointer spellings are zero.
fn parse_hex(s: &str) -> Option<u64> {
    if matches!(s, "(nil)" | "nil" | "nullptr" | "NULL") {
        return Some(0);
    }
    let digits = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    if digits.is_empty() || digits.starts_with('+') {
        return None;
    }
    u64::from_str_radix(digits, 16).ok()
}

/// A thread id: decimal (or `0x` hex); ids past 32 bits are folded into 32.
fn parse_thread(s: &str) -> Option<u32> {
    let v = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) if !hex.is_empty() && !hex.starts_with('+') => u64::from_str_radix(hex, 16),
        Some(_) => return None,
        None if s.starts_with('+') => return None,
        None => s.parse::<u64>(),
    }
    .ok()?;
    Some(u32::try_from(v).unwrap_or((v ^ (v >> 32)) as u32))
}

/// Write `trace` in RMM's CSV log format, header included. What this writes,
/// [`read_rmm_csv`] reads back unchanged (times that never go backwards included).
///
/// ```
/// use devpool_trace::{read_rmm_csv, write_rmm_csv, Trace, TraceEvent};
/// let t = Trace::new("t", vec![TraceEvent::allocate(0x200, 100).at(5), TraceEvent::free(0x200, 100).at(9)]);
/// let mut out = Vec::new();
/// write_rmm_csv(&t, &mut out).unwrap();
/// assert_eq!(read_rmm_csv(&out[..], "t").unwrap(), t);
/// ```
pub fn write_rmm_csv(trace: &Trace, w: impl Write) -> std::io::Result<()> {
    let mut w = BufWriter::with_capacity(1 << 16, w);
    writeln!(w, "{RMM_CSV_HEADER}")?;
    for e in &trace.events {
        write_rmm_row(&mut w, e)?;
    }
    w.flush()
}

/// Write one event as a row of RMM's CSV log, line break included:
/// `thread,HH:MM:SS.micro,action,0xptr,size,0xstream`. What a log of these rows
/// under [`RMM_CSV_HEADER`] holds, [`read_rmm_csv`] reads.
///
/// ```
/// use devpool_trace::{write_rmm_row, TraceEvent};
/// let t = ((12 * 60 + 9) * 60 + 1) * 1_000_000 + 393_955;
/// let mut row = Vec::new();
/// write_rmm_row(&mut row, &TraceEvent::allocate(0x7f701be00000, 37632).at(t)).unwrap();
/// assert_eq!(row, b"0,12:09:01.393955,allocate,0x7f701be00000,37632,0x0\n");
/// ```
pub fn write_rmm_row(w: &mut impl Write, e: &TraceEvent) -> std::io::Result<()> {
    writeln!(
        w,
        "{},{},{},{:#x},{},{:#x}",
        e.thread,
        ClockTime(e.time_us),
        e.action,
        e.ptr,
        e.size,
        e.stream
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(parse_hex("0x7f701be00000"), Some(0x7f70_1be0_0000));
        assert_eq!(parse_hex("ff"), Some(255));
        assert_eq!(parse_hex("(nil)"), Some(0));
        assert_eq!(parse_hex("0x"), None);
        assert_eq!(parse_hex("0x+1"), None);
        assert_eq!(parse_hex("xyz"), None);
        assert_eq!(parse_thread("7"), Some(7));
        assert_eq!(parse_thread("0x10"), Some(16));
        let big = 140_537_275_578_176u64;
        assert_eq!(
            parse_thread(&big.to_string()),
            Some((big ^ (big >> 32)) as u32)
        );
        assert_eq!(parse_thread("-1"), None);
    }

    #[test]
    fn times_run_past_midnight() {
        let csv = "0,23:59:59.999999,allocate,0x10,5,0x0\n0,00:00:00.000001,free,0x10,5,0x0\n";
        let t = read_rmm_csv(csv.as_bytes(), "t").unwrap();
        assert_eq!(t.events[1].time_us - t.events[0].time_us, 2);
        let mut out = Vec::new();
        write_rmm_csv(&t, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains(",24:00:00.000001,"), "{text}");
        assert_eq!(read_rmm_csv(text.as_bytes(), "t").unwrap(), t);
    }

    #[test]
    fn errors_echo_at_most_a_little_of_a_huge_field() {
        for field in 0..6 {
            let mut fields = ["0", "00:00:01.0", "allocate", "0x10", "5", "0x0"].map(String::from);
            fields[field] = "9".repeat(5 << 20);
            if field == 1 {
                fields[field] = format!("{}:00:00", "1".repeat(5 << 20));
            }
            let csv = fields.join(",") + "\n";
            let err = read_rmm_csv(csv.as_bytes(), "t").unwrap_err().to_string();
            assert!(
                err.len() < 400,
                "field {field}: {} bytes of message",
                err.len()
            );
            assert!(err.contains("bytes)"), "field {field}: {err}");
        }
        let wide = format!("{}\n", vec!["1"; 1 << 20].join(","));
        let err = read_rmm_csv(wide.as_bytes(), "t").unwrap_err().to_string();
        assert!(err.len() < 400, "{err}");
    }

    #[test]
    fn headerless_and_blank_lines() {
        let csv = "\n1,00:00:00.000001,ALLOCATE,10,5,0x2\n\n1,00:00:00.000002,free,0x10,5,2\n";
        let t = read_rmm_csv(csv.as_bytes(), "t").unwrap();
        assert_eq!(t.events.len(), 2);
        assert_eq!(t.events[0].ptr, 0x10);
        assert_eq!(t.events[1].stream, 2);
        assert_eq!(t.events[1].time_us, 2);
    }
}
