//! [`TlsfPool`]: the single-stream pool, and [`tlsf`], the allocator made of them.

use crate::config::{TlsfConfig, TlsfMode};
use crate::index::{Index, State};
use crate::span::Span;
use devpool_core::{
    Backend, Block, Counters, DeviceId, DevicePtr, Error, Gauge, IntoBackend, Pool, Request,
    Result, SpinLock, Stats, StreamOrdered, Tally,
};
use devpool_vm::{CachePolicy, PageLayer};
use std::sync::Arc;

/// Blocks of a class looked at per search.
const SCAN: usize = 8;
/// Bits of a node's generation kept in a handle, above the node's 32: the handle
/// fills the pool's bits of the core contract and leaves the router's clear.
const GEN_BITS: u32 = 30;
const _: () = assert!(32 + GEN_BITS == devpool_core::POOL_HANDLE_BITS);
const GEN_MASK: u64 = (1 << GEN_BITS) - 1;

/// The state behind the pool's lock.
pub(crate) struct Inner {
    pub index: Index,
    pub spans: Vec<Option<Span>>,
    /// Ranges, pages and the unmapping policy (virtual mode).
    pub vm: PageLayer,
    /// The cache bound of wholly free regions (region mode).
    pub policy: CachePolicy,
    /// Requested bytes, granted bytes and blocks, live, with their peaks; and counts
    /// of allocations and frees.
    pub tally: Tally,
    /// A block freed by the last call whose index release waits (virtual mode;
    /// crate::parked).
    pub parked: Option<u32>,
    /// The granted bytes of the block the last call freed (0 when the last call was
    /// an allocation), and whether the last allocation came right after a free of
    /// its own size: a free parks only then (crate::parked).
    pub last_free: u64,
    pub pairing: bool,
    /// What placement searches found about free blocks (virtual mode; crate::memo).
    pub memo: crate::memo::Memo,
}

/// A TLSF pool serving one stream. See the [crate docs](crate).
///
/// ```
/// use devpool_core::{Backend, Pool, Request};
/// use devpool_testing::MockBackend;
/// use devpool_tlsf::{TlsfConfig, TlsfPool};
/// let mock = MockBackend::shared();
/// let pool = TlsfPool::new(mock.clone(), TlsfConfig::default().map_batch_pages(1));
/// let a = pool.allocate(&Request::new(3 << 20)).unwrap();
/// let b = pool.allocate(&Request::new(1000)).unwrap();
/// assert_eq!(b.ptr.0, a.ptr.0 + a.size as u64, "packed contiguously");
/// assert_eq!(pool.detail().pages.mapped_pages, 2, "two 2 MiB pages back 3 MiB + 1000 B");
/// pool.deallocate(&a).unwrap();
/// pool.deallocate(&b).unwrap();
/// pool.trim().unwrap();
/// assert_eq!(mock.counters().bytes_in_use.current, 0);
/// ```
pub struct TlsfPool {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) cfg: TlsfConfig,
    pub(crate) is_virtual: bool,
    /// Virtual mode was asked of a backend without virtual memory.
    unsupported: bool,
    pub(crate) page: u64,
    pub(crate) device: DeviceId,
    pub(crate) counters: Counters,
    /// A pool serves one stream, so its lock is rarely contended: a spin lock takes
    /// one atomic swap and gives it back with a plain store (as the buddy pool's).
    pub(crate) inner: SpinLock<Inner>,
}

/// The TLSF allocator over `backend`: one [`TlsfPool`] per stream, named
/// `"tlsf-virtual"` or `"tlsf-region"` after the mode it resolves to.
///
/// ```
/// use devpool_core::{Allocator, Backend};
/// use devpool_testing::MockBackend;
/// use devpool_tlsf::{tlsf, TlsfConfig};
/// let mock = MockBackend::shared();
/// let a = tlsf(mock.clone(), TlsfConfig::default().map_batch_pages(1));
/// assert_eq!(a.name(), "tlsf-virtual");
/// let b = a.alloc(100 << 20).unwrap();
/// assert_eq!(a.stats().reserved_bytes.current, 100 << 20); // 50 pages of 2 MiB
/// assert_eq!(mock.counters().map_calls, 1);
/// a.free(b).unwrap();
/// a.trim().unwrap();
/// assert_eq!(mock.counters().bytes_in_use.current, 0);
/// ```
pub fn tlsf(backend: impl IntoBackend, cfg: TlsfConfig) -> StreamOrdered<TlsfPool> {
    let backend = backend.into_backend();
    let virt = resolve(&*backend, cfg.mode);
    let name = if virt { "tlsf-virtual" } else { "tlsf-region" };
    let b = backend.clone();
    let once = crate::ReserveOnce::default();
    StreamOrdered::new(name, backend, move |_| {
        let mut c = cfg.clone();
        c.pages = once.settings(&cfg.pages);
        TlsfPool::new(b.clone(), c)
    })
}

