//! `Pool::allocate_routed`, how the router tags a block with its route: every pool
//! that can serve a route hands out the block tagged as it would be by
//! `Block::routed`, takes back the untagged block, and a route that does not fit
//! fails the request with nothing lost. The default of the trait (the slab's and
//! the direct pool's) refuses a pool that uses the router's bits and gives its
//! block back.
use devpool_buddy::{BuddyConfig, BuddyPool};
use devpool_core::{
    Block, DevicePtr, DirectPool, Error, Pool, Request, Stats, POOL_HANDLE_BITS, POOL_HANDLE_MASK,
};
use devpool_slab::{SlabConfig, SlabPool};
use devpool_testing::MockBackend;
use devpool_tlsf::{TlsfConfig, TlsfMode, TlsfPool};
use std::sync::atomic::{AtomicU64, Ordering};

fn pools(mock: &std::sync::Arc<MockBackend>) -> Vec<(&'static str, Box<dyn Pool>)> {
    vec![
        (
            "tlsf-virtual",
            Box::new(TlsfPool::new(mock.clone(), TlsfConfig::default())),
        ),
        (
            "tlsf-region",
            Box::new(TlsfPool::new(
                mock.clone(),
                TlsfConfig::default().mode(TlsfMode::Region),
            )),
        ),
        (
            "buddy-virtual",
            Box::new(BuddyPool::new(mock.clone(), BuddyConfig::virtual_ranges())),
        ),
        (
            "buddy-region",
            Box::new(BuddyPool::new(mock.clone(), BuddyConfig::region())),
        ),
        (
            "slab",
            Box::new(SlabPool::new(mock.clone(), SlabConfig::default())),
        ),
        ("direct", Box::new(DirectPool::new(mock.clone()))),
    ]
}

#[test]
fn every_pool_tags_the_route_it_is_given() {
    let mock = MockBackend::shared();
    for (name, pool) in pools(&mock) {
        let size = if name == "slab" { 3000 } else { 3 << 20 };
        for route in 0..devpool_core::HANDLE_ROUTES {
            let req = Request::new(size);
            let b = pool
                .allocate_routed(&req, route)
                .unwrap_or_else(|e| panic!("{name}, route {route}: {e}"));
            assert_eq!(b.route(), route, "{name}");
            assert_eq!(b.handle >> POOL_HANDLE_BITS, route, "{name}");
            assert!(b.size >= size, "{name}: {b:?}");
            // The pool knows the block by its own handle, the router's bits cleared.
            let own = b.unrouted();
            pool.check(&own).unwrap_or_else(|e| panic!("{name}: {e}"));
            pool.deallocate(&own)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(pool.deallocate(&own).is_err(), "{name}: a second free");
        }
        assert_eq!(pool.stats().live_bytes.current, 0, "{name}");
    }
}

#[test]
fn a_route_that_does_not_fit_fails_and_allocates_nothing() {
    let mock = MockBackend::shared();
    for (name, pool) in pools(&mock) {
        let before = pool.stats();
        // The backend's own count of what it handed out, independent of the pool's.
        let held = devpool_core::Backend::counters(&*mock).bytes_in_use.current;
        match pool.allocate_routed(&Request::new(4096), devpool_core::HANDLE_ROUTES) {
            Err(Error::Corrupted { detail, .. }) => assert!(detail.contains("route"), "{detail}"),
            other => panic!("{name}: route 4 must be refused, got {other:?}"),
        }
        let now = devpool_core::Backend::counters(&*mock).bytes_in_use.current;
        assert_eq!(now, held, "{name}: no device memory taken");
        let after = pool.stats();
        assert_eq!(
            after.live_blocks.current, before.live_blocks.current,
            "{name}"
        );
        assert_eq!(after.allocations, before.allocations, "{name}");
    }
}

/// A pool that breaks the contract: its handles use the router's bits. It counts
/// its live blocks itself, the independent count the test reads.
#[derive(Default)]
struct Greedy {
    live: AtomicU64,
    handed: AtomicU64,
}

impl Pool for Greedy {
    fn allocate(&self, req: &Request) -> devpool_core::Result<Block> {
        self.live.fetch_add(1, Ordering::Relaxed);
        let n = self.handed.fetch_add(1, Ordering::Relaxed);
        Ok(req.granted(
            DevicePtr(0x1000 * (n + 1)),
            req.size,
            devpool_core::DeviceId(0),
            POOL_HANDLE_MASK + 1 + n,
        ))
    }
    fn deallocate(&self, _: &Block) -> devpool_core::Result<()> {
        self.live.fetch_sub(1, Ordering::Relaxed);
        Ok(())
    }
    fn check(&self, _: &Block) -> devpool_core::Result<()> {
        Ok(())
    }
    fn stats(&self) -> Stats {
        Stats::default()
    }
    fn trim(&self) -> devpool_core::Result<usize> {
        Ok(0)
    }
}

#[test]
fn the_default_refuses_a_pool_that_uses_the_router_bits_and_gives_its_block_back() {
    let pool = Greedy::default();
    for route in 0..devpool_core::HANDLE_ROUTES {
        match pool.allocate_routed(&Request::new(256), route) {
            Err(Error::Corrupted { detail, .. }) => {
                assert!(detail.contains("router"), "{detail}")
            }
            other => panic!("route {route}: must be refused, got {other:?}"),
        }
    }
    assert_eq!(
        pool.handed.load(Ordering::Relaxed),
        4,
        "each request reached the pool"
    );
    assert_eq!(
        pool.live.load(Ordering::Relaxed),
        0,
        "every block went back"
    );
}
