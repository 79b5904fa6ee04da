//! The [`Allocator`] trait every strategy implements, and the [`Pool`] trait of the
//! single-stream pools that [`StreamOrdered`](crate::StreamOrdered) turns into one.

use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::parts::{Parts, Reuse};
use crate::stats::Stats;
use crate::types::{Block, DeviceId, Request, StreamId};
use std::sync::Arc;

/// A device-memory allocator: thread-safe, all methods on `&self`.
///
/// ```
/// use devpool_core::{direct, Allocator, Request};
/// use devpool_testing::MockBackend;
/// let alloc = direct(MockBackend::shared());
/// let b = alloc.allocate(Request::new(1000)).unwrap();
/// assert!(b.size >= 1000 && b.ptr.is_aligned(256));
/// alloc.free(b).unwrap();
/// assert!(alloc.free(b).is_err()); // the second free is caught
/// ```
pub trait Allocator: Send + Sync {
    /// A short name for tables and logs ("slab", "buddy-virtual"...).
    fn name(&self) -> &str;
    /// The backend the memory comes from.
    fn backend(&self) -> &Arc<dyn Backend>;
    /// The device this allocator serves.
    fn device(&self) -> DeviceId {
        self.backend().device()
    }
    /// Allocate a block for `req`.
    fn allocate(&self, req: Request) -> Result<Block>;
    /// Free `block`, whose last use was queued on `stream`. The memory may be reused at
    /// once by the block's own stream, and by any other stream only after the work
    /// queued on `stream` (and on every stream named by
    /// [`record_stream`](Allocator::record_stream)) has completed.
    fn deallocate(&self, block: Block, stream: StreamId) -> Result<()>;
    /// Declare that `block` is also used on `stream` (PyTorch's `record_stream`): its
    /// free then waits for the work queued on `stream` too.
    fn record_stream(&self, block: &Block, stream: StreamId) -> Result<()>;
    /// A snapshot of the statistics.
    fn stats(&self) -> Stats;
    /// Give cached memory back to the backend; returns the bytes released.
    fn trim(&self) -> Result<usize>;
    /// The statistics by part (a router's routes, a slab's classes);
    /// [`Parts::Whole`] where the strategy has none.
    fn parts(&self) -> Parts {
        Parts::Whole
    }
    /// When a freed block's memory serves new requests.
    fn reuse(&self) -> Reuse {
        Reuse::OnFree
    }
    /// Free every live block at once, where the strategy has that hook (a bump
    /// arena's end of frame); [`Error::Unsupported`] otherwise.
    fn reset(&self) -> Result<()> {
        Err(Error::Unsupported(
            "this strategy has no reset: free its blocks one by one",
        ))
    }

    /// Allocate `size` bytes at the default alignment on the default stream.
    fn alloc(&self, size: usize) -> Result<Block> {
        self.allocate(Request::new(size))
    }
    /// Free a block on the stream it was allocated on.
    fn free(&self, block: Block) -> Result<()> {
        self.deallocate(block, block.stream)
    }
}

