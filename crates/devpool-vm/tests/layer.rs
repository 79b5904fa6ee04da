//! The page layer against the mock: use counts, mapping runs and chunks, the cache
//! bound, unmapping in stream order, out of memory and faults.
use devpool_core::{Backend, StreamId};
use devpool_testing::{FaultOn, MockBackend, MockConfig};
use devpool_vm::{PageLayer, RangeId, VmConfig};
use std::sync::Arc;

const S: StreamId = StreamId::DEFAULT;

fn layer(mock: &Arc<MockBackend>, cfg: VmConfig, pages: usize) -> (PageLayer, RangeId, u64) {
    let mut vm = PageLayer::new(mock.clone(), cfg);
    let page = vm.page_size();
    let r = vm.reserve(pages * page as usize, page as usize).unwrap();
    (vm, r, page)
}

fn held(mock: &MockBackend) -> u64 {
    mock.counters().bytes_in_use.current
}

/// A layer of 64 pages that keeps no cache, maps page by page in chunks of 4, over a
/// mock whose events complete only when told, and a stream of that mock: pages
/// given back retire until the stream has passed.
fn retiring_layer() -> (Arc<MockBackend>, StreamId, PageLayer, RangeId, u64) {
    let mock = MockBackend::shared_with(MockConfig::default().manual_events());
    let s = mock.create_stream().unwrap();
    let cfg = VmConfig::default()
        .map_batch_pages(1)
        .cache(0, 0.0)
        .chunk_pages(4)
        .chunk_divisor(1);
    let (vm, r, page) = layer(&mock, cfg, 64);
    (mock, s, vm, r, page)
}

#[test]
fn runs_are_cut_into_chunks_of_at_most_the_chunk_size() {
    let mock = MockBackend::shared();
    let (mut vm, r, page) = layer(
        &mock,
        VmConfig::default()
            .map_batch_pages(1)
            .chunk_pages(8)
            .chunk_divisor(1),
        64,
    );
    let b = vm.base(r);
    let room = (b, b + 64 * page);
    // Pages 3..23: chunks 3..11, 11..19, 19..23.
    vm.acquire(r, (b + 3 * page, b + 23 * page), room).unwrap();
    let c = mock.counters();
    assert_eq!((c.map_calls, c.chunks_created, c.pages_mapped), (1, 3, 20));
    assert_eq!(vm.detail().chunks, 3);
    vm.verify([(r, b + 3 * page, b + 23 * page)]).unwrap();
    vm.release(r, (b + 3 * page, b + 23 * page), S);
    assert_eq!(vm.trim().unwrap(), 20 * page as usize);
    assert_eq!(mock.counters().chunks_released, 3);
    assert_eq!(held(&mock), 0);
}

#[test]
fn neighbours_share_pages_and_the_batch_maps_ahead_inside_the_room() {
    let mock = MockBackend::shared();
    // The batch of 16 pages maps ahead at most an eighth of itself here, where the
    // floor is under a page (the next test).
    let (mut vm, r, page) = layer(&mock, VmConfig::default(), 64);
    let b = vm.base(r);
    let end = b + 64 * page;
    let a = (b, b + page + 100);
    vm.acquire(r, a, (b, end)).unwrap();
    assert_eq!(held(&mock), 4 * page, "two pages and two ahead");
    let n = (a.1, a.1 + page);
    assert_eq!(vm.missing(r, n.0, n.1), 0, "the batch covered it");
    vm.acquire(r, n, (a.1, end)).unwrap();
    assert_eq!(mock.counters().map_calls, 1);
    vm.verify([(r, a.0, a.1), (r, n.0, n.1)]).unwrap();
    // Room that ends early stops the batch; the unused page mapped ahead of `a`
    // moves here rather than new memory being taken.
    let c = (b + 10 * page, b + 11 * page);
    vm.acquire(r, c, (c.0, b + 12 * page)).unwrap();
    assert_eq!(held(&mock), 5 * page, "one page moved, one new");
    assert_eq!(vm.detail().move_calls, 1);
    vm.release(r, a, S);
    // Page 0 and page 11 (ahead of c); page 1 is still shared, page 3 moved away.
    assert_eq!(vm.detail().unused_pages, 2);
    vm.verify([(r, n.0, n.1), (r, c.0, c.1)]).unwrap();
}

