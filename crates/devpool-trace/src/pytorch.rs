//! PyTorch's memory snapshots: the pickle `torch.cuda.memory._dump_snapshot()`
//! writes, whose `device_traces` hold the allocation history of each device.

use crate::clock::DAY_US;
use crate::error::TraceError;
use crate::event::{Action, Trace, TraceEvent};
use serde::Deserialize;

/// Deepest nesting of containers a snapshot may have (real ones have about 8).
pub const MAX_DEPTH: usize = 256;

/// The part of a snapshot a trace needs; everything else (segments, frames...) is
/// skipped.
#[derive(Deserialize)]
struct Snapshot {
    device_traces: Option<Vec<Vec<Entry>>>,
}

#[derive(Deserialize)]
struct Entry {
    action: String,
    #[serde(default)]
    addr: u64,
    #[serde(default)]
    size: u64,
    #[serde(default)]
    stream: u64,
    #[serde(default)]
    time_us: u64,
}

/// Read the allocation history of a PyTorch memory snapshot (the bytes of the
/// pickle file), from the first device that has one.
///
/// `alloc` entries become [`Action::Allocate`], `free_completed` entries
/// [`Action::Free`] (the moment the memory became reusable) and `oom` entries
/// [`Action::AllocateFailure`]; segment events, `free_requested` and snapshots are
/// skipped. Times are counted from midnight (UTC) of the day of the first event.
/// Snapshots carry no thread ids: every event has thread 0.
pub fn read_pytorch_snapshot(bytes: &[u8], name: &str) -> Result<Trace, TraceError> {
    parse_snapshot(bytes, name, name, None)
}

/// [`read_pytorch_snapshot`] for one device (its index in `device_traces`).
pub fn read_pytorch_snapshot_device(
    bytes: &[u8],
    name: &str,
    device: usize,
) -> Result<Trace, TraceError> {
    parse_snapshot(bytes, name, name, Some(device))
}

/// The parser behind both, with a label (the file path) for error messages.
pub(crate) fn parse_snapshot(
    bytes: &[u8],
    name: &str,
    label: &str,
    device: Option<usize>,
) -> Result<Trace, TraceError> {
    // Refuse deep nesting before the reader builds it: reading, deserializing and
    // dropping recurse once per level.
    let depth = crate::depth::nesting(bytes)
        .map_err(|e| TraceError::Format(format!("{label}: not a PyTorch memory snapshot: {e}")))?;
    if depth > MAX_DEPTH {
        return Err(TraceError::Format(format!(
            "{label}: not a PyTorch memory snapshot: it nests {depth} levels deep, more \
             than the {MAX_DEPTH} a snapshot could need"
        )));
    }
    let options = serde_pickle::DeOptions::new()
        .replace_unresolved_globals()
        .replace_recursive_structures();
    let snap: Snapshot = serde_pickle::from_slice(bytes, options)
        .map_err(|e| TraceError::Format(format!("{label}: not a PyTorch memory snapshot: {e}")))?;
    let traces = snap
        .device_traces
        .ok_or_else(|| TraceError::Format(format!("{label}: the snapshot has no device_traces")))?;
    let entries = match device {
        Some(d) => traces.get(d).ok_or_else(|| {
            TraceError::Format(format!(
                "{label}: no device {d} in the snapshot ({} devices)",
                traces.len()
            ))
        })?,
        None => traces
            .iter()
            .find(|t| t.iter().any(|e| to_action(&e.action).is_some()))
            .ok_or_else(|| {
                TraceError::Format(format!(
                    "{label}: the snapshot records no allocation history (record it with \
                     torch.cuda.memory._record_memory_history())"
                ))
            })?,
    };
    let day = entries.first().map_or(0, |e| e.time_us / DAY_US * DAY_US);
    let events = entries
        .iter()
        .filter_map(|e| {
            let action = to_action(&e.action)?;
            let size = usize::try_from(e.size).ok()?;
            Some(TraceEvent {
                thread: 0,
                time_us: e.time_us.saturating_sub(day),
                action,
                ptr: if action == Action::AllocateFailure {
                    0
                } else {
                    e.addr
                },
                size,
                stream: e.stream,
            })
        })
        .collect();
    Ok(Trace::new(name, events))
}

fn to_action(action: &str) -> Option<Action> {
    match action {
        "alloc" => Some(Action::Allocate),
        "free_completed" => Some(Action::Free),
        "oom" => Some(Action::AllocateFailure),
        _ => None,
    }
}
