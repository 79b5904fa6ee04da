//! The page cache policy and the placement: packing, steady state without backend
//! calls, a bounded cache, trim, and the unmapping order.
use devpool_core::{Backend, Block, Pool, Request};
use devpool_testing::{MockBackend, MockConfig};
use devpool_tlsf::{TlsfConfig, TlsfMode, TlsfPool, VmConfig};

const MIB: usize = 1 << 20;

/// A virtual-mode pool with one physical chunk per page, so that any unused page
/// can go (chunks are tested in the page layer's own tests).
fn pool(cfg: TlsfConfig) -> (std::sync::Arc<MockBackend>, TlsfPool) {
    let mock = MockBackend::shared();
    let p = TlsfPool::new(mock.clone(), cfg.mode(TlsfMode::Virtual).chunk_pages(1));
    (mock, p)
}

/// The pool is consistent and reserves exactly what the backend holds.
fn exact(p: &TlsfPool, mock: &MockBackend) {
    p.verify().unwrap();
    assert_eq!(
        p.stats().reserved_bytes.current,
        mock.counters().bytes_in_use.current
    );
}

/// Blocks of 20, 2, 20 and 2 MiB, in that order, with the two of 20 MiB freed:
/// gives the freed ones (low, high), then the live ones (mid, top).
fn two_holes(p: &TlsfPool) -> [Block; 4] {
    let [low, mid, high, top] = [20, 2, 20, 2].map(|m| p.allocate(&Request::new(m * MIB)).unwrap());
    p.deallocate(&low).unwrap();
    p.deallocate(&high).unwrap();
    [low, high, mid, top]
}

#[test]
fn neighbours_share_pages() {
    let (mock, p) = pool(TlsfConfig::default().map_batch_pages(1));
    let blocks: Vec<Block> = (0..3)
        .map(|_| p.allocate(&Request::new(3 * MIB)).unwrap())
        .collect();
    for w in blocks.windows(2) {
        assert_eq!(
            w[0].ptr.0 + w[0].size as u64,
            w[1].ptr.0,
            "packed contiguously"
        );
    }
    let page = mock.granularity();
    assert_eq!(
        p.detail().pages.mapped_pages as usize,
        (9 * MIB).div_ceil(page)
    );
    p.verify().unwrap();
}

/// Six steps of the same work on top of two long-lived blocks: the maps and
/// unmaps after each step.
fn repeated_steps(cfg: TlsfConfig) -> Vec<(u64, u64)> {
    let (mock, p) = pool(cfg.window_ops(64));
    let sizes = [
        7 * MIB,
        300 * MIB,
        3 * MIB + 5000,
        64 * MIB,
        2 * MIB,
        90 * MIB,
        11 * MIB,
    ];
    let weights: Vec<Block> = [100 * MIB, 40 * MIB]
        .iter()
        .map(|&s| p.allocate(&Request::new(s)).unwrap())
        .collect();
    let mut calls = Vec::new();
    for _step in 0..6 {
        let mut acts: Vec<Block> = Vec::new();
        for (i, &s) in sizes.iter().enumerate() {
            acts.push(p.allocate(&Request::new(s)).unwrap());
            if i % 3 == 2 {
                p.deallocate(&acts.remove(0)).unwrap();
            }
        }
        for b in acts.drain(..).rev() {
            p.deallocate(&b).unwrap();
        }
        let c = mock.counters();
        calls.push((c.map_calls, c.unmap_calls));
    }
    for b in weights {
        p.deallocate(&b).unwrap();
    }
    p.verify().unwrap();
    calls
}

#[test]
fn a_repeated_step_maps_and_unmaps_nothing_after_the_first() {
    // Without growth in bursts (the default): after the first step, at most the old address of
    // memory that moved in it is unmapped (lazily, at the end of a window), and
    // then nothing.
    let calls: Vec<u64> = repeated_steps(TlsfConfig::default())
        .iter()
        .map(|(m, u)| m + u)
        .collect();
    assert!(
        calls[5] - calls[0] <= 1 && calls.windows(2).skip(4).all(|w| w[0] == w[1]),
        "backend calls per step: {calls:?}"
    );
    // With them: the first step maps ahead as it grows; after it
    // nothing is mapped, and what it mapped ahead and no step uses goes back, in
    // at most one more unmap, and then nothing.
    let calls = repeated_steps(
        TlsfConfig::default().pages(VmConfig::default().burst_ops(devpool_tlsf::BURST_ON)),
    );
    let (maps, unmaps): (Vec<u64>, Vec<u64>) = calls.iter().copied().unzip();
    assert!(
        maps.iter().all(|&m| m == maps[0])
            && unmaps[5] - unmaps[0] <= 2
            && unmaps.windows(2).skip(4).all(|w| w[0] == w[1]),
        "maps and unmaps per step: {calls:?}"
    );
}

