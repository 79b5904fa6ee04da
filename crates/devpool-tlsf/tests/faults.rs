//! Fault injection: a failing `map` or `alloc_region` gives an error, keeps every
//! live block (their patterns still read back on a host-backed mock) and keeps the
//! accounting exact (the pool's reserved bytes are the backend's bytes in use).
use devpool_core::{Allocator, Backend, Pool, Request};
use devpool_testing::conformance::Rng;
use devpool_testing::faults::FaultedPool;
use devpool_testing::{FaultOn, MockBackend, MockConfig};
use devpool_tlsf::{tlsf, TlsfConfig, TlsfMode, TlsfPool};

fn run(mode: TlsfMode, fault: FaultOn) {
    let cfg = TlsfConfig::default()
        .mode(mode)
        .region_chunk(16 << 20)
        .cache(4 << 20, 0.0)
        .window_ops(32);
    let fp = FaultedPool::host_backed(2 << 30, |m| TlsfPool::new(m, cfg), TlsfPool::verify);
    let mut rng = Rng::new(5);
    let mut live = Vec::new();
    let mut failed = 0;
    for round in 0..300u32 {
        let tag = (round % 250) as u8 + 1;
        match fp.faulty_round(round, fault, &mut rng, (1 << 10, 24 << 20), tag) {
            Some(b) => live.push((b, tag)),
            None => failed += 1,
        }
        if live.len() > 12 || (rng.below(3) == 0 && !live.is_empty()) {
            let (b, tag) = live.swap_remove(rng.below(live.len() as u64) as usize);
            fp.free(&b, tag);
            fp.exact();
        }
    }
    assert!(failed >= 3, "faults were injected ({failed} failures)");
    fp.mock.clear_faults();
    fp.release_all(live);
}

#[test]
fn map_faults_in_virtual_mode() {
    run(TlsfMode::Virtual, FaultOn::Map);
}

#[test]
fn out_of_memory_gives_back_unused_pages_and_retries() {
    // 64 MiB device; a 40 MiB block is freed (its pages stay mapped as cache), then
    // a 48 MiB block elsewhere needs the cache's pages back.
    let cfg = TlsfConfig::default()
        .mode(TlsfMode::Virtual)
        .cache(1 << 30, 1.0);
    let mock = MockBackend::shared_with(MockConfig::default().capacity(64 << 20));
    let fp = FaultedPool::new(mock.clone(), TlsfPool::new(mock, cfg), TlsfPool::verify);
    let pool = &fp.pool;
    let a = pool.allocate(&Request::new(40 << 20)).unwrap();
    let keep = pool.allocate(&Request::new(2 << 20)).unwrap();
    pool.deallocate(&a).unwrap();
    assert!(pool.detail().pages.unused_pages >= 20, "{}", pool.detail());
    let big = pool.allocate(&Request::new(48 << 20)).unwrap();
    assert!(big.ptr.0 >= keep.ptr.0 || big.ptr.0 + big.size as u64 <= keep.ptr.0);
    fp.exact();
    // Nothing left to give back: a clean out-of-memory error, nothing changed.
    let before = pool.stats();
    let e = pool.allocate(&Request::new(32 << 20)).unwrap_err();
    assert!(e.is_oom(), "{e}");
    assert_eq!(pool.stats().live_blocks, before.live_blocks);
    fp.exact();
    pool.deallocate(&big).unwrap();
    pool.deallocate(&keep).unwrap();
}

#[test]
fn reserve_fault_is_an_error_and_the_next_call_works() {
    let cfg = TlsfConfig::default().mode(TlsfMode::Virtual);
    FaultedPool::reserve_fault_then_works(|m| TlsfPool::new(m, cfg), TlsfPool::verify);
}

#[test]
fn region_faults_in_region_mode() {
    run(TlsfMode::Region, FaultOn::Region);
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