/// Write the [`Allocator`] methods named in the list as calls of the same method of
/// an inner allocator: `forward_allocator!(|s| &s.inner; name, backend, stats)` in an
/// `impl Allocator for X` block. An adaptor writes what it changes and forwards the
/// rest; every method of the trait can be named.
///
/// ```
/// use devpool_core::{direct, forward_allocator, Allocator, Block, DirectPool, Request};
/// use devpool_core::{Result, StreamId, StreamOrdered};
/// use devpool_testing::MockBackend;
/// use std::sync::atomic::{AtomicU64, Ordering};
///
/// /// Counts allocations; forwards everything else.
/// struct Counted {
///     inner: StreamOrdered<DirectPool>,
///     calls: AtomicU64,
/// }
///
/// impl Allocator for Counted {
///     fn allocate(&self, req: Request) -> Result<Block> {
///         self.calls.fetch_add(1, Ordering::Relaxed);
///         self.inner.allocate(req)
///     }
///     forward_allocator!(|s| &s.inner; name, backend, deallocate, record_stream, stats, trim);
/// }
///
/// let a = Counted { inner: direct(MockBackend::shared()), calls: AtomicU64::new(0) };
/// a.free(a.alloc(100).unwrap()).unwrap();
/// assert_eq!((a.name(), a.calls.load(Ordering::Relaxed)), ("direct", 1));
/// ```
#[macro_export]
macro_rules! forward_allocator {
    (|$s:ident| $inner:expr; $($method:ident),+ $(,)?) => {
        $($crate::forward_allocator!(@sig |$s| $inner; $method);)+
    };
    (@sig |$s:ident| $inner:expr; name) => { $crate::forward_allocator!(@fn |$s| $inner; name() -> &str); };
    (@sig |$s:ident| $inner:expr; backend) => {
        $crate::forward_allocator!(@fn |$s| $inner; backend() -> &::std::sync::Arc<dyn $crate::Backend>);
    };
    (@sig |$s:ident| $inner:expr; device) => { $crate::forward_allocator!(@fn |$s| $inner; device() -> $crate::DeviceId); };
    (@sig |$s:ident| $inner:expr; allocate) => {
        $crate::forward_allocator!(@fn |$s| $inner; allocate(req: $crate::Request) -> $crate::Result<$crate::Block>);
    };
    (@sig |$s:ident| $inner:expr; deallocate) => {
        $crate::forward_allocator!(@fn |$s| $inner; deallocate(block: $crate::Block, stream: $crate::StreamId) -> $crate::Result<()>);
    };
    (@sig |$s:ident| $inner:expr; record_stream) => {
        $crate::forward_allocator!(@fn |$s| $inner; record_stream(block: &$crate::Block, stream: $crate::StreamId) -> $crate::Result<()>);
    };
    (@sig |$s:ident| $inner:expr; stats) => { $crate::forward_allocator!(@fn |$s| $inner; stats() -> $crate::Stats); };
    (@sig |$s:ident| $inner:expr; trim) => { $crate::forward_allocator!(@fn |$s| $inner; trim() -> $crate::Result<usize>); };
    (@sig |$s:ident| $inner:expr; parts) => { $crate::forward_allocator!(@fn |$s| $inner; parts() -> $crate::Parts); };
    (@sig |$s:ident| $inner:expr; reuse) => { $crate::forward_allocator!(@fn |$s| $inner; reuse() -> $crate::Reuse); };
    (@sig |$s:ident| $inner:expr; reset) => { $crate::forward_allocator!(@fn |$s| $inner; reset() -> $crate::Result<()>); };
    (@fn |$s:ident| $inner:expr; $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty) => {
        #[inline]
        fn $name(&self, $($arg: $ty),*) -> $ret {
            let $s = self;
            $crate::Allocator::$name($inner, $($arg),*)
        }
    };
}

impl<A: Allocator + ?Sized> Allocator for Arc<A> {
    forward_allocator!(|a| &**a; name, backend, device, allocate, deallocate, record_stream,
        stats, trim, parts, reuse, reset);
}

impl<A: Allocator + ?Sized> Allocator for Box<A> {
    forward_allocator!(|a| &**a; name, backend, device, allocate, deallocate, record_stream,
        stats, trim, parts, reuse, reset);
}