/// A loop of one small block, whose peak allows less than a page of cache: the
/// page it lands on stays mapped across windows instead of being unmapped at each
/// window's end and mapped again by the next allocation.
#[test]
fn a_loop_of_one_small_block_keeps_its_page_across_windows() {
    for size in [4096, MIB] {
        let mock = MockBackend::shared();
        let p = TlsfPool::new(
            mock.clone(),
            TlsfConfig::default().mode(TlsfMode::Virtual).window_ops(64),
        );
        let req = Request::new(size);
        // Two windows to settle: what was mapped ahead of the block may go.
        for _ in 0..128 {
            let b = p.allocate(&req).unwrap();
            p.deallocate(&b).unwrap();
        }
        let before = mock.counters();
        for _ in 0..64 * 20 {
            let b = p.allocate(&req).unwrap();
            p.deallocate(&b).unwrap();
        }
        let after = mock.counters();
        assert_eq!(
            (after.map_calls, after.unmap_calls),
            (before.map_calls, before.unmap_calls),
            "{size} B: 40 windows of one block each made memory calls"
        );
        assert_eq!(
            after.bytes_in_use.current,
            mock.granularity() as u64,
            "one page held"
        );
        assert_eq!(
            p.trim().unwrap(),
            mock.granularity(),
            "trim still gives it back"
        );
        exact(&p, &mock);
    }
}

#[test]
fn the_cache_shrinks_to_its_bound_when_the_work_shrinks() {
    let floor = 8 * MIB;
    let (mock, p) = pool(TlsfConfig::default().cache(floor, 0.0).window_ops(64));
    let big: Vec<Block> = (0..50)
        .map(|_| p.allocate(&Request::new(4 * MIB)).unwrap())
        .collect();
    for b in &big {
        p.deallocate(b).unwrap();
    }
    let page = mock.granularity() as u64;
    assert!(
        p.detail().pages.unused_pages * page >= 100 * MIB as u64,
        "freed memory stays for reuse at first"
    );
    // Three windows of small work: the peak of the big blocks is forgotten.
    for _ in 0..200 {
        let b = p.allocate(&Request::new(MIB)).unwrap();
        p.deallocate(&b).unwrap();
    }
    let d = p.detail();
    assert!(
        d.pages.unused_pages * page <= (floor + MIB) as u64,
        "cache above its bound: {d}"
    );
    assert!(d.pages.unmap_calls >= 1);
    exact(&p, &mock);
}

#[test]
fn trim_unmaps_every_unused_page_and_keeps_live_ones() {
    let (mock, p) = pool(TlsfConfig::default());
    let a = p.allocate(&Request::new(30 * MIB)).unwrap();
    let keep = p.allocate(&Request::new(5 * MIB)).unwrap();
    let c = p.allocate(&Request::new(30 * MIB)).unwrap();
    p.deallocate(&a).unwrap();
    p.deallocate(&c).unwrap();
    let released = p.trim().unwrap();
    assert!(released >= 56 * MIB, "released {released}");
    let d = p.detail();
    assert_eq!(d.pages.unused_pages, 0);
    let page = mock.granularity() as u64;
    // 5 MiB at an offset of 30 MiB touches pages 15, 16 and 17.
    assert_eq!(
        d.pages.mapped_pages,
        (keep.ptr.0 % page + keep.size as u64).div_ceil(page)
    );
    p.verify().unwrap();
    p.deallocate(&keep).unwrap();
    p.trim().unwrap();
    assert_eq!(mock.counters().bytes_in_use.current, 0);
    assert_eq!(p.detail().spans, 1, "one empty range stays reserved");
}

#[test]
fn without_moving_unmapping_starts_from_the_top() {
    let (mock, p) = pool(
        TlsfConfig::default()
            .map_batch_pages(1)
            .cache(0, 0.0)
            .window_ops(1 << 40)
            .pages(
                VmConfig::default()
                    .map_batch_pages(1)
                    .cache(0, 0.0)
                    .window_ops(1 << 40)
                    .move_memory(false),
            ),
    );
    let [low, _high, mid, top] = two_holes(&p);
    // Growing past everything with an empty bound unmaps unused pages, highest first;
    // both holes have 10 unused pages, and the new block needs its own.
    let grow = p.allocate(&Request::new(64 * MIB)).unwrap();
    let d = p.detail();
    assert_eq!(d.pages.unused_pages, 0, "{d}");
    assert!(d.pages.unmap_calls >= 2);
    // The lower hole is reused first by a block that fits it.
    let again = p.allocate(&Request::new(20 * MIB)).unwrap();
    assert_eq!(again.ptr, low.ptr);
    for b in [mid, top, grow, again] {
        p.deallocate(&b).unwrap();
    }
    exact(&p, &mock);
}

#[test]
fn growing_takes_the_memory_of_unused_pages_and_holds_no_more() {
    let (mock, p) = pool(
        TlsfConfig::default().pages(
            VmConfig::default()
                .map_batch_pages(1)
                .cache(0, 0.0)
                .window_ops(1 << 40),
        ),
    );
    let [_low, _high, mid, top] = two_holes(&p);
    let held = mock.counters().bytes_in_use.current;
    // 64 MiB past everything: the 20 unused pages of the two holes move there, and
    // only the other 12 pages are new memory.
    let grow = p.allocate(&Request::new(64 * MIB)).unwrap();
    let d = p.detail();
    assert_eq!(d.pages.unused_pages, 0, "{d}");
    assert_eq!(
        mock.counters().bytes_in_use.current,
        held + 12 * 2 * MIB as u64,
        "{d}"
    );
    assert_eq!(d.pages.move_calls, 1, "one call for both holes");
    p.verify().unwrap();
    for b in [mid, top, grow] {
        p.deallocate(&b).unwrap();
    }
    p.verify().unwrap();
    p.trim().unwrap();
    assert_eq!(mock.counters().bytes_in_use.current, 0);
}