#[test]
fn a_small_pool_maps_ahead_no_more_than_its_floor() {
    // A pool whose peak is eight pages keeps a floor of a quarter page (1/32 of the
    // peak), so its growth maps ahead only the eighth of a batch always allowed:
    // two pages of the 16-page batch, not eight.
    let mock = MockBackend::shared();
    let (mut vm, r, page) = layer(&mock, VmConfig::default(), 64);
    let b = vm.base(r);
    let a = (b, b + 8 * page);
    vm.acquire(r, a, (b, b + 64 * page)).unwrap();
    assert_eq!(held(&mock), 10 * page, "eight pages and two ahead");
    vm.verify([(r, a.0, a.1)]).unwrap();
    // With a floor of the whole peak the batch maps its eight pages ahead.
    let mock = MockBackend::shared();
    let (mut vm, r, page) = layer(&mock, VmConfig::default().floor_max(1.0), 64);
    let b = vm.base(r);
    vm.acquire(r, (b, b + 8 * page), (b, b + 64 * page))
        .unwrap();
    assert_eq!(
        held(&mock),
        16 * page,
        "eight pages and a batch's eight ahead"
    );
    // A pool that cannot move memory keeps its batch whole.
    let mock = MockBackend::shared();
    let (mut vm, r, page) = layer(&mock, VmConfig::default().move_memory(false), 64);
    let b = vm.base(r);
    vm.acquire(r, (b, b + 8 * page), (b, b + 64 * page))
        .unwrap();
    assert_eq!(held(&mock), 16 * page, "no moving, the whole batch");
    // A floor of ten pages (half a batch or more): a one-page block after a peak of
    // sixteen maps its batch's fifteen pages ahead, not the floor's ten.
    let mock = MockBackend::shared();
    let cfg = VmConfig::default()
        .batch_cap(0)
        .cache(10 * page as usize, 0.0)
        .floor_max(1.0);
    let (mut vm, r, page) = layer(&mock, cfg, 64);
    let b = vm.base(r);
    vm.acquire(r, (b, b + 16 * page), (b, b + 64 * page))
        .unwrap();
    assert_eq!(held(&mock), 16 * page);
    let one = (b + 16 * page, b + 17 * page);
    vm.acquire(r, one, (one.0, b + 64 * page)).unwrap();
    assert_eq!(
        held(&mock),
        32 * page,
        "the page and the batch's fifteen ahead"
    );
}

#[test]
fn pages_retire_until_the_stream_has_passed_and_come_back_if_used() {
    let (mock, s, mut vm, r, page) = retiring_layer();
    let b = vm.base(r);
    let room = (b, b + 64 * page);
    let x = (b, b + 8 * page);
    let y = (b + 8 * page, b + 16 * page);
    vm.acquire(r, x, room).unwrap();
    vm.acquire(r, y, (y.0, room.1)).unwrap();
    vm.release(r, x, s);
    vm.release(r, y, s);
    vm.trim_nowait().unwrap();
    let d = vm.detail();
    assert_eq!((d.retiring_pages, d.unused_pages), (16, 0), "{d}");
    assert_eq!(
        held(&mock),
        16 * page,
        "still held while stream work may run"
    );
    assert_eq!(d.events_recorded, 1);
    vm.verify([]).unwrap();
    // A new block lands on a retiring chunk: it is taken back, not unmapped.
    let z = (b + page, b + 2 * page);
    vm.acquire(r, z, (b, b + 8 * page)).unwrap();
    let d = vm.detail();
    assert_eq!(
        (d.retiring_pages, d.unused_pages, d.used_pages),
        (12, 3, 1),
        "{d}"
    );
    assert_eq!(mock.counters().map_calls, 2, "nothing mapped for it");
    vm.verify([(r, z.0, z.1)]).unwrap();
    assert_eq!(vm.poll_retiring().unwrap(), 0, "the stream has not passed");
    mock.complete_stream(s);
    assert_eq!(vm.poll_retiring().unwrap(), 12 * page as usize);
    assert_eq!(held(&mock), 4 * page);
    vm.verify([(r, z.0, z.1)]).unwrap();
    vm.release(r, z, s);
    // trim waits for the event itself (a wait on the stream, not the device).
    assert_eq!(vm.trim().unwrap(), 4 * page as usize);
    assert_eq!(held(&mock), 0);
    assert!(vm.detail().event_waits >= 1);
    assert!(vm.unreserve(r).unwrap());
}

