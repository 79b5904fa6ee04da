//! The router itself.

use crate::config::{HybridConfig, LargeStrategy};
use crate::slabs::SlabSource;
use devpool_buddy::BuddyPool;
use devpool_core::{
    Block, DirectPool, Error, IntoBackend, Parts, Pool, Request, Result, RouteStats, Stats,
    StreamId, StreamOrdered,
};
use devpool_slab::SlabPool;
use devpool_tlsf::TlsfPool;
use serde::Serialize;
use std::sync::Arc;

/// A route of the hybrid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Route {
    /// The slab.
    Small = 0,
    /// The large-block strategy.
    Large = 1,
    /// One backend region per block.
    Huge = 2,
}

impl Route {
    /// The route's name in [`Parts::Routes`]: `small`, `large` or `huge`.
    pub fn name(self) -> &'static str {
        match self {
            Route::Small => "small",
            Route::Large => "large",
            Route::Huge => "huge",
        }
    }
}

/// The large route's pool.
pub(crate) enum Large {
    Tlsf(Box<TlsfPool>),
    Buddy(Box<BuddyPool>),
}

impl Large {
    #[inline]
    pub(crate) fn pool(&self) -> &dyn Pool {
        match self {
            Large::Tlsf(p) => &**p,
            Large::Buddy(p) => &**p,
        }
    }
}

/// One stream's hybrid pool: a slab, a large-block pool and a direct pool.
pub struct HybridPool {
    small_max: usize,
    /// Requests of 1 to this many bytes at an alignment every slab slot has go to
    /// the slab with nothing to check after: it cannot refuse their size or
    /// alignment. `small_max`, or the slab's largest class if that is smaller.
    small_plain_max: usize,
    huge_min: usize,
    // Dropped first: its slabs go back to the large route.
    slab: SlabPool,
    /// Where the slabs come from, when they are blocks of the large route.
    source: Option<Arc<SlabSource>>,
    large: Arc<Large>,
    huge: DirectPool,
}

impl HybridPool {
    /// A hybrid pool over `backend`, for blocks of the default stream.
    pub fn new(backend: impl IntoBackend, cfg: HybridConfig) -> Self {
        Self::for_stream(backend, cfg, StreamId::DEFAULT)
    }

    /// A hybrid pool over `backend` for the blocks of `stream` (the stream the large
    /// route's freed pages wait for before they are unmapped).
    pub fn for_stream(backend: impl IntoBackend, cfg: HybridConfig, stream: StreamId) -> Self {
        let backend = backend.into_backend();
        let large = Arc::new(match cfg.large {
            LargeStrategy::Tlsf(c) => Large::Tlsf(Box::new(TlsfPool::new(backend.clone(), c))),
            LargeStrategy::Buddy(c) => Large::Buddy(Box::new(BuddyPool::new(backend.clone(), c))),
        });
        let (slab, source) = if cfg.slabs_from_large {
            // Slabs aligned to the largest power of two the small route serves, at
            // most a page: what its classes need.
            let align = cfg
                .small_max
                .max(devpool_core::MIN_ALIGN)
                .next_power_of_two()
                .min(backend.granularity().max(devpool_core::MIN_ALIGN));
            let src = Arc::new(SlabSource::new(
                large.clone(),
                backend.clone(),
                stream,
                align,
            ));
            (SlabPool::new(src.clone(), cfg.slab), Some(src))
        } else {
            (SlabPool::new(backend.clone(), cfg.slab), None)
        };
        let largest_class = slab.class_sizes().last().copied().unwrap_or(0);
        HybridPool {
            small_max: cfg.small_max,
            small_plain_max: cfg.small_max.min(largest_class),
            huge_min: cfg.huge_min,
            slab,
            source,
            large,
            huge: DirectPool::new(backend),
        }
    }

    /// The route a request of `size` bytes takes.
    #[inline]
    pub fn route(&self, size: usize) -> Route {
        if size <= self.small_max {
            Route::Small
        } else if size < self.huge_min {
            Route::Large
        } else {
            Route::Huge
        }
    }

    #[inline]
    fn pool(&self, r: Route) -> &dyn Pool {
        match r {
            Route::Small => &self.slab,
            Route::Large => self.large.pool(),
            Route::Huge => &self.huge,
        }
    }

    /// Statistics of one route. When slabs come from the large route, the small
    /// route's reserved bytes are its slabs, and the large route's are its own
    /// blocks' pages without them: the two add up to what the backend holds.
    pub fn stats_of(&self, r: Route) -> Stats {
        match (r, &self.source) {
            (Route::Small, Some(_)) => Stats {
                backend_calls: 0,
                ..self.slab.stats()
            },
            (Route::Large, Some(src)) => src.large_stats().0,
            _ => self.pool(r).stats(),
        }
    }

    #[inline]
    fn split(block: &Block) -> Result<(Route, Block)> {
        let route = match block.route() {
            0 => Route::Small,
            1 => Route::Large,
            2 => Route::Huge,
            _ => return Err(Error::NotOwned { ptr: block.ptr }),
        };
        Ok((route, block.unrouted()))
    }
}