fn resolve(backend: &dyn Backend, mode: TlsfMode) -> bool {
    match mode {
        TlsfMode::Virtual => true,
        TlsfMode::Region => false,
        TlsfMode::Auto => backend.supports_virtual(),
    }
}

impl TlsfPool {
    /// A pool over `backend`. Nothing is taken from the backend until the first
    /// allocation. Settings out of range are brought into range (see [`TlsfConfig`]);
    /// [`TlsfMode::Virtual`] on a backend without virtual memory makes every allocation
    /// fail with [`Error::Unsupported`].
    pub fn new(backend: impl IntoBackend, cfg: TlsfConfig) -> Self {
        let backend = backend.into_backend();
        let page = backend.page_size();
        let cfg = cfg.normalized(page);
        let is_virtual = resolve(&*backend, cfg.mode);
        TlsfPool {
            device: backend.device(),
            is_virtual,
            unsupported: is_virtual && !backend.supports_virtual(),
            page: page as u64,
            counters: Counters::default(),
            inner: SpinLock::new(Inner {
                index: Index::new(cfg.granule as u64, SCAN),
                spans: Vec::new(),
                vm: PageLayer::new(backend.clone(), cfg.pages.clone()),
                policy: CachePolicy::new(&cfg.pages),
                tally: Tally::default(),
                parked: None,
                last_free: 0,
                pairing: false,
                memo: crate::memo::Memo::default(),
            }),
            cfg,
            backend,
        }
    }

    /// The settings in force (after bringing them into range).
    pub fn config(&self) -> &TlsfConfig {
        &self.cfg
    }

    /// The mode in force: [`TlsfMode::Virtual`] or [`TlsfMode::Region`].
    pub fn mode(&self) -> TlsfMode {
        if self.is_virtual {
            TlsfMode::Virtual
        } else {
            TlsfMode::Region
        }
    }

    /// Check the pool's internal consistency (for tests): every link, count and page.
    pub fn verify(&self) -> std::result::Result<(), String> {
        let mut g = self.inner.lock();
        Self::settle(&mut g);
        g.vm.finish_deferred();
        g.index.verify()?;
        self.verify_pages(&g)
    }

    fn lookup(&self, g: &Inner, block: &Block) -> Result<u32> {
        let i = (block.handle & 0xFFFF_FFFF) as u32;
        let gen = (block.handle >> 32) & GEN_MASK;
        if let Some(n) = g.index.get(i) {
            if n.state == State::Used && n.gen as u64 & GEN_MASK == gen {
                if n.addr == block.ptr.0 && n.size == block.size as u64 {
                    return Ok(i);
                }
                return Err(Error::NotOwned { ptr: block.ptr });
            }
        }
        if self.owns(g, block.ptr.0) {
            Err(Error::DoubleFree { ptr: block.ptr })
        } else {
            Err(Error::NotOwned { ptr: block.ptr })
        }
    }

    /// No free block fits `need` bytes: take a new span and find one there (`size`:
    /// the request's, for the error).
    #[cold]
    #[inline(never)]
    fn grow_and_find(&self, g: &mut Inner, need: u64, size: usize) -> Result<u32> {
        self.grow(g, need)?;
        g.index.find(need).ok_or_else(|| {
            Error::OutOfMemory(Box::new(devpool_core::OomInfo {
                requested: size,
                ..Default::default()
            }))
        })
    }

    /// Region mode: count one allocation or free; at the end of a window, bring the
    /// wholly free regions within the bound. (In virtual mode the page layer counts
    /// its own.)
    #[inline]
    fn tick(&self, g: &mut Inner) {
        if !self.is_virtual && g.policy.tick() {
            // A failing release leaves the regions held and counted: nothing to undo.
            let _ = self.enforce_regions(g, 0);
        }
    }

    /// Device bytes held now and at peak.
    pub(crate) fn reserved(&self, g: &Inner) -> Gauge {
        if self.is_virtual {
            g.vm.held()
        } else {
            self.counters.snapshot().reserved_bytes
        }
    }
}