#[test]
fn the_cache_is_bounded_by_the_floor_above_the_recent_peak() {
    let mock = MockBackend::shared();
    let page = mock.granularity() as u64;
    let cfg = VmConfig::default()
        .map_batch_pages(1)
        .chunk_pages(1)
        .chunk_divisor(1)
        .cache(4 * page as usize, 0.0)
        .window_ops(100);
    let (mut vm, r, _) = layer(&mock, cfg, 1024);
    let b = vm.base(r);
    let room = (b, b + 1024 * page);
    let blocks: Vec<(u64, u64)> = (0..40)
        .map(|i| (b + i * page, b + (i + 1) * page))
        .collect();
    for &x in &blocks {
        vm.acquire(r, x, (x.0, room.1)).unwrap();
    }
    for &x in &blocks {
        vm.release(r, x, S);
    }
    assert_eq!(
        vm.detail().unused_pages,
        40,
        "what was freed since the peak stays"
    );
    // Small work for a few windows: the peak is forgotten, the cache shrinks.
    for _ in 0..200 {
        vm.acquire(r, blocks[0], room).unwrap();
        vm.release(r, blocks[0], S);
    }
    let d = vm.detail();
    assert!(d.unused_pages <= 4 + 1, "{d}");
    assert!(d.unmap_calls >= 1);
    vm.verify([]).unwrap();
    assert_eq!(vm.held().current, held(&mock));
}

#[test]
fn out_of_memory_gives_back_the_cache_and_maps_exactly() {
    let mock = MockBackend::shared_with(MockConfig::default().capacity(32 << 20).manual_events());
    let s = mock.create_stream().unwrap();
    let page = mock.granularity() as u64;
    let cfg = VmConfig::default()
        .cache(1 << 30, 0.0)
        .map_batch_pages(1)
        .chunk_pages(16)
        .chunk_divisor(1);
    let (mut vm, r, _) = layer(&mock, cfg, 64);
    let b = vm.base(r);
    let room = (b, b + 64 * page);
    let x = (b, b + 16 * page);
    vm.acquire(r, x, room).unwrap();
    vm.release(r, x, s);
    assert_eq!(
        held(&mock),
        16 * page,
        "kept as cache, one chunk of 16 pages"
    );
    // 10 pages do not fit beside the cache, whose one chunk is too large to move
    // there: it goes (after waiting for stream s), and the block gets its pages.
    let y = (b + 20 * page, b + 30 * page);
    vm.acquire(r, y, (y.0, room.1)).unwrap();
    assert_eq!(held(&mock), 10 * page);
    assert!(vm.detail().event_waits >= 1);
    vm.verify([(r, y.0, y.1)]).unwrap();
    // More than the device has: an error, and nothing counted.
    let z = (b + 36 * page, b + 60 * page);
    assert!(vm.acquire(r, z, (z.0, room.1)).is_err());
    vm.verify([(r, y.0, y.1)]).unwrap();
}

