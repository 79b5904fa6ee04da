//! What adaptors pass through unchanged: the parts of the allocator below, and when
//! it reuses memory. A reset is not passed through adaptors that count live blocks
//! (their counts would go stale), only through those that keep none.
use devpool_adaptors::{Limit, OomRetry, Statistics, Tracking};
use devpool_arena::{arena, ArenaConfig};
use devpool_core::{Allocator, Reuse};
use devpool_hybrid::{hybrid, HybridConfig};
use devpool_testing::MockBackend;

#[test]
fn parts_and_reuse_pass_through() {
    let h = Statistics::new(Tracking::new(hybrid(
        MockBackend::shared(),
        HybridConfig::training(),
    )));
    let b = h.alloc(100 << 10).unwrap();
    let parts = h.parts();
    assert_eq!(parts.route("large").unwrap().live_blocks.current, 1);
    assert_eq!(parts.route("small").unwrap().live_blocks.current, 0);
    assert_eq!(h.reuse(), Reuse::OnFree);
    h.free(b).unwrap();

    let limited = Limit::new(
        arena(MockBackend::shared(), ArenaConfig::default()),
        1 << 30,
    );
    assert_eq!(limited.reuse(), Reuse::WhenEmpty);
    let b = limited.alloc(4096).unwrap();
    assert!(limited.reset().is_err(), "the limit's count would go stale");
    limited.free(b).unwrap();

    let retry = OomRetry::new(arena(MockBackend::shared(), ArenaConfig::default()));
    retry.alloc(4096).unwrap();
    retry.reset().unwrap();
    assert_eq!(retry.stats().live_blocks.current, 0);
}
