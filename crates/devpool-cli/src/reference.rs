//! The host's own `malloc` and `free` as an [`Allocator`], so that `devpool bench`
//! measures the system allocator in the same run as the strategies: a reference for
//! what host bookkeeping of one allocation costs, not a device allocator (its
//! pointers are host memory, and the backend it names is only there to fill the
//! trait).

use crate::error::CliError;
use crate::overlay::Overlay;
use crate::target::Target;
use crate::BackendArgs;
use devpool_core::{
    Allocator, Backend, Block, DevicePtr, Error, OomInfo, Request, Result, StreamId,
};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;

/// The methods of an allocator that keeps nothing back between calls: recording a
/// stream is nothing to do, it has no figures of its own and nothing to trim.
macro_rules! keeps_nothing {
    () => {
        fn record_stream(
            &self,
            _block: &devpool_core::Block,
            _stream: devpool_core::StreamId,
        ) -> devpool_core::Result<()> {
            Ok(())
        }

        fn stats(&self) -> devpool_core::Stats {
            devpool_core::Stats::default()
        }

        fn trim(&self) -> devpool_core::Result<usize> {
            Ok(0)
        }
    };
}
pub(crate) use keeps_nothing;

/// The reference rows of `devpool bench`, beside the strategies.
pub(crate) const REFERENCES: &[&str] = &["malloc"];

/// The reference row of the `live N` table: the workload's own work (drawing, its
/// table of live blocks) with an allocator that does nothing.
pub(crate) const CALLER_ONLY: &str = "caller only";

/// The rows of `devpool bench`: the references first (run before any other thread
/// exists, the system allocator's quickest case), then the strategies asked for
/// (or all); a reference is named among the strategies to run it alone.
pub(crate) fn with_references(
    asked: &[String],
    args: &BackendArgs,
) -> std::result::Result<Vec<String>, CliError> {
    let (refs, rest): (Vec<String>, Vec<String>) = asked
        .iter()
        .cloned()
        .partition(|a| REFERENCES.contains(&a.as_str()));
    let mut names: Vec<String> = if asked.is_empty() {
        REFERENCES.iter().map(|s| s.to_string()).collect()
    } else {
        refs
    };
    if asked.is_empty() || !rest.is_empty() {
        names.extend(crate::target::strategies(&rest, args)?);
    }
    Ok(names)
}

/// Build a reference or a strategy by name on `target`, with the `--config` settings
/// that concern it; the name its rows carry (with the settings, where they changed
/// it).
pub(crate) fn build(
    name: &str,
    target: &Target,
    overlay: Option<&Overlay>,
) -> std::result::Result<(Box<dyn Allocator>, String), CliError> {
    if name == "malloc" {
        return Ok((Box::new(HostMalloc::new(target.backend())), name.into()));
    }
    if name == CALLER_ONLY {
        return Ok((Box::new(Nothing::new(target.backend())), name.into()));
    }
    let (a, changed) = crate::target::build(name, target, overlay)?;
    Ok((a, crate::overlay::row_name(name, changed, overlay)))
}

/// `malloc` / `free` of the host (glibc on Linux), through Rust's `System` allocator:
/// an alignment of 16 and a size of at least 16 make it a plain `malloc(size)`.
///
/// Only for the benchmark, which frees each block it got exactly once: unlike the
/// strategies, [`deallocate`](Allocator::deallocate) cannot tell a bad block from a
/// good one (checking would add a table to the figure), so it stays private here.
pub(crate) struct HostMalloc {
    backend: Arc<dyn Backend>,
}

impl HostMalloc {
    /// The reference allocator; `backend` only answers [`Allocator::backend`].
    pub(crate) fn new(backend: Arc<dyn Backend>) -> Self {
        HostMalloc { backend }
    }
}

fn layout(size: usize) -> Result<Layout> {
    Layout::from_size_align(size.max(16), 16).map_err(|_| Error::too_large(size))
}

impl Allocator for HostMalloc {
    fn name(&self) -> &str {
        "malloc"
    }

    fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    fn allocate(&self, req: Request) -> Result<Block> {
        let l = layout(req.size)?;
        // SAFETY: `l` has a non-zero size; the pointer is freed once, with the same
        // layout, in `deallocate`.
        let p = unsafe { System.alloc(l) };
        if p.is_null() {
            return Err(Error::OutOfMemory(Box::new(OomInfo {
                requested: req.size,
                ..Default::default()
            })));
        }
        Ok(req.granted(DevicePtr(p as u64), l.size(), self.backend.device(), 0))
    }

    fn deallocate(&self, block: Block, _stream: StreamId) -> Result<()> {
        let l = layout(block.requested)?;
        // SAFETY: the benchmark frees each block it got from `allocate` exactly once;
        // the layout is the one it was allocated with.
        unsafe { System.dealloc(block.ptr.0 as *mut u8, l) };
        Ok(())
    }

    keeps_nothing!();
}

/// An allocator that does no work: each block gets the next address, frees are
/// accepted unchecked. What a workload costs with it is the workload's own share.
pub(crate) struct Nothing {
    backend: Arc<dyn Backend>,
    next: std::sync::atomic::AtomicU64,
}

impl Nothing {
    /// The do-nothing allocator; `backend` only answers [`Allocator::backend`].
    pub(crate) fn new(backend: Arc<dyn Backend>) -> Self {
        Nothing {
            backend,
            next: std::sync::atomic::AtomicU64::new(1 << 40),
        }
    }
}

impl Allocator for Nothing {
    fn name(&self) -> &str {
        CALLER_ONLY
    }

    fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    fn allocate(&self, req: Request) -> Result<Block> {
        let next = self.next.load(std::sync::atomic::Ordering::Relaxed);
        self.next
            .store(next + 256, std::sync::atomic::Ordering::Relaxed);
        Ok(req.granted(DevicePtr(next), req.size, self.backend.device(), next))
    }

    fn deallocate(&self, _block: Block, _stream: StreamId) -> Result<()> {
        Ok(())
    }

    keeps_nothing!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use devpool_testing::MockBackend;

    #[test]
    fn blocks_are_usable_host_memory() {
        let m = HostMalloc::new(MockBackend::shared());
        let b = m.allocate(Request::new(4096)).unwrap();
        assert!(b.size >= 4096 && b.ptr.0.is_multiple_of(16));
        // SAFETY: the block is 4096 bytes of host memory owned by this test.
        unsafe { std::ptr::write_bytes(b.ptr.0 as *mut u8, 0xAB, 4096) };
        m.free(b).unwrap();
    }
}