#[test]
fn unused_memory_moves_to_where_a_block_needs_it_and_its_old_pages_retire_in_order() {
    let mock = MockBackend::shared_with(MockConfig::default().host_backed().manual_events());
    let s = mock.create_stream().unwrap();
    let cfg = VmConfig::default()
        .cache(1 << 30, 0.0)
        .map_batch_pages(1)
        .chunk_pages(2)
        .chunk_divisor(1);
    let (mut vm, r, page) = layer(&mock, cfg, 64);
    let b = vm.base(r);
    let room = (b, b + 64 * page);
    let low = (b, b + 2 * page);
    let high = (b + 40 * page, b + 46 * page);
    vm.acquire(r, low, room).unwrap();
    vm.acquire(r, high, (high.0, room.1)).unwrap();
    mock.memset(
        devpool_core::DevicePtr(high.0),
        5,
        (high.1 - high.0) as usize,
        s,
    )
    .unwrap();
    vm.release(r, high, s);
    assert_eq!(held(&mock), 8 * page);
    // A block at pages 10..15: five pages, of which the cache gives two chunks of
    // two; the fifth is new memory.
    let mid = (b + 10 * page, b + 15 * page);
    vm.acquire(r, mid, (mid.0, b + 40 * page)).unwrap();
    let d = vm.detail();
    assert_eq!(held(&mock), 9 * page, "{d}");
    assert_eq!((d.moved_pages, d.retiring_pages), (4, 4), "{d}");
    assert_eq!(
        mock.counters().alias_calls,
        1,
        "one call for a run of donors"
    );
    vm.verify([(r, low.0, low.1), (r, mid.0, mid.1)]).unwrap();
    // The old pages stay mapped until stream s has passed the free.
    assert_eq!(vm.poll_retiring().unwrap(), 0);
    let mut back = vec![0u8; page as usize];
    mock.copy_to_host(
        &mut back,
        devpool_core::DevicePtr(b + 44 * page),
        StreamId::DEFAULT,
    )
    .unwrap();
    assert!(
        back.iter().all(|&x| x == 5),
        "queued work may still read them"
    );
    mock.complete_stream(s);
    vm.poll_retiring().unwrap();
    let d = vm.detail();
    assert_eq!((d.moved_pages, d.retiring_pages), (0, 0), "{d}");
    assert_eq!(held(&mock), 9 * page, "moving takes and gives nothing");
    vm.verify([(r, low.0, low.1), (r, mid.0, mid.1)]).unwrap();
    // A block on pages that moved away, before they are unmapped: the old mapping
    // goes first (waiting for the stream), then the pages are mapped anew.
    vm.release(r, mid, s);
    let again = (b + 20 * page, b + 23 * page);
    vm.acquire(r, again, (again.0, b + 40 * page)).unwrap();
    let d = vm.detail();
    assert!(d.moved_pages > 0, "{d}");
    // One of mid's old pages whose memory moved on to `again`.
    let q = (10..15)
        .find(|&q| vm.missing(r, b + q * page, b + (q + 1) * page) == 1)
        .expect("a page moved away");
    let onto = (b + q * page, b + (q + 1) * page);
    vm.acquire(r, onto, (onto.0, b + 20 * page)).unwrap();
    vm.verify([
        (r, low.0, low.1),
        (r, again.0, again.1),
        (r, onto.0, onto.1),
    ])
    .unwrap();
    assert!(vm.detail().event_waits >= 1);
    mock.memset(
        devpool_core::DevicePtr(onto.0),
        1,
        (onto.1 - onto.0) as usize,
        s,
    )
    .expect("mapped");
    assert_eq!(vm.held().current, held(&mock));
}

#[test]
fn a_failed_map_counts_nothing() {
    let mock = MockBackend::shared();
    let (mut vm, r, page) = layer(&mock, VmConfig::default(), 64);
    let b = vm.base(r);
    let room = (b, b + 64 * page);
    mock.fail_nth(FaultOn::Map, 1);
    assert!(vm.acquire(r, (b, b + 3 * page), room).is_err());
    vm.verify([]).unwrap();
    assert_eq!(held(&mock), 0);
    vm.acquire(r, (b, b + 3 * page), room).unwrap();
    vm.verify([(r, b, b + 3 * page)]).unwrap();
    assert!(!vm.unreserve(r).unwrap(), "a range with a live block stays");
    assert!(
        vm.acquire(r, (b + 100 * page, b + 101 * page), room)
            .is_err(),
        "outside the range"
    );
}

#[test]
fn dropping_the_layer_gives_everything_back() {
    let mock = MockBackend::shared_with(MockConfig::default().manual_events());
    let s = mock.create_stream().unwrap();
    {
        let (mut vm, r, page) = layer(&mock, VmConfig::default().cache(0, 0.0), 64);
        let b = vm.base(r);
        vm.acquire(r, (b, b + 5 * page), (b, b + 64 * page))
            .unwrap();
        vm.release(r, (b, b + 5 * page), s);
        vm.trim_nowait().unwrap();
        vm.acquire(r, (b + 30 * page, b + 31 * page), (b, b + 64 * page))
            .unwrap();
    }
    let c = mock.counters();
    assert_eq!(
        (c.bytes_in_use.current, c.reserves, c.unreserves),
        (0, 1, 1)
    );
    assert_eq!(mock.live_events(), 0);
}