impl Pool for HybridPool {
    #[inline]
    fn allocate(&self, req: &Request) -> Result<Block> {
        if req.size.wrapping_sub(1) < self.small_plain_max
            && req.align.is_power_of_two()
            && req.align <= devpool_slab::MIN_SLOT
        {
            // The slab serves it or fails with an error of its own (out of memory):
            // its result goes out as it is, with nothing read back.
            return self.slab.allocate(req);
        }
        self.allocate_by_route(req)
    }

    #[inline]
    fn deallocate(&self, block: &Block) -> Result<()> {
        if block.route() == Route::Small as u64 {
            // The small route's tag is zero: the block goes to the slab as it is.
            return self.slab.deallocate(block);
        }
        match block.route() {
            // The large pool is named, not reached through `&dyn Pool`: a call the
            // compiler sees, of a block passed on as it is.
            1 => match &*self.large {
                Large::Tlsf(p) => p.deallocate_routed(block),
                Large::Buddy(p) => p.deallocate_routed(block),
            },
            2 => self.huge.deallocate_routed(block),
            _ => Err(Error::NotOwned { ptr: block.ptr }),
        }
    }

    fn check(&self, block: &Block) -> Result<()> {
        let (route, inner) = Self::split(block)?;
        self.pool(route).check(&inner)
    }

    fn stats(&self) -> Stats {
        let mut s = self.stats_of(Route::Small);
        s.merge(&self.stats_of(Route::Large));
        s.merge(&self.huge.stats());
        s
    }

    fn trim(&self) -> Result<usize> {
        // Slabs of the large route go back to it: only its own trim reaches the
        // backend.
        let slabs = self.slab.trim()?;
        let own = if self.source.is_some() { 0 } else { slabs };
        Ok(own + self.large.pool().trim()? + self.huge.trim()?)
    }

    fn parts(&self) -> Parts {
        Parts::Routes(
            [Route::Small, Route::Large, Route::Huge]
                .into_iter()
                .map(|r| RouteStats {
                    route: r.name(),
                    stats: self.stats_of(r),
                })
                .collect(),
        )
    }

    fn describe_cache(&self) -> String {
        let parts = [
            ("small (slab)", &self.slab as &dyn Pool),
            ("large", self.large.pool()),
        ];
        let (name, p) = parts
            .iter()
            .max_by_key(|(_, p)| p.stats().cached_bytes())
            .expect("two routes");
        let d = p.describe_cache();
        format!(
            "route {name} holds {} unused{}{d}",
            devpool_core::human_bytes(p.stats().cached_bytes()),
            if d.is_empty() { "" } else { ": " }
        )
    }
}

impl HybridPool {
    /// Every request but a plain small one: a function of its own, so that the
    /// plain small route saves no registers and jumps straight to the slab.
    #[inline(never)]
    fn allocate_by_route(&self, req: &Request) -> Result<Block> {
        if req.size.wrapping_sub(1) < self.small_max {
            // A request of 1 to `small_max` bytes. The small route's tag is zero: the
            // slab's block goes out as it is, with no copy (copying a block the callee
            // just wrote costs more than routing). A slab that cannot honour an
            // alignment hands the request on.
            let r = self.slab.allocate(req);
            if let Err(Error::InvalidAlignment { .. } | Error::TooLarge { .. }) = r {
                return self.allocate_on(Route::Large, req);
            }
            return r;
        }
        match self.route(req.effective_size()) {
            Route::Large => match &*self.large {
                Large::Tlsf(p) => p.allocate_routed(req, Route::Large as u64),
                Large::Buddy(p) => p.allocate_routed(req, Route::Large as u64),
            },
            r => self.allocate_on(r, req),
        }
    }

    /// Allocate on `route` and tag the block with it: the pool tags it as it
    /// makes it ([`Pool::allocate_routed`]), so the block goes out as written,
    /// with no copy (a copy of a block the callee has just written waits for its
    /// stores). A pool that used the router's bits broke the contract: its block
    /// goes back and the request fails (the trait's default checks; the handles of
    /// TLSF and buddy leave those bits clear by a check when they compile).
    #[inline]
    fn allocate_on(&self, route: Route, req: &Request) -> Result<Block> {
        self.pool(route).allocate_routed(req, route as u64)
    }
}

/// The hybrid allocator over `backend`: one [`HybridPool`] per stream.
pub fn hybrid(backend: impl IntoBackend, cfg: HybridConfig) -> StreamOrdered<HybridPool> {
    let backend = backend.into_backend();
    let b = backend.clone();
    let once = devpool_tlsf::ReserveOnce::default();
    StreamOrdered::new("hybrid", backend, move |s| {
        let mut c = cfg.clone();
        match &mut c.large {
            crate::LargeStrategy::Tlsf(t) => t.pages = once.settings(&t.pages),
            crate::LargeStrategy::Buddy(u) => u.pages = once.settings(&u.pages),
        }
        HybridPool::for_stream(b.clone(), c, s)
    })
}