#[test]
fn aligned_blocks_leave_their_padding_free() {
    let (_mock, p) = pool(TlsfConfig::default());
    let a = p.allocate(&Request::new(1000)).unwrap();
    let b = p
        .allocate(&Request::new(3 * MIB).with_align(2 * MIB))
        .unwrap();
    assert!(b.ptr.is_aligned(2 * MIB));
    let c = p.allocate(&Request::new(4096)).unwrap();
    assert!(
        c.ptr.0 < b.ptr.0,
        "the padding before the aligned block is reused"
    );
    assert!(
        p.allocate(&Request::new(1).with_align(4 * MIB)).is_err(),
        "above the page size"
    );
    for x in [a, b, c] {
        p.deallocate(&x).unwrap();
    }
    assert_eq!(p.detail().free_blocks, 1);
    p.verify().unwrap();
}

#[test]
fn requests_beyond_a_range_get_their_own_and_beyond_the_device_fail() {
    let mock = MockBackend::shared_with(MockConfig::default().capacity(1 << 30));
    let p = TlsfPool::new(
        mock.clone(),
        TlsfConfig::default()
            .mode(TlsfMode::Virtual)
            .range_size(64 * MIB),
    );
    let a = p.allocate(&Request::new(48 * MIB)).unwrap();
    let b = p.allocate(&Request::new(48 * MIB)).unwrap();
    let c = p.allocate(&Request::new(200 * MIB)).unwrap();
    assert_eq!(p.detail().spans, 3);
    let e = p.allocate(&Request::new(2 << 30)).unwrap_err();
    assert!(e.is_oom(), "{e}");
    assert_eq!(
        mock.counters().reserves,
        3,
        "no range reserved for a request larger than the device"
    );
    for x in [a, b, c] {
        p.deallocate(&x).unwrap();
    }
    p.trim().unwrap();
    assert_eq!(p.detail().spans, 1, "one empty range stays reserved");
    assert_eq!(mock.counters().unreserves, 2);
    drop(p);
    assert_eq!(
        mock.counters().unreserves,
        3,
        "dropping the pool gives back the last"
    );
}

#[test]
fn region_mode_takes_chunks_and_returns_empty_ones_on_trim() {
    let mock = MockBackend::shared_with(MockConfig::default().without_virtual());
    let p = TlsfPool::new(mock.clone(), TlsfConfig::default().region_chunk(64 * MIB));
    assert_eq!(p.mode(), TlsfMode::Region);
    let small: Vec<Block> = (0..10)
        .map(|_| p.allocate(&Request::new(5 * MIB)).unwrap())
        .collect();
    assert_eq!(mock.counters().region_allocs, 1, "one chunk serves 50 MiB");
    let big = p.allocate(&Request::new(100 * MIB)).unwrap();
    assert_eq!(mock.counters().region_allocs, 2);
    p.deallocate(&big).unwrap();
    let freed = p.trim().unwrap();
    assert_eq!(freed, 100 * MIB);
    for b in small {
        p.deallocate(&b).unwrap();
    }
    p.trim().unwrap();
    assert_eq!(mock.counters().bytes_in_use.current, 0);
    p.verify().unwrap();
}

#[test]
fn virtual_mode_needs_a_backend_with_virtual_memory() {
    let mock = MockBackend::shared_with(MockConfig::default().without_virtual());
    let p = TlsfPool::new(mock.clone(), TlsfConfig::default().mode(TlsfMode::Virtual));
    assert!(matches!(
        p.allocate(&Request::new(MIB)),
        Err(devpool_core::Error::Unsupported(_))
    ));
    let auto = TlsfPool::new(mock, TlsfConfig::default());
    assert_eq!(auto.mode(), TlsfMode::Region);
    let b = auto.allocate(&Request::new(MIB)).unwrap();
    auto.deallocate(&b).unwrap();
}

#[test]
fn settings_out_of_range_are_brought_into_range() {
    let (mock, p) = pool(
        TlsfConfig::default()
            .granule(3)
            .map_batch_pages(0)
            .cache(0, f64::NAN)
            .window_ops(0),
    );
    let c = p.config();
    assert_eq!(
        (c.granule, c.pages.map_batch_pages, c.pages.window_ops),
        (256, 1, 1)
    );
    assert_eq!(c.pages.cache_fraction, 0.0);
    let huge = TlsfPool::new(mock.clone(), TlsfConfig::default().granule(1 << 40));
    assert_eq!(huge.config().granule, mock.granularity());
    let b = p.allocate(&Request::new(1000)).unwrap();
    assert_eq!(b.size, 1024);
    p.deallocate(&b).unwrap();
}