#[test]
fn a_stream_destroyed_after_its_frees_does_not_stop_unmapping() {
    let mock = MockBackend::shared_with(MockConfig::default().manual_events());
    let (mut vm, r, page) = layer(
        &mock,
        VmConfig::default().cache(0, 0.0).map_batch_pages(1),
        64,
    );
    let b = vm.base(r);
    let room = (b, b + 64 * page);
    let side = mock.create_stream().unwrap();
    let (x, y) = ((b, b + 4 * page), (b + 8 * page, b + 12 * page));
    vm.acquire(r, x, room).unwrap();
    vm.acquire(r, y, room).unwrap();
    vm.release(r, x, side);
    // The program destroys its stream (its work is done or not: the layer cannot
    // ask it any more), and frees another block on the default stream.
    mock.destroy_stream(side).unwrap();
    vm.release(r, y, S);
    assert!(
        mock.record_event(mock.create_event().unwrap(), side)
            .is_err(),
        "the mock refuses a destroyed stream, as the driver does"
    );
    // Trim gives everything back: the layer waited for the device once and forgot
    // the stream.
    assert_eq!(vm.trim().unwrap(), 8 * page as usize);
    assert_eq!(held(&mock), 0);
    assert_eq!(vm.detail().streams_dropped, 1);
    // Later frees on the default stream still unmap in stream order, with no more
    // waits for the device.
    vm.acquire(r, x, room).unwrap();
    vm.release(r, x, S);
    vm.trim_nowait().unwrap();
    assert_eq!(
        vm.detail().retiring_pages,
        4,
        "behind the default stream's event"
    );
    mock.complete_stream(S);
    vm.poll_retiring().unwrap();
    assert_eq!(held(&mock), 0);
    assert_eq!(vm.detail().streams_dropped, 1);
}

#[test]
fn a_block_on_moved_pages_unmaps_only_them_and_the_rest_go_on_frees() {
    let mock = MockBackend::shared_with(MockConfig::default().manual_events());
    let s = mock.create_stream().unwrap();
    let cfg = VmConfig::default()
        .cache(1 << 30, 0.0)
        .map_batch_pages(1)
        .chunk_pages(1)
        .chunk_divisor(1);
    let (mut vm, r, page) = layer(&mock, cfg, 64);
    let b = vm.base(r);
    let room = (b, b + 64 * page);
    let low = (b, b + 3 * page / 2);
    let high = (b + 40 * page, b + 46 * page);
    vm.acquire(r, low, room).unwrap();
    vm.acquire(r, high, (high.0, room.1)).unwrap();
    vm.release(r, high, s);
    // Five pages at 10..15: the cache's memory moves there, one page per chunk; the
    // old addresses wait for stream s.
    let mid = (b + 10 * page, b + 15 * page);
    vm.acquire(r, mid, (mid.0, b + 40 * page)).unwrap();
    let moved = vm.detail().moved_pages;
    assert!(moved >= 2, "{}", vm.detail());
    // A block on one old address: that page's chunk is unmapped (waiting for s),
    // and no other.
    let q = (40..46)
        .find(|&q| vm.missing(r, b + q * page, b + (q + 1) * page) == 1)
        .expect("a page moved away");
    let onto = (b + q * page, b + (q + 1) * page);
    let unmapped = mock.counters().pages_unmapped;
    vm.acquire(r, onto, (onto.0, b + 64 * page)).unwrap();
    assert_eq!(mock.counters().pages_unmapped - unmapped, 1);
    assert!(vm.detail().moved_pages > 0, "{}", vm.detail());
    vm.verify([(r, low.0, low.1), (r, mid.0, mid.1), (r, onto.0, onto.1)])
        .unwrap();
    // The other old addresses go on frees once s has passed, with no allocation.
    mock.complete_stream(s);
    // A block that shares low's last page: freeing it maps or unmaps nothing itself.
    let shared = (b + 3 * page / 2, b + 2 * page);
    for _ in 0..16 {
        let before = mock.counters().pages_unmapped;
        vm.acquire(r, shared, room).unwrap();
        assert_eq!(
            mock.counters().pages_unmapped,
            before,
            "no unmap on allocation"
        );
        vm.release(r, shared, S);
    }
    assert_eq!(vm.detail().moved_pages, 0, "{}", vm.detail());
    assert!(mock.counters().pages_unmapped - unmapped >= moved);
    vm.verify([(r, low.0, low.1), (r, mid.0, mid.1), (r, onto.0, onto.1)])
        .unwrap();
    assert_eq!(vm.held().current, held(&mock));
}