/// A pool that serves one stream: the part each strategy writes.
///
/// A pool knows nothing of streams or events: [`StreamOrdered`](crate::StreamOrdered)
/// gives each stream its own pool and holds back frees that must wait for other
/// streams, so a block freed into a pool may be reused by that pool at once.
///
/// Rules for implementors:
/// - `allocate` serves `req.effective_size()` at `req.effective_align()`, fills every
///   field of the [`Block`] (`stream` from the request, `device` from the backend) and
///   returns [`Error::OutOfMemory`](crate::Error::OutOfMemory) or a backend
///   out-of-memory error when memory runs out, leaving the pool as it was.
/// - `deallocate` checks that the block is one it handed out and still live, in O(1)
///   where it can, and returns [`Error::NotOwned`](crate::Error::NotOwned) or
///   [`Error::DoubleFree`](crate::Error::DoubleFree) otherwise, changing nothing.
/// - `stats` counts allocations, frees, bytes and backend calls; `failures` is
///   counted by the layer above and may be left at zero.
/// - `trim` gives back every byte not under a live block; after all blocks are
///   freed and `trim` runs, the pool holds nothing from the backend.
/// - Dropping a pool gives everything back to the backend, live blocks included.
/// - Metadata stays on the host: a pool never reads or writes the memory it manages.
pub trait Pool: Send + Sync + 'static {
    /// Allocate a block.
    fn allocate(&self, req: &Request) -> Result<Block>;
    /// [`allocate`](Self::allocate) for a router: the block comes tagged with
    /// `route` (below [`HANDLE_ROUTES`](crate::HANDLE_ROUTES)) in the bits of its
    /// handle above [`POOL_HANDLE_BITS`](crate::POOL_HANDLE_BITS), as
    /// [`Block::routed`] tags it. The default allocates and tags the block. A route
    /// out of range fails the request before anything is allocated; a block whose
    /// handle uses those bits (which no pool's may) goes back to the pool and the
    /// request fails ([`Error::Corrupted`](crate::Error::Corrupted)). A pool may override it
    /// to tag the block as it makes it, which saves the router a copy of a block
    /// just written (a load of it waits for the callee's stores to land).
    fn allocate_routed(&self, req: &Request, route: u64) -> Result<Block> {
        crate::types::route_tag(route)?;
        match self.allocate(req) {
            Ok(b) if b.handle > crate::POOL_HANDLE_MASK => {
                let _ = self.deallocate(&b);
                b.routed(route)
            }
            Ok(b) => b.routed(route),
            err => err,
        }
    }
    /// Free a block this pool handed out.
    fn deallocate(&self, block: &Block) -> Result<()>;
    /// Free a block this pool handed out through
    /// [`allocate_routed`](Self::allocate_routed), still tagged with its route (the
    /// router checked the tag). The default clears the router's bits and frees the
    /// copy; a pool whose checks of a handle read only its own bits may override it
    /// to free the block as it is, which saves the router that copy of a block the
    /// caller may have just written.
    fn deallocate_routed(&self, block: &Block) -> Result<()> {
        self.deallocate(&block.unrouted())
    }
    /// Check, without freeing it, that `block` is live in this pool.
    fn check(&self, block: &Block) -> Result<()>;
    /// A snapshot of the statistics.
    fn stats(&self) -> Stats;
    /// Give cached memory back; returns the bytes released.
    fn trim(&self) -> Result<usize>;
    /// One line on where this pool's unused memory sits, for out-of-memory messages.
    fn describe_cache(&self) -> String {
        String::new()
    }
    /// The statistics by part (see [`Allocator::parts`]).
    fn parts(&self) -> Parts {
        Parts::Whole
    }
}

impl<P: Pool + ?Sized> Pool for Box<P> {
    fn allocate(&self, req: &Request) -> Result<Block> {
        (**self).allocate(req)
    }
    fn allocate_routed(&self, req: &Request, route: u64) -> Result<Block> {
        (**self).allocate_routed(req, route)
    }
    fn deallocate(&self, block: &Block) -> Result<()> {
        (**self).deallocate(block)
    }
    fn deallocate_routed(&self, block: &Block) -> Result<()> {
        (**self).deallocate_routed(block)
    }
    fn check(&self, block: &Block) -> Result<()> {
        (**self).check(block)
    }
    fn stats(&self) -> Stats {
        (**self).stats()
    }
    fn trim(&self) -> Result<usize> {
        (**self).trim()
    }
    fn describe_cache(&self) -> String {
        (**self).describe_cache()
    }
    fn parts(&self) -> Parts {
        (**self).parts()
    }
}
