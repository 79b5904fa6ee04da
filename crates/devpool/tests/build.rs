//! Every listed strategy builds and serves a block; unknown names are errors.
use devpool::{build, Allocator, MockBackend, STRATEGIES};

#[test]
fn every_listed_strategy_builds_and_serves() {
    for s in STRATEGIES {
        let mock = MockBackend::shared();
        let alloc = build(s.name, mock.clone()).unwrap_or_else(|e| panic!("{}: {e}", s.name));
        let blocks: Vec<_> = [1usize, 4096, 3 << 20, 100 << 20]
            .iter()
            .map(|&n| {
                alloc
                    .alloc(n)
                    .unwrap_or_else(|e| panic!("{} {n}: {e}", s.name))
            })
            .collect();
        devpool::core::testing::check_blocks(&blocks);
        for b in blocks {
            alloc.free(b).unwrap();
        }
        assert_eq!(alloc.stats().live_blocks.current, 0, "{}", s.name);
    }
}

#[test]
fn unknown_names_are_errors() {
    assert!(build("no-such-strategy", MockBackend::shared()).is_err());
}
