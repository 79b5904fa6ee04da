//! [`BuddyPool`]: the single-stream pool, and its allocate, free, trim and drop.

use crate::config::{ceil_log2, BuddyConfig, BuddyMode, Resolved};
use crate::span::{Inner, Span};
use crate::tree::{State, GEN_MASK};
use devpool_vm::PageLayer;

/// Spans a pool can hold.
const MAX_SPANS: usize = 4096;
use devpool_core::SpinLock;
use devpool_core::{
    Backend, BackendError, Block, Counters, DeviceId, DevicePtr, Error, Gauge, Pool, Request,
    Result, Stats,
};
use std::sync::Arc;

/// A buddy pool for one stream: power-of-two blocks from a minimum to a maximum order,
/// a free list per order, split on allocate, merged with the buddy on free.
///
/// Spans come from the backend as regions ([`BuddyMode::Region`]) or as reserved
/// virtual ranges of the page layer ([`BuddyMode::Virtual`]; see
/// [`devpool_vm`] for when pages are mapped and given back). All metadata lives on
/// the host.
///
/// Use it through [`buddy`](crate::buddy), which gives each stream its own pool.
///
/// ```
/// use devpool_buddy::{BuddyConfig, BuddyPool};
/// use devpool_core::{Pool, Request};
/// use devpool_testing::MockBackend;
/// let pool = BuddyPool::new(MockBackend::shared(), BuddyConfig::virtual_ranges());
/// let b = pool.allocate(&Request::new(3 << 20)).unwrap();
/// assert_eq!(b.size, 4 << 20, "two pages back 3 MiB");
/// assert_eq!(pool.detail().pages.mapped_pages, 2);
/// pool.deallocate(&b).unwrap();
/// assert_eq!(pool.detail().pages.unused_pages, 2, "kept mapped for the next block");
/// ```
pub struct BuddyPool {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) r: Resolved,
    pub(crate) page: usize,
    pub(crate) device: DeviceId,
    pub(crate) inner: SpinLock<Inner>,
    pub(crate) counters: Counters,
}

// A handle keeps to the pool's bits of the core contract and leaves the router's clear.
const _: () = assert!(32 + GEN_MASK.count_ones() <= devpool_core::POOL_HANDLE_BITS);

/// The handle of a block: its node and the node's generation.
#[inline]
fn encode(node: u32, gen: u32) -> u64 {
    (u64::from(gen) << 32) | u64::from(node)
}

#[inline]
fn decode(handle: u64) -> (u32, u32) {
    (handle as u32, (handle >> 32) as u32 & GEN_MASK)
}

impl BuddyPool {
    /// A pool over `backend` with settings `cfg` (`Auto` is resolved here).
    pub fn new(backend: impl devpool_core::IntoBackend, cfg: BuddyConfig) -> BuddyPool {
        let backend = backend.into_backend();
        let page = backend.granularity();
        let r = Resolved::new(&cfg, backend.supports_virtual(), page);
        let vm = PageLayer::new(backend.clone(), cfg.pages.clone());
        BuddyPool {
            device: backend.device(),
            page: 1 << r.page_order,
            inner: SpinLock::new(Inner::new(r.quick_depth, !r.virt, r.rounding, vm)),
            counters: Counters::default(),
            backend,
            r,
        }
    }

    /// The mode in use: [`BuddyMode::Region`] or [`BuddyMode::Virtual`].
    pub fn mode(&self) -> BuddyMode {
        self.r.mode()
    }

    /// The order serving `size` bytes at `align`.
    fn order_for(&self, req: &Request) -> Result<u32> {
        let align = req.effective_align()?;
        let size = req.effective_size();
        let max = 1usize << self.r.max_order;
        if align > max || (!self.r.virt && align > self.page) {
            return Err(Error::InvalidAlignment { align: req.align });
        }
        if size > max {
            return Err(Error::TooLarge {
                size: req.size,
                max,
            });
        }
        Ok(ceil_log2(size)
            .max(align.trailing_zeros())
            .max(self.r.min_order))
    }

    /// Bytes granted to a block of `order` serving `size` bytes.
    #[inline]
    pub(crate) fn granted(&self, order: u32, size: u64) -> u64 {
        self.r.rounding.granted(order, size)
    }

    /// Address space a live block of `order` keeps from others, at least: the whole
    /// block unless its tail is trimmed.
    #[inline]
    /// Device bytes a region span of `size` bytes holds, as the driver rounds it.
    fn held(&self, size: usize) -> usize {
        self.backend.region_bytes(size).unwrap_or(size)
    }