#[test]
fn a_reserve_is_mapped_with_the_first_range_and_kept_until_a_trim() {
    let mock = MockBackend::shared();
    let page = mock.granularity() as u64;
    let cfg = VmConfig::default()
        .map_batch_pages(1)
        .cache(0, 0.0)
        .window_ops(16)
        .reserve(8 * page as usize - 100);
    let (mut vm, r, _) = layer(&mock, cfg.clone(), 64);
    // Rounded up to whole pages, mapped before any block, counted as held.
    assert_eq!(held(&mock), 8 * page);
    assert_eq!(vm.detail().unused_pages, 8);
    assert_eq!(vm.held().current, 8 * page);
    let maps = mock.counters().map_calls;
    assert_eq!(maps, 1, "the reserve is one mapping call");
    let b = vm.base(r);
    let room = (b, b + 64 * page);
    // Blocks inside the reserve call nothing; many windows of small work keep it.
    for _ in 0..200 {
        let x = (b, b + 3 * page);
        vm.acquire(r, x, room).unwrap();
        vm.release(r, x, S);
    }
    assert_eq!(mock.counters().map_calls, maps);
    assert_eq!(held(&mock), 8 * page);
    // A block past the reserve takes the reserve's unused memory (it moves there:
    // the pool holds no more), a larger one new memory too; once the work is small
    // again the new memory goes back, the reserve stays.
    let y = (b + 16 * page, b + 20 * page);
    vm.acquire(r, y, (y.0, room.1)).unwrap();
    assert_eq!(held(&mock), 8 * page);
    let z = (b + 24 * page, b + 36 * page);
    vm.acquire(r, z, (z.0, room.1)).unwrap();
    assert_eq!(held(&mock), 16 * page, "4 + 12 pages live: 8 new");
    vm.release(r, y, S);
    vm.release(r, z, S);
    for _ in 0..200 {
        let x = (b, b + page);
        vm.acquire(r, x, room).unwrap();
        vm.release(r, x, S);
    }
    assert_eq!(held(&mock), 8 * page, "{}", vm.detail());
    vm.verify([]).unwrap();
    // A second range maps no second reserve.
    let r2 = vm.reserve(64 * page as usize, page as usize).unwrap();
    assert_ne!(r2, r);
    assert_eq!(held(&mock), 8 * page);
    // A trim gives it back.
    vm.trim().unwrap();
    assert_eq!(held(&mock), 0);
    assert_eq!(vm.held().current, 0);
    // A reserve the device cannot hold maps nothing, and the layer works without.
    let small = MockBackend::shared_with(MockConfig::default().capacity(4 * page));
    let (mut vm, r, _) = layer(&small, cfg, 64);
    assert_eq!(held(&small), 0);
    let b = vm.base(r);
    vm.acquire(r, (b, b + 2 * page), (b, b + 64 * page))
        .unwrap();
    assert_eq!(held(&small), 2 * page);
    vm.verify([(r, b, b + 2 * page)]).unwrap();
}

