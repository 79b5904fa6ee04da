//! The in-memory trace: [`Trace`], a named list of [`TraceEvent`]s.

use serde::{Deserialize, Serialize};
use std::fmt;

/// What a trace event does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Action {
    /// A block was allocated at `ptr`.
    Allocate,
    /// The block at `ptr` was freed.
    Free,
    /// An allocation of `size` bytes failed in the recorded program (replay skips it).
    AllocateFailure,
}

impl Action {
    /// The word RMM's log uses for this action.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Allocate => "allocate",
            Action::Free => "free",
            Action::AllocateFailure => "allocate failure",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One allocation, free or failed allocation of a recorded program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceEvent {
    /// The recording thread (informational; replay ignores it).
    pub thread: u32,
    /// Microseconds since midnight of the day the trace started (it keeps growing
    /// past midnight).
    pub time_us: u64,
    /// What happened.
    pub action: Action,
    /// The address the recorded allocator returned; a replay maps it to its own.
    pub ptr: u64,
    /// Bytes requested.
    pub size: usize,
    /// The stream handle the request was made on.
    pub stream: u64,
}

impl TraceEvent {
    /// An allocation of `size` bytes at `ptr` on the default stream, at time zero.
    ///
    /// ```
    /// use devpool_trace::{Action, TraceEvent};
    /// let e = TraceEvent::allocate(0x1000, 256);
    /// assert_eq!((e.action, e.size, e.stream), (Action::Allocate, 256, 0));
    /// ```
    pub fn allocate(ptr: u64, size: usize) -> Self {
        TraceEvent {
            thread: 0,
            time_us: 0,
            action: Action::Allocate,
            ptr,
            size,
            stream: 0,
        }
    }

    /// A free of the block at `ptr` (of `size` bytes) on the default stream.
    pub fn free(ptr: u64, size: usize) -> Self {
        TraceEvent {
            action: Action::Free,
            ..TraceEvent::allocate(ptr, size)
        }
    }

    /// The same event on another stream.
    pub fn on_stream(mut self, stream: u64) -> Self {
        self.stream = stream;
        self
    }

    /// The same event at another time.
    pub fn at(mut self, time_us: u64) -> Self {
        self.time_us = time_us;
        self
    }
}

/// A named allocation trace.
///
/// ```
/// use devpool_trace::{Trace, TraceEvent};
/// let t = Trace::new("tiny", vec![
///     TraceEvent::allocate(0x100, 1000),
///     TraceEvent::allocate(0x200, 500),
///     TraceEvent::free(0x100, 1000),
/// ]);
/// assert_eq!(t.peak_live_bytes(), 1500);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trace {
    /// A short name for tables and plots (the file name without its extensions).
    pub name: String,
    /// The events in the order they happened.
    pub events: Vec<TraceEvent>,
}

impl Trace {
    /// A trace named `name` with these events.
    pub fn new(name: impl Into<String>, events: Vec<TraceEvent>) -> Self {
        Trace {
            name: name.into(),
            events,
        }
    }

    /// Events with this action.
    pub fn count(&self, action: Action) -> usize {
        self.events.iter().filter(|e| e.action == action).count()
    }
}
