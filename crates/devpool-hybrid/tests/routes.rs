//! Routing: each size goes where the configuration says, frees go back to the route
//! that made the block, and per-route statistics match the test's own count.
use devpool_core::{Allocator, Backend, Block, Request, Rng, Stats};
use devpool_hybrid::{hybrid, HybridConfig, HybridPool, Route};
use devpool_testing::{MockBackend, MockConfig};
use proptest::prelude::*;

/// Each route's statistics, as the allocator reports its parts.
struct Routes {
    small: Stats,
    large: Stats,
    huge: Stats,
}

fn route_stats(alloc: &dyn Allocator) -> Routes {
    let parts = alloc.parts();
    let of = |r: Route| {
        *parts
            .route(r.name())
            .expect("the hybrid reports its routes")
    };
    Routes {
        small: of(Route::Small),
        large: of(Route::Large),
        huge: of(Route::Huge),
    }
}

#[test]
fn sizes_take_their_routes() {
    let cfg = HybridConfig {
        huge_min: 256 << 20,
        ..HybridConfig::training()
    };
    let small_max = cfg.small_max;
    let alloc = hybrid(MockBackend::shared(), cfg.clone());
    let pool = HybridPool::new(MockBackend::shared(), cfg);
    for (size, want) in [
        (1usize, Route::Small),
        (small_max, Route::Small),
        (small_max + 1, Route::Large),
        ((256 << 20) - 1, Route::Large),
        (256 << 20, Route::Huge),
    ] {
        assert_eq!(pool.route(size), want, "size {size}");
        let b = alloc.alloc(size).unwrap();
        let r = route_stats(&alloc);
        let on = |s: &devpool_core::Stats| s.live_blocks.current;
        let counts = [on(&r.small), on(&r.large), on(&r.huge)];
        assert_eq!(counts.iter().sum::<u64>(), 1);
        assert_eq!(counts[want as usize], 1, "size {size} went to {counts:?}");
        alloc.free(b).unwrap();
    }
}

#[test]
fn with_no_small_route_even_a_zero_byte_request_goes_large() {
    let cfg = HybridConfig {
        small_max: 0,
        ..HybridConfig::training()
    };
    let alloc = hybrid(MockBackend::shared(), cfg);
    for size in [0usize, 1, 4096] {
        let b = alloc.alloc(size).unwrap();
        let r = route_stats(&alloc);
        assert_eq!(r.small.live_blocks.current, 0, "size {size}");
        assert_eq!(r.large.live_blocks.current, 1, "size {size}");
        alloc.free(b).unwrap();
    }
}

#[test]
fn forged_route_bits_are_rejected() {
    // A block of each route (huge from 1 MiB here), tagged with every other route:
    // refused, and the block still frees once, and only once, under its own.
    let cfg = HybridConfig::training().huge_min(1 << 20);
    let mock = MockBackend::shared();
    let alloc = hybrid(mock.clone(), cfg);
    for size in [4096usize, 300 << 10, 4 << 20] {
        let b = alloc.alloc(size).unwrap();
        for route in (0..4u64).filter(|&r| r != b.route()) {
            let mut forged = b;
            forged.handle = (b.handle & ((1 << 62) - 1)) | (route << 62);
            assert!(alloc.free(forged).is_err(), "size {size}, route {route}");
        }
        alloc.free(b).unwrap();
        assert!(alloc.free(b).is_err(), "size {size}: a second free");
    }
    let s = alloc.stats();
    assert_eq!(s.live_blocks.current, 0);
    assert_eq!(s.frees, 3, "one free per block went through");
}

#[test]
fn large_alignment_from_the_small_route_is_served() {
    let alloc = hybrid(MockBackend::shared(), HybridConfig::training());
    let b = alloc
        .allocate(Request::new(1000).with_align(1 << 20))
        .unwrap();
    assert!(b.ptr.is_aligned(1 << 20));
    alloc.free(b).unwrap();
}

#[test]
fn without_virtual_memory_the_large_route_uses_regions() {
    let mock = MockBackend::shared_with(MockConfig::default().without_virtual());
    let alloc = hybrid(mock.clone(), HybridConfig::training());
    let b = alloc.alloc(100 << 20).unwrap();
    assert_eq!(mock.counters().pages_mapped, 0);
    assert!(mock.counters().region_allocs >= 1);
    alloc.free(b).unwrap();
    alloc.trim().unwrap();
    assert_eq!(mock.counters().bytes_in_use.current, 0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]
    #[test]
    fn route_stats_match_an_independent_count(seed in any::<u64>(), steps in 1usize..300) {
        // Each route's figures against the test's own count of the blocks it sent
        // there (by the configured limits), and the reserved bytes of all routes
        // against the backend's count of device memory held.
        let mock = MockBackend::shared();
        let cfg = HybridConfig::inference();
        let router = HybridPool::new(MockBackend::shared(), cfg.clone());
        let alloc = hybrid(mock.clone(), cfg);
        let mut rng = Rng::new(seed);
        let mut live: Vec<Block> = Vec::new();
        for _ in 0..steps {
            if live.is_empty() || rng.below(3) != 0 {
                live.push(alloc.alloc(rng.log_uniform(1, 2 << 30)).unwrap());
            } else {
                let b = live.swap_remove(rng.below(live.len() as u64) as usize);
                alloc.free(b).unwrap();
            }
            let r = route_stats(&alloc);
            for (route, stats) in [(Route::Small, &r.small), (Route::Large, &r.large), (Route::Huge, &r.huge)] {
                let mine: Vec<&Block> = live.iter().filter(|b| router.route(b.requested) == route).collect();
                prop_assert_eq!(stats.live_blocks.current, mine.len() as u64, "{:?}", route);
                prop_assert_eq!(
                    stats.live_bytes.current,
                    mine.iter().map(|b| b.requested as u64).sum::<u64>(),
                    "{:?}", route
                );
            }
            let reserved = r.small.reserved_bytes.current + r.large.reserved_bytes.current + r.huge.reserved_bytes.current;
            prop_assert_eq!(reserved, mock.counters().bytes_in_use.current);
        }
        for b in live {
            alloc.free(b).unwrap();
        }
        alloc.trim().unwrap();
        prop_assert_eq!(alloc.backend().counters().bytes_in_use.current, 0);
    }
}