/// `steps` blocks of 4 pages one after the other after a first, each a growth past
/// the most held; with `free_each`, after each one a temporary of 4 pages above it
/// is made and freed four times (the next block lands on its pages). Returns the
/// map calls after the first block, and the pages mapped at the end.
fn grow_in_steps(cfg: VmConfig, steps: usize, free_each: bool) -> (u64, u64) {
    let mock = MockBackend::shared();
    let (mut vm, r, page) = layer(&mock, cfg, 4096);
    let b = vm.base(r);
    let room_end = b + 4096 * page;
    let mut at = b;
    let mut live = Vec::new();
    let calls0 = {
        vm.acquire(r, (at, at + 4 * page), (at, room_end)).unwrap();
        live.push((at, at + 4 * page));
        at += 4 * page;
        mock.counters().map_calls
    };
    for _ in 0..steps {
        // A block that lives; with `free_each`, temporaries that go at once: the
        // pool then frees nearly as much as it allocates.
        vm.acquire(r, (at, at + 4 * page), (at, room_end)).unwrap();
        live.push((at, at + 4 * page));
        at += 4 * page;
        if free_each {
            for _ in 0..4 {
                vm.acquire(r, (at, at + 4 * page), (at, room_end)).unwrap();
                vm.release(r, (at, at + 4 * page), S);
            }
        }
    }
    vm.verify(live.iter().map(|&(lo, hi)| (r, lo, hi))).unwrap();
    (mock.counters().map_calls - calls0, vm.detail().mapped_pages)
}

#[test]
fn growth_in_one_direction_maps_ahead_in_bursts_and_churn_does_not() {
    let cfg = VmConfig::default()
        .map_batch_pages(4)
        .batch_cap(1)
        .burst_ops(devpool_vm::BURST_ON);
    // 64 blocks of 4 pages in a row, nothing freed: a burst. Without bursts each
    // block maps its own pages (and, with the cap, as many again at most).
    let (with, mapped_with) = grow_in_steps(cfg.clone(), 64, false);
    let (without, _) = grow_in_steps(cfg.clone().burst_ops(0), 64, false);
    assert!(
        with * 2 <= without,
        "a burst maps ahead: {with} map calls with bursts, {without} without"
    );
    // What was mapped ahead is at most an eighth of what is held on top of the
    // blocks (260 pages live) and a batch of what each one maps.
    assert!(
        mapped_with <= 260 + 260 / 8 + 8,
        "{mapped_with} pages mapped"
    );
    // The same growth while the pool frees as much as it allocates: no burst.
    let (churn_with, _) = grow_in_steps(cfg.clone(), 64, true);
    let (churn_without, _) = grow_in_steps(cfg.burst_ops(0), 64, true);
    assert_eq!(
        churn_with, churn_without,
        "growth amid frees maps nothing ahead"
    );
}

/// The map epoch moves when a page may have become mapped or usable again (a map, a
/// retiring chunk taken back, an unmap that failed), and not when pages only lose
/// their use or their mapping: what a placement search remembers relies on it.
#[test]
fn the_map_epoch_moves_when_pages_become_usable_again() {
    let (mock, s, mut vm, r, page) = retiring_layer();
    let b = vm.base(r);
    let room = (b, b + 64 * page);
    let e = vm.map_epoch();
    vm.acquire(r, (b, b + 8 * page), room).unwrap();
    assert!(vm.map_epoch() > e, "a map moves it");
    let e = vm.map_epoch();
    vm.release(r, (b, b + 8 * page), s);
    vm.trim_nowait().unwrap();
    assert_eq!(vm.detail().retiring_pages, 8);
    assert_eq!(
        vm.map_epoch(),
        e,
        "a free and pages chosen to retire do not"
    );
    assert_eq!(vm.unused_run(r, b, b + 8 * page, 2 * page), None);
    // A block on page 1 takes back the retiring chunk of pages 0 to 3: pages 2 and 3
    // are an unused run again, with no map.
    vm.acquire(r, (b + page, b + 2 * page), (b, b + 8 * page))
        .unwrap();
    assert_eq!(mock.counters().map_calls, 1);
    assert_eq!(
        vm.unused_run(r, b + 2 * page, b + 8 * page, 2 * page),
        Some(b + 2 * page)
    );
    assert!(vm.map_epoch() > e, "a chunk taken back moves it");
    // The stream passes, and the unmap of pages 4 to 7 fails: they stay mapped, as
    // cache, and are a run again.
    let e = vm.map_epoch();
    mock.complete_stream(s);
    mock.fail_nth(FaultOn::Unmap, 1);
    assert!(vm.poll_retiring().is_err());
    assert_eq!(mock.injected_faults(), 1);
    assert_eq!(
        vm.unused_run(r, b + 4 * page, b + 8 * page, 4 * page),
        Some(b + 4 * page)
    );
    assert!(vm.map_epoch() > e, "an unmap that failed moves it");
}
