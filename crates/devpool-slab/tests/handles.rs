//! A block's handle names its thread cache, its slab's place in that cache and the
//! slab's generation: a stale block, whose slab went away and whose place another
//! slab took, is refused and changes nothing, even when the new slab has the same
//! address.
use devpool_core::{Backend, Error, Pool, Request};
use devpool_slab::{SlabConfig, SlabPool};
use devpool_testing::MockBackend;

fn refused(e: &Error) -> bool {
    matches!(e, Error::NotOwned { .. } | Error::DoubleFree { .. })
}

#[test]
fn a_stale_block_is_refused_after_its_place_is_reused() {
    let mock = MockBackend::shared();
    let pool = SlabPool::new(mock.clone(), SlabConfig::default().keep_empty(0));
    let req = Request::new(4096);
    let old = pool.allocate(&req).unwrap();
    pool.deallocate(&old).unwrap();
    // The slab goes back to the backend; the next allocation makes a new slab in the
    // same place of the same cache.
    assert!(pool.trim().unwrap() > 0);
    assert_eq!(mock.counters().bytes_in_use.current, 0);
    let new = pool.allocate(&req).unwrap();
    assert_ne!(new.handle, old.handle, "a new generation");
    let before = pool.stats();
    let e = pool.deallocate(&old).unwrap_err();
    assert!(refused(&e), "{e:?}");
    assert!(refused(&pool.check(&old).unwrap_err()));
    // Nothing changed: the new block is still live and frees once.
    assert_eq!(pool.stats(), before);
    pool.check(&new).unwrap();
    pool.verify().unwrap();
    pool.deallocate(&new).unwrap();
    assert!(refused(&pool.deallocate(&new).unwrap_err()));
    assert_eq!(pool.stats().live_blocks.current, 0);
}

#[test]
fn a_block_freed_from_another_thread_goes_back_to_its_cache() {
    let pool = std::sync::Arc::new(SlabPool::new(MockBackend::shared(), SlabConfig::default()));
    let blocks: Vec<_> = (0..100)
        .map(|_| pool.allocate(&Request::new(1000)).unwrap())
        .collect();
    let p = pool.clone();
    let twice = blocks[7];
    std::thread::spawn(move || {
        for b in &blocks {
            p.deallocate(b).unwrap();
        }
        assert!(refused(&p.deallocate(&twice).unwrap_err()));
    })
    .join()
    .unwrap();
    let s = pool.stats();
    assert_eq!(
        (s.allocations, s.frees, s.live_blocks.current),
        (100, 100, 0)
    );
    pool.verify().unwrap();
}
