//! The documented policies: which empty slabs are kept, what `describe_cache` and
//! out-of-memory errors name, and the host metadata per block.
use devpool_core::{human_bytes, Allocator, Backend, Block, Error, Pool, Request};
use devpool_slab::{slab, SlabConfig, SlabPool};
use devpool_testing::{MockBackend, MockConfig};

#[test]
fn empty_slabs_kept_one_per_cache_and_keep_empty_in_the_depot() {
    for keep in [0usize, 1, 3] {
        let mock = MockBackend::shared();
        let cfg = SlabConfig::default()
            .min_slab_bytes(64 << 10)
            .keep_empty(keep);
        let pool = SlabPool::new(mock.clone(), cfg);
        let req = Request::new(4096);
        let slots = {
            let b = pool.allocate(&req).unwrap();
            pool.deallocate(&b).unwrap();
            pool.detail()
                .into_iter()
                .find(|c| c.size == b.size)
                .unwrap()
        };
        let slabs = 6usize;
        let blocks: Vec<Block> = (0..slabs * slots.slots_per_slab)
            .map(|_| pool.allocate(&req).unwrap())
            .collect();
        let c = |p: &SlabPool| p.detail().into_iter().find(|c| c.size == 4096).unwrap();
        assert_eq!(c(&pool).slabs, slabs as u64);
        for b in blocks {
            pool.deallocate(&b).unwrap();
        }
        // One empty slab stays with the thread's cache, `keep` in the depot; the rest
        // went back to the backend as they emptied.
        let held = c(&pool);
        assert_eq!(held.slabs, 1 + keep as u64, "keep_empty({keep})");
        assert_eq!(held.empty_slabs, held.slabs);
        assert_eq!(
            mock.counters().bytes_in_use.current,
            held.slabs * held.slab_bytes as u64
        );
        let released = pool.trim().unwrap();
        assert_eq!(released as u64, held.slabs * held.slab_bytes as u64);
        assert_eq!(c(&pool).slabs, 0);
        assert_eq!(mock.counters().bytes_in_use.current, 0);
    }
}

#[test]
fn describe_cache_names_the_class_with_most_free_slots() {
    let pool = SlabPool::new(MockBackend::shared(), SlabConfig::default());
    assert_eq!(pool.describe_cache(), "", "nothing cached yet");
    let small = pool.allocate(&Request::new(200)).unwrap();
    let large = pool.allocate(&Request::new(1 << 20)).unwrap();
    let stats = pool.detail();
    let most = stats.iter().max_by_key(|c| c.free_slots).unwrap();
    assert_eq!(most.size, small.size, "{stats:?}");
    let d = pool.describe_cache();
    assert!(
        d.contains(&format!("class {} ", human_bytes(small.size as u64))),
        "{d}"
    );
    assert!(d.contains(&most.free_slots.to_string()), "{d}");
    pool.deallocate(&small).unwrap();
    pool.deallocate(&large).unwrap();
}

#[test]
fn out_of_memory_note_points_at_the_cached_class() {
    let mock = MockBackend::shared_with(MockConfig::default().capacity(8 << 20));
    let a = slab(mock.clone(), SlabConfig::default());
    let small = a.alloc(200).unwrap();
    // The 1 MiB class needs an 8 MiB slab, which no longer fits next to the 2 MiB one.
    let e = a.alloc(1 << 20).expect_err("no room for another slab");
    let Error::OutOfMemory(info) = &e else {
        panic!("{e}");
    };
    assert_eq!(info.requested, 1 << 20);
    assert_eq!(info.live, 200);
    assert!(info.note.contains("slab class 256 B"), "{}", info.note);
    a.free(small).unwrap();
    devpool_testing::conformance::assert_empty(&a, &mock);
}

/// Host metadata added per block when `slabs` more slabs of `size` fill up.
fn marginal_metadata_per_block(size: usize, slabs: usize) -> f64 {
    let pool = SlabPool::new(MockBackend::shared(), SlabConfig::default());
    let req = Request::new(size);
    let first = pool.allocate(&req).unwrap();
    let per_slab = pool
        .detail()
        .into_iter()
        .find(|c| c.size == first.size)
        .unwrap();
    let mut blocks = vec![first];
    blocks.extend((1..per_slab.slots_per_slab).map(|_| pool.allocate(&req).unwrap()));
    let before = pool.metadata_bytes();
    let added = slabs * per_slab.slots_per_slab;
    blocks.extend((0..added).map(|_| pool.allocate(&req).unwrap()));
    let after = pool.metadata_bytes();
    for b in blocks {
        pool.deallocate(&b).unwrap();
    }
    (after - before) as f64 / added as f64
}

#[test]
fn host_metadata_per_block_is_as_documented() {
    // The crate docs promise under 1 B per block up to 8 KiB, under 32 B at 1 MiB.
    let small = marginal_metadata_per_block(256, 8);
    assert!(small > 0.0 && small < 1.0, "256 B blocks: {small} B each");
    let eight_k = marginal_metadata_per_block(8192, 8);
    assert!(eight_k < 1.0, "8 KiB blocks: {eight_k} B each");
    let large = marginal_metadata_per_block(1 << 20, 8);
    assert!(large > 0.0 && large < 32.0, "1 MiB blocks: {large} B each");
}