impl TlsfPool {
    /// [`Pool::allocate`] with `tag`, a router's bits, set in the block's handle.
    /// One body for both entry points, which jump to it: two inlined copies would
    /// leave its own helpers out of line.
    #[inline(never)]
    fn allocate_tagged(&self, req: &Request, tag: u64) -> Result<Block> {
        let align = req.effective_align()?;
        if align > self.page as usize {
            return Err(Error::InvalidAlignment { align: req.align });
        }
        if self.unsupported {
            return Err(Error::Unsupported(
                "virtual mode on a backend without virtual memory",
            ));
        }
        let (size, need) = req.padded(self.cfg.granule, align)?;
        let need = need as u64;
        let mut g = self.inner.lock();
        g.pairing = g.last_free == size as u64;
        g.last_free = 0;
        if g.parked.is_some() {
            if let Some((i, addr)) = self.take_parked(&mut g, size as u64, need, align as u64) {
                // What the long way would give: the same node and address, its
                // generation bumped. (The tick is region mode's; nothing parks there.)
                let gen = g.index.reuse(i, req.size as u64) as u64 & GEN_MASK;
                g.tally.on_alloc(req.size as u64, size as u64);
                drop(g);
                return Ok(req.granted(
                    DevicePtr(addr),
                    size,
                    self.device,
                    tag | gen << 32 | i as u64,
                ));
            }
        }
        let i = match g.index.find(need) {
            Some(i) => i,
            None => self.grow_and_find(&mut g, need, req.size)?,
        };
        let size = size as u64;
        let (i, addr) = if self.is_virtual {
            self.place(&mut g, i, need, size, align as u64)?
        } else {
            let n = g.index.node(i);
            // Spans end far below the top of the address space: no overflow.
            let at = (n.addr + align as u64 - 1) & !(align as u64 - 1);
            g.policy.on_alloc(size);
            (i, at)
        };
        let pad = addr - g.index.node(i).addr;
        let i = g.index.carve(i, pad, size, req.size as u64);
        let gen = g.index.node(i).gen as u64 & GEN_MASK;
        g.tally.on_alloc(req.size as u64, size);
        self.tick(&mut g);
        drop(g);
        Ok(req.granted(
            DevicePtr(addr),
            size as usize,
            self.device,
            tag | gen << 32 | i as u64,
        ))
    }
}

impl Pool for TlsfPool {
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

    /// The tagged block as it is: [`lookup`](Self::lookup) reads the node and the
    /// generation from the handle's low 62 bits only.
    #[inline]
    fn deallocate_routed(&self, block: &Block) -> Result<()> {
        self.deallocate(block)
    }

    fn deallocate(&self, block: &Block) -> Result<()> {
        let mut g = self.inner.lock();
        Self::settle(&mut g);
        let i = self.lookup(&g, block)?;
        let n = *g.index.node(i);
        if self.is_virtual && g.pairing {
            // The index's release waits for the next call (crate::parked).
            g.parked = Some(i);
        } else {
            g.index.release(i);
        }
        g.last_free = n.size;
        if self.is_virtual {
            self.unmapped_by_free(&mut g, n.span, (n.addr, n.addr + n.size), block.stream);
        } else {
            g.policy.on_free(n.size);
        }
        g.tally.on_free(n.requested, n.size);
        self.tick(&mut g);
        Ok(())
    }

    fn check(&self, block: &Block) -> Result<()> {
        let mut g = self.inner.lock();
        Self::settle(&mut g);
        self.lookup(&g, block).map(|_| ())
    }

    fn stats(&self) -> Stats {
        let mut g = self.inner.lock();
        Self::settle(&mut g);
        let c = self.counters.snapshot();
        let mut s = Stats {
            reserved_bytes: self.reserved(&g),
            backend_calls: c.backend_calls + g.vm.backend_calls(),
            ..c
        };
        g.tally.fill(&mut s);
        s
    }

    fn trim(&self) -> Result<usize> {
        let mut g = self.inner.lock();
        Self::settle(&mut g);
        let mut released = 0;
        if self.is_virtual {
            released += g.vm.trim()?;
        }
        released += self.release_free_spans(&mut g, usize::MAX, true)?;
        Ok(released)
    }

    fn describe_cache(&self) -> String {
        self.detail().to_string()
    }
}

impl Drop for TlsfPool {
    fn drop(&mut self) {
        // Ranges go with the page layer; regions are given back here.
        let g = self.inner.get_mut();
        for sp in g.spans.drain(..).flatten() {
            if sp.range.is_none() {
                let _ = self
                    .backend
                    .free_region(DevicePtr(sp.base), sp.size as usize);
            }
        }
    }
}
