//! [`Checked`]: an allocator wrapper that checks every block the allocator under
//! test hands out against the promises of `devpool_core::Allocator`.

use devpool_core::{Allocator, Backend, Block, Parts, Request, Result, Stats, StreamId, MIN_ALIGN};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Wraps an allocator and panics when a block it grants breaks a promise:
///
/// - a non-null address aligned to the request's alignment (at least 256 B);
/// - at least the requested size (at least one byte), `requested` and `stream` as
///   asked, the allocator's device;
/// - a handle in the pool's bits of the core contract
///   ([`POOL_HANDLE_BITS`](devpool_core::POOL_HANDLE_BITS)), unless the allocator is
///   a router (its parts are routes), which tags them with one of its routes;
/// - no overlap with any block that is live.
///
/// Blocks are forgotten when their free succeeds.
pub struct Checked<'a> {
    inner: &'a dyn Allocator,
    /// Routes a handle may be tagged with (1: none, the bits stay clear).
    routes: u64,
    /// Live blocks by start address: (end address, block).
    live: Mutex<BTreeMap<u64, (u64, Block)>>,
}

impl<'a> Checked<'a> {
    /// Check `inner`.
    pub fn new(inner: &'a dyn Allocator) -> Self {
        let routes = match inner.parts() {
            Parts::Routes(r) => r.len() as u64,
            _ => 1,
        };
        Checked {
            inner,
            routes,
            live: Mutex::new(BTreeMap::new()),
        }
    }

    /// Blocks granted and not freed.
    pub fn live(&self) -> usize {
        self.live.lock().expect("lock").len()
    }

    fn admit(&self, req: &Request, b: &Block) {
        let align = req.align.max(MIN_ALIGN);
        assert!(!b.ptr.is_null(), "null block for {req:?}");
        assert!(
            b.ptr.is_aligned(align),
            "{b:?} not aligned to {align} for {req:?}"
        );
        assert!(b.size >= req.size.max(1), "{b:?} smaller than {req:?}");
        assert_eq!(b.requested, req.size, "requested size of {b:?} for {req:?}");
        assert_eq!(b.stream, req.stream, "stream of {b:?} for {req:?}");
        assert_eq!(b.device, self.inner.device(), "device of {b:?}");
        assert!(
            b.route() < self.routes,
            "handle of {b:?} uses the router's bits ({} routes)",
            self.routes
        );
        let start = b.ptr.0;
        let end = start
            .checked_add(b.size as u64)
            .unwrap_or_else(|| panic!("{b:?} runs past the end of the address space"));
        let mut live = self.live.lock().expect("lock");
        if let Some((_, (prev_end, prev))) = live.range(..=start).next_back() {
            assert!(*prev_end <= start, "{b:?} overlaps live {prev:?}");
        }
        if let Some((next_start, (_, next))) = live.range(start..).next() {
            assert!(end <= *next_start, "{b:?} overlaps live {next:?}");
        }
        live.insert(start, (end, *b));
    }
}

impl Allocator for Checked<'_> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn backend(&self) -> &Arc<dyn Backend> {
        self.inner.backend()
    }
    fn allocate(&self, req: Request) -> Result<Block> {
        let out = self.inner.allocate(req);
        if let Ok(b) = &out {
            self.admit(&req, b);
        }
        out
    }
    fn deallocate(&self, block: Block, stream: StreamId) -> Result<()> {
        let out = self.inner.deallocate(block, stream);
        if out.is_ok() {
            let removed = self.live.lock().expect("lock").remove(&block.ptr.0);
            assert!(removed.is_some(), "freed {block:?}, which was not live");
        }
        out
    }
    fn record_stream(&self, block: &Block, stream: StreamId) -> Result<()> {
        self.inner.record_stream(block, stream)
    }
    fn stats(&self) -> Stats {
        self.inner.stats()
    }
    fn trim(&self) -> Result<usize> {
        self.inner.trim()
    }
}
