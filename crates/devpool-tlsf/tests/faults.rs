//! Fault injection: a failing `map` or `alloc_region` gives an error, keeps every
//! live block (their patterns still read back on a host-backed mock) and keeps the
//! accounting exact (the pool's reserved bytes are the backend's bytes in use).
use devpool_core::{Allocator, Backend, Block, Error, Pool, Request};
use devpool_testing::conformance::Rng;
use devpool_testing::{FaultOn, MockBackend, MockConfig};
use devpool_tlsf::{tlsf, TlsfConfig, TlsfMode, TlsfPool};

fn exact(pool: &TlsfPool, mock: &MockBackend) {
    pool.verify().unwrap();
    assert_eq!(
        pool.stats().reserved_bytes.current,
        mock.counters().bytes_in_use.current,
        "the pool's reserved bytes are the backend's bytes in use"
    );
}

fn fill(mock: &MockBackend, b: &Block, tag: u8) {
    mock.memset(b.ptr, tag, b.requested.max(1), b.stream)
        .unwrap();
}

fn verify(mock: &MockBackend, b: &Block, tag: u8) {
    let mut back = vec![0u8; b.requested.max(1)];
    mock.copy_to_host(&mut back, b.ptr, b.stream).unwrap();
    assert!(
        back.iter().all(|&x| x == tag),
        "block {b:?} lost its pattern"
    );
}

fn run(mode: TlsfMode, fault: FaultOn) {
    let mock = MockBackend::shared_with(MockConfig::default().host_backed().capacity(2 << 30));
    let cfg = TlsfConfig::default()
        .mode(mode)
        .region_chunk(16 << 20)
        .cache(4 << 20, 0.0)
        .window_ops(32);
    let pool = TlsfPool::new(mock.clone(), cfg);
    let mut rng = Rng::new(5);
    let mut live: Vec<(Block, u8)> = Vec::new();
    let mut failed = 0;
    for round in 0..300u32 {
        if round % 3 == 0 {
            mock.fail_nth(fault, 1 + rng.below(2));
        }
        let before = pool.stats();
        let size = rng.log_uniform(1 << 10, 24 << 20);
        match pool.allocate(&Request::new(size)) {
            Ok(b) => {
                let tag = (round % 250) as u8 + 1;
                fill(&mock, &b, tag);
                live.push((b, tag));
            }
            Err(e) => {
                assert!(matches!(e, Error::Backend(_)), "unexpected error {e}");
                failed += 1;
                let after = pool.stats();
                assert_eq!(
                    after.live_blocks, before.live_blocks,
                    "a failure changes no block"
                );
                assert_eq!(after.allocated_bytes, before.allocated_bytes);
            }
        }
        exact(&pool, &mock);
        if live.len() > 12 || (rng.below(3) == 0 && !live.is_empty()) {
            let (b, tag) = live.swap_remove(rng.below(live.len() as u64) as usize);
            verify(&mock, &b, tag);
            pool.deallocate(&b).unwrap();
            exact(&pool, &mock);
        }
    }
    assert!(failed >= 3, "faults were injected ({failed} failures)");
    mock.clear_faults();
    for (b, tag) in &live {
        verify(&mock, b, *tag);
    }
    for (b, _) in live {
        pool.deallocate(&b).unwrap();
    }
    pool.trim().unwrap();
    exact(&pool, &mock);
    assert_eq!(mock.counters().bytes_in_use.current, 0);
}

#[test]
fn map_faults_in_virtual_mode() {
    run(TlsfMode::Virtual, FaultOn::Map);
}

#[test]
fn region_faults_in_region_mode() {
    run(TlsfMode::Region, FaultOn::Region);
}

#[test]
fn reserve_fault_is_an_error_and_the_next_call_works() {
    let mock = MockBackend::shared();
    let pool = TlsfPool::new(mock.clone(), TlsfConfig::default().mode(TlsfMode::Virtual));
    mock.fail_nth(FaultOn::Reserve, 1);
    assert!(pool.allocate(&Request::new(1 << 20)).is_err());
    let b = pool.allocate(&Request::new(1 << 20)).unwrap();
    pool.deallocate(&b).unwrap();
    exact(&pool, &mock);
}

#[test]
fn out_of_memory_gives_back_unused_pages_and_retries() {
    // 64 MiB device; a 40 MiB block is freed (its pages stay mapped as cache), then
    // a 48 MiB block elsewhere needs the cache's pages back.
    let mock = MockBackend::shared_with(MockConfig::default().capacity(64 << 20));
    let pool = TlsfPool::new(
        mock.clone(),
        TlsfConfig::default()
            .mode(TlsfMode::Virtual)
            .cache(1 << 30, 1.0),
    );
    let a = pool.allocate(&Request::new(40 << 20)).unwrap();
    let keep = pool.allocate(&Request::new(2 << 20)).unwrap();
    pool.deallocate(&a).unwrap();
    assert!(pool.detail().pages.unused_pages >= 20, "{}", pool.detail());
    let big = pool.allocate(&Request::new(48 << 20)).unwrap();
    assert!(big.ptr.0 >= keep.ptr.0 || big.ptr.0 + big.size as u64 <= keep.ptr.0);
    exact(&pool, &mock);
    // Nothing left to give back: a clean out-of-memory error, nothing changed.
    let before = pool.stats();
    let e = pool.allocate(&Request::new(32 << 20)).unwrap_err();
    assert!(e.is_oom(), "{e}");
    assert_eq!(pool.stats().live_blocks, before.live_blocks);
    exact(&pool, &mock);
    pool.deallocate(&big).unwrap();
    pool.deallocate(&keep).unwrap();
}

#[test]
fn allocator_survives_faults_with_exact_stats() {
    let mock = MockBackend::shared_with(MockConfig::default().capacity(1 << 30));
    let alloc = tlsf(mock.clone(), TlsfConfig::default());
    let mut live = Vec::new();
    for i in 0..40u64 {
        if i % 4 == 1 {
            mock.fail_nth(FaultOn::AnyAcquire, 1);
        }
        if let Ok(b) = alloc.alloc(((i as usize % 7) + 1) * (3 << 20)) {
            live.push(b);
        }
        assert_eq!(
            alloc.stats().reserved_bytes.current,
            mock.counters().bytes_in_use.current
        );
        if i % 3 == 2 {
            alloc.free(live.swap_remove(0)).unwrap();
        }
    }
    assert!(mock.injected_faults() > 0, "no fault fired");
    for b in live {
        alloc.free(b).unwrap();
    }
    alloc.trim().unwrap();
    assert_eq!(mock.counters().bytes_in_use.current, 0);
}
