//! A reserve (`VmConfig::reserve`) goes to the first stream's pool only: every other
//! stream's pool maps what its blocks need, so the reserve is held once.
use devpool_core::{Allocator, Backend, Request};
use devpool_hybrid::{hybrid, HybridConfig, LargeStrategy};
use devpool_testing::MockBackend;

const RESERVE: u64 = 256 << 20;

fn with_reserve(mut cfg: HybridConfig) -> HybridConfig {
    match &mut cfg.large {
        LargeStrategy::Tlsf(t) => t.pages.reserve = RESERVE as usize,
        LargeStrategy::Buddy(b) => b.pages.reserve = RESERVE as usize,
    }
    cfg
}

#[test]
fn the_reserve_is_held_once_whatever_the_streams() {
    for cfg in [HybridConfig::training(), HybridConfig::with_buddy()] {
        let mock = MockBackend::shared();
        let alloc = hybrid(mock.clone(), with_reserve(cfg));
        let held = || mock.counters().bytes_in_use.current;
        let big = 8 << 20;
        let a = alloc
            .allocate(Request::new(big).on_stream(MockBackend::stream(1)))
            .unwrap();
        assert_eq!(held(), RESERVE, "the first large block maps the reserve");
        let maps = mock.counters().map_calls;
        let a2 = alloc
            .allocate(Request::new(big).on_stream(MockBackend::stream(1)))
            .unwrap();
        assert_eq!(
            mock.counters().map_calls,
            maps,
            "inside the reserve: no call"
        );
        // Other streams: their own pools, no reserve of their own.
        let others: Vec<_> = (2..6)
            .map(|s| {
                alloc
                    .allocate(Request::new(big).on_stream(MockBackend::stream(s)))
                    .unwrap()
            })
            .collect();
        let page = mock.granularity() as u64;
        let each = (big as u64).div_ceil(page) * page;
        assert!(
            held() <= RESERVE + 4 * (each + 16 * page),
            "four more streams hold their blocks (and a batch ahead), not four reserves: {} B",
            held()
        );
        for b in others.into_iter().chain([a, a2]) {
            alloc.free(b).unwrap();
        }
        alloc.trim().unwrap();
        assert_eq!(held(), 0);
    }
}
