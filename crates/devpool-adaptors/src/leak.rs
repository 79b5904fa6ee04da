//! [`LeakReport`]: the blocks still live, largest first.

use devpool_core::{human_bytes, Block};
use std::backtrace::Backtrace;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// One live block in a [`LeakReport`].
#[derive(Clone, Debug)]
pub struct Leak {
    /// The block.
    pub block: Block,
    /// How long ago it was allocated.
    pub age: Duration,
    /// Where it was allocated, when backtraces were captured.
    pub backtrace: Option<Arc<Backtrace>>,
}

/// What is still live in a [`Tracking`](crate::Tracking) allocator.
///
/// Its `Display` gives the count, the bytes and the largest blocks with their
/// backtraces.
#[derive(Clone, Debug, Default)]
pub struct LeakReport {
    /// Allocator name.
    pub allocator: String,
    /// Live blocks.
    pub count: usize,
    /// Requested bytes of the live blocks.
    pub bytes: u64,
    /// Granted bytes of the live blocks.
    pub granted: u64,
    /// The largest live blocks (by requested size, then age), largest first.
    pub largest: Vec<Leak>,
}

impl LeakReport {
    /// Whether nothing is live.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

impl fmt::Display for LeakReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return write!(f, "{}: no live blocks", self.allocator);
        }
        writeln!(
            f,
            "{}: {} live block{} holding {} requested ({} granted)",
            self.allocator,
            self.count,
            if self.count == 1 { "" } else { "s" },
            human_bytes(self.bytes),
            human_bytes(self.granted)
        )?;
        if self.largest.len() < self.count {
            writeln!(f, "the {} largest:", self.largest.len())?;
        }
        for l in &self.largest {
            writeln!(
                f,
                "  {} {} ({} B) on stream {}, allocated {:.3} s ago",
                l.block.ptr,
                human_bytes(l.block.requested as u64),
                l.block.requested,
                l.block.stream,
                l.age.as_secs_f64()
            )?;
            if let Some(bt) = &l.backtrace {
                for line in bt.to_string().lines() {
                    writeln!(f, "      {line}")?;
                }
            }
        }
        Ok(())
    }
}