    fn span(&self, order: u32) -> u64 {
        if self.r.rounding.trims() {
            0
        } else {
            1 << order
        }
    }

    /// The live node behind `block`, or the error a free of it gets.
    fn live_node(&self, g: &Inner, block: &Block) -> Result<u32> {
        let (i, gen) = decode(block.handle);
        let Some(n) = g.tree.get(i) else {
            return Err(Error::NotOwned { ptr: block.ptr });
        };
        if n.gen == gen && n.addr == block.ptr.0 {
            if matches!(n.state, State::Live | State::Head) {
                let size = n.requested.max(1);
                if self.granted(n.order.into(), size) == block.size as u64 {
                    return Ok(i);
                }
            } else {
                return Err(Error::DoubleFree { ptr: block.ptr });
            }
        } else if n.gen != gen && g.span_of(block.ptr.0).is_some() {
            // The node moved on since this block was handed out: it was freed.
            return Err(Error::DoubleFree { ptr: block.ptr });
        }
        Err(Error::NotOwned { ptr: block.ptr })
    }

    /// Add an span for a block of `order`; returns its root node, taken.
    pub(crate) fn grow(&self, g: &mut Inner, order: u32) -> Result<u32> {
        if g.spans.len() >= MAX_SPANS && g.spans.iter().all(Option::is_some) {
            return Err(Error::Limit(format!(
                "a buddy pool holds at most {MAX_SPANS} spans"
            )));
        }
        let order_a = order.max(self.r.span_order);
        let (base, order_a, range) = if self.r.virt {
            if order > self.r.span_order {
                // Never reserve more than the device could back.
                let (free, total) = self.backend.mem_info()?;
                if (1u64 << order) / 2 >= total {
                    return Err(BackendError::OutOfMemory {
                        requested: 1 << order,
                        free,
                        total,
                    }
                    .into());
                }
            }
            let size = 1usize << order_a;
            let r = g.vm.reserve(size, size)?;
            (DevicePtr(g.vm.base(r)), order_a, Some(r))
        } else {
            let base = match self.backend.alloc_region(1 << order_a) {
                Ok(p) => (p, order_a),
                Err(BackendError::OutOfMemory { .. }) if order_a > order => {
                    (self.backend.alloc_region(1 << order)?, order)
                }
                Err(e) => return Err(e.into()),
            };
            self.counters.on_reserve(self.held(1 << base.1));
            (base.0, base.1, None)
        };
        let idx = g.add_span(Span {
            base: base.0,
            order: order_a,
            root: crate::tree::NIL,
            range,
        });
        let root = g.tree.add_root(base.0, order_a, idx);
        g.span_mut(idx).root = root;
        g.tree.unlink(root);
        Ok(root)
    }

    /// Find or make a block of `order` for `size` granted bytes, backed, taken from
    /// the lists.
    fn place(&self, g: &mut Inner, order: u32, size: u64) -> Result<u32> {
        let i = match self.find(g, order, size) {
            Some(i) => i,
            None => {
                let again = if g.tree.has_quick() {
                    g.tree.flush_quick();
                    self.find(g, order, size)
                } else {
                    None
                };
                match again {
                    Some(i) => i,
                    None => {
                        let root = self.grow(g, order)?;
                        self.descend(g, root, order, size)
                    }
                }
            }
        };
        if self.r.virt {
            if let Err(e) = self.back(g, i, size) {
                g.tree.merge(i);
                return Err(e);
            }
        }
        Ok(i)
    }

