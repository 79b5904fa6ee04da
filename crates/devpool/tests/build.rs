//! Every named strategy builds and serves a block.
use devpool::{Allocator, MockBackend, STRATEGIES};

#[test]
fn every_named_strategy_builds_and_serves() {
    for s in STRATEGIES {
        let mock = MockBackend::shared();
        let alloc = s.spec().build(mock.clone());
        // The fixed pool refuses what its one block size does not hold.
        let sizes: &[usize] = if s.listed {
            &[1, 4096, 3 << 20, 100 << 20]
        } else {
            &[1, 4096, 1000 << 10]
        };
        let blocks: Vec<_> = sizes
            .iter()
            .map(|&n| {
                alloc
                    .alloc(n)
                    .unwrap_or_else(|e| panic!("{} {n}: {e}", s.name))
            })
            .collect();
        devpool::testing::conformance::check_blocks(&blocks);
        for b in blocks {
            alloc.free(b).unwrap();
        }
        assert_eq!(alloc.stats().live_blocks.current, 0, "{}", s.name);
    }
}
