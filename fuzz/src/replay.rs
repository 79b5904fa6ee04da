//! The `replay` target: a small trace decoded from fuzz input, replayed through one
//! of `devpool::STRATEGIES` on a small mock device, with every block checked by
//! [`Checked`] and the books checked afterwards.

use crate::checked::Checked;
use crate::size::Size;
use arbitrary::{Arbitrary, Unstructured};
use devpool::{Allocator, MockBackend, MockConfig, STRATEGIES};
use devpool_trace::{replay, Action, ReplayOptions, Trace, TraceEvent};

/// Most events replayed from one input (keeps every run short).
pub const MAX_EVENTS: usize = 256;

/// One row of the trace.
#[derive(Arbitrary, Clone, Copy, Debug)]
pub enum Event {
    /// Allocate `size` bytes for trace pointer `ptr` on `stream`.
    Allocate {
        /// Trace pointer (a slot; the same slot twice is a lost free).
        ptr: u8,
        /// Bytes.
        size: Size,
        /// Stream handle (taken modulo 8).
        stream: u8,
    },
    /// Free trace pointer `ptr` on `stream` (an unknown slot is an unmatched free).
    Free {
        /// Trace pointer.
        ptr: u8,
        /// Stream handle (taken modulo 8).
        stream: u8,
    },
    /// An allocation that failed in the recorded program.
    AllocateFailure {
        /// Bytes.
        size: Size,
    },
}

/// A decoded input: which strategy, how much memory, which trace.
#[derive(Arbitrary, Clone, Debug)]
pub struct Input {
    /// Index into `devpool::STRATEGIES` (modulo its length).
    pub strategy: u8,
    /// Device memory: `(capacity % 64 + 1) * 16 MiB`.
    pub capacity: u8,
    /// The trace.
    pub events: Vec<Event>,
}

impl Input {
    /// The strategy's name.
    pub fn strategy_name(&self) -> &'static str {
        STRATEGIES[self.strategy as usize % STRATEGIES.len()].name
    }

    /// The strategy.
    pub fn strategy(&self) -> devpool::StrategySpec {
        STRATEGIES[self.strategy as usize % STRATEGIES.len()].spec()
    }

    /// Device memory in bytes.
    pub fn capacity_bytes(&self) -> u64 {
        (self.capacity as u64 % 64 + 1) * (16 << 20)
    }

    /// The trace to replay.
    pub fn trace(&self) -> Trace {
        let events = self
            .events
            .iter()
            .take(MAX_EVENTS)
            .enumerate()
            .map(|(i, e)| {
                let (action, ptr, size, stream) = match *e {
                    Event::Allocate { ptr, size, stream } => {
                        (Action::Allocate, slot(ptr), size.bytes(), stream % 8)
                    }
                    Event::Free { ptr, stream } => (Action::Free, slot(ptr), 0, stream % 8),
                    Event::AllocateFailure { size } => {
                        (Action::AllocateFailure, 0, size.bytes(), 0)
                    }
                };
                TraceEvent {
                    thread: 0,
                    time_us: i as u64,
                    action,
                    ptr,
                    size,
                    stream: stream as u64,
                }
            })
            .collect();
        Trace::new("fuzz", events)
    }
}

/// The trace address of slot `s`.
fn slot(s: u8) -> u64 {
    0x10_0000 + s as u64 * 0x100
}

/// Decode `data` and check it.
pub fn run(data: &[u8]) {
    if let Ok(input) = Input::arbitrary_take_rest(Unstructured::new(data)) {
        check(&input);
    }
}

/// Replay `input` and check the allocator's books.
pub fn check(input: &Input) {
    let name = input.strategy_name();
    let mock = MockBackend::shared_with(MockConfig::default().capacity(input.capacity_bytes()));
    let alloc = input.strategy().build(mock.clone());
    let checked = Checked::new(alloc.as_ref());
    let trace = input.trace();
    let opts = ReplayOptions {
        timeline_points: 16,
        measure_latency: false,
        progress: None,
    };
    let report = replay(&trace, &checked, &opts);

    assert_eq!(report.free_errors, 0, "{name}: {:?}", report.first_error);
    assert_eq!(checked.live(), 0, "{name}: blocks left after the replay");
    assert!(
        report.peak_reserved_bytes >= report.peak_live_bytes,
        "{name}: peak reserved {} below peak live {}",
        report.peak_reserved_bytes,
        report.peak_live_bytes
    );
    books_balance(name, alloc.as_ref(), &mock);
    alloc
        .trim()
        .unwrap_or_else(|e| panic!("{name}: trim failed: {e}"));
    books_balance(name, alloc.as_ref(), &mock);
}

/// Nothing is live, and the allocator's reserved bytes are the backend's bytes in use.
fn books_balance(name: &str, alloc: &dyn Allocator, mock: &MockBackend) {
    let stats = alloc.stats();
    assert_eq!(
        stats.live_blocks.current, 0,
        "{name}: live blocks {stats:?}"
    );
    assert_eq!(stats.live_bytes.current, 0, "{name}: live bytes {stats:?}");
    let held = devpool_core::Backend::counters(mock).bytes_in_use.current;
    assert_eq!(
        held, stats.reserved_bytes.current,
        "{name}: the backend holds {held} B, the allocator counts {} B reserved",
        stats.reserved_bytes.current
    );
}