    /// Give back every wholly free span; returns the bytes released.
    fn release_free_spans(&self, g: &mut Inner) -> Result<usize> {
        let mut released = 0;
        let mut first_err = None;
        for idx in 0..g.spans.len() {
            let Some(Some(a)) = g.spans.get(idx) else {
                continue;
            };
            if g.tree.node(a.root).state != State::Free {
                continue;
            }
            let (base, size, root) = (DevicePtr(a.base), a.size() as usize, a.root);
            let res = match a.range {
                Some(r) => match g.vm.unreserve(r) {
                    Ok(true) => Ok(()),
                    Ok(false) => continue,
                    Err(e) => Err(e),
                },
                None => self
                    .backend
                    .free_region(base, size)
                    .map(|_| {
                        self.counters.on_release(self.held(size));
                        released += self.held(size);
                    })
                    .map_err(Error::from),
            };
            match res {
                Ok(()) => {
                    g.tree.remove_root(root);
                    g.remove_span(idx as u32);
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(released),
        }
    }

    /// Device bytes held now and at peak.
    fn reserved(&self, g: &Inner) -> Gauge {
        if self.r.virt {
            g.vm.held()
        } else {
            self.counters.snapshot().reserved_bytes
        }
    }

    /// Merge every freed block kept unmerged with its buddies (what `trim` does first).
    pub fn coalesce(&self) {
        self.inner.lock().tree.flush_quick();
    }

    /// Check every internal invariant: the tree, the free lists, the page bitmaps and
    /// counts, and the byte totals. For tests; returns what is wrong.
    pub fn verify(&self) -> std::result::Result<(), String> {
        let mut g = self.inner.lock();
        g.vm.finish_deferred();
        let roots: Vec<u32> = g.spans.iter().flatten().map(|a| a.root).collect();
        g.tree.verify(&roots)?;
        if self.r.virt {
            self.verify_pages(&g)?;
        }
        let held: u64 = if self.r.virt {
            let d = g.vm.detail();
            (d.mapped_pages - d.moved_pages) * self.page as u64
        } else {
            g.spans
                .iter()
                .flatten()
                .map(|a| self.held(a.size() as usize) as u64)
                .sum()
        };
        let reserved = self.reserved(&g).current;
        if reserved != held {
            return Err(format!(
                "counters say {reserved} reserved; the pool holds {held}"
            ));
        }
        Ok(())
    }
}

impl BuddyPool {
    /// [`Pool::allocate`] with `tag`, a router's bits, set in the block's handle.
    /// One body for both entry points, which jump to it: two inlined copies would
    /// leave its own helpers out of line.
    #[inline(never)]
    fn allocate_tagged(&self, req: &Request, tag: u64) -> Result<Block> {
        let order = self.order_for(req)?;
        let size = req.effective_size() as u64;
        let granted = self.granted(order, size);
        let mut g = self.inner.lock();
        let i = self.place(&mut g, order, granted)?;
        let gen = g.tree.make_live(i, req.size as u64);
        if granted < 1 << order && self.r.rounding.trims() {
            g.tree.trim(i, granted);
        }
        let addr = g.tree.node(i).addr;
        g.tally.on_alloc(req.size as u64, granted);
        g.block_bytes += granted.max(self.span(order));
        drop(g);
        Ok(req.granted(
            DevicePtr(addr),
            granted as usize,
            self.device,
            tag | encode(i, gen),
        ))
    }
}

impl Pool for BuddyPool {
    #[inline]
    fn allocate(&self, req: &Request) -> Result<Block> {
        self.allocate_tagged(req, 0)
    }

    /// Tagged as the block is made: its handle (a node and 30 bits of generation)
    /// leaves the router's bits clear.
    #[inline]
    fn allocate_routed(&self, req: &Request, route: u64) -> Result<Block> {
        self.allocate_tagged(req, devpool_core::route_tag(route)?)
    }

    fn deallocate(&self, block: &Block) -> Result<()> {
        let mut g = self.inner.lock();
        let i = self.live_node(&g, block)?;
        let n = *g.tree.node(i);
        let requested = n.requested;
        let granted = self.granted(n.order.into(), requested.max(1));
        if self.r.virt {
            self.release_pages(&mut g, i, granted, block.stream);
        }
        g.tree.free_live(i);
        g.tally.on_free(requested, granted);
        g.block_bytes -= granted.max(self.span(n.order.into()));
        Ok(())
    }

    fn check(&self, block: &Block) -> Result<()> {
        self.live_node(&self.inner.lock(), block).map(|_| ())
    }

    fn stats(&self) -> Stats {
        let mut s = self.counters.snapshot();
        let g = self.inner.lock();
        g.tally.fill(&mut s);
        s.reserved_bytes = self.reserved(&g);
        s.backend_calls += g.vm.backend_calls();
        s
    }

    fn trim(&self) -> Result<usize> {
        let mut g = self.inner.lock();
        g.tree.flush_quick();
        let mut released = 0;
        if self.r.virt {
            released += g.vm.trim()?;
        }
        released += self.release_free_spans(&mut g)?;
        Ok(released)
    }

    fn describe_cache(&self) -> String {
        self.describe()
    }
}

impl Drop for BuddyPool {
    fn drop(&mut self) {
        // Ranges go with the page layer; regions are given back here.
        let g = self.inner.get_mut();
        for a in g.spans.iter().flatten() {
            if a.range.is_none() {
                let _ = self
                    .backend
                    .free_region(DevicePtr(a.base), a.size() as usize);
            }
        }
    }
}
