//! Reset, rewind, trim and the chunk policy.
use devpool_arena::{arena, ArenaConfig, MIB};
use devpool_core::{Allocator, Backend, Block, Error, Pool, Request, StreamId};
use devpool_testing::conformance::check_blocks;
use devpool_testing::{MockBackend, MockConfig};

fn small() -> ArenaConfig {
    ArenaConfig::default()
        .chunk_size(MIB)
        .max_chunk_size(4 * MIB)
}

#[test]
fn blocks_of_an_ended_frame_are_rejected() {
    let mock = MockBackend::shared();
    let a = arena(mock.clone(), small());
    let x = a.alloc(1000).unwrap();
    let y = a.alloc(3000).unwrap();
    a.free(y).unwrap();
    a.reset().unwrap();
    let before = a.stats();
    assert_eq!(before.live_blocks.current, 0, "reset reclaims every block");
    assert_eq!(before.live_bytes.current, 0);
    for b in [x, y] {
        assert!(
            matches!(a.free(b), Err(Error::DoubleFree { .. })),
            "a block of the last frame is already freed"
        );
        assert!(a
            .record_stream(&b, devpool_testing::MockBackend::stream(9))
            .is_err());
    }
    assert_eq!(a.stats(), before, "rejected frees change nothing");
    // The new frame works and its blocks are checked as usual.
    let z = a.alloc(1000).unwrap();
    a.free(z).unwrap();
    assert!(matches!(a.free(z), Err(Error::DoubleFree { .. })));
    let s = a.detail();
    assert_eq!((s.resets, s.reclaimed_blocks), (1, 1));
}

#[test]
fn memory_is_reused_after_reset_without_backend_calls() {
    let mock = MockBackend::shared();
    let a = arena(mock.clone(), small());
    let sizes: Vec<usize> = (0..200).map(|i| 1000 + 997 * (i % 37)).collect();
    let place = |b: &Block| (b.ptr, b.size);
    let mut layout = Vec::new();
    let mut calls_after_first = 0;
    for frame in 0..10 {
        let blocks: Vec<Block> = sizes.iter().map(|&s| a.alloc(s).unwrap()).collect();
        check_blocks(&blocks);
        let now: Vec<_> = blocks.iter().map(place).collect();
        match frame {
            0 => calls_after_first = mock.counters().memory_calls(),
            // The first reset puts the largest chunk first; from then on every frame
            // lies the same way.
            1 => layout = now,
            _ => assert!(now == layout, "frame {frame} got other memory"),
        }
        a.reset().unwrap();
    }
    assert_eq!(
        mock.counters().memory_calls(),
        calls_after_first,
        "steady frames cost no backend call"
    );
}

#[test]
fn frees_are_counted_at_once_and_reused_at_rewind() {
    for rewind in [true, false] {
        let mock = MockBackend::shared();
        let a = arena(mock.clone(), small().rewind_when_empty(rewind));
        let x = a.alloc(4096).unwrap();
        let keep = a.alloc(100).unwrap();
        a.free(x).unwrap();
        assert_eq!(a.stats().live_bytes.current, 100, "the free is counted now");
        let y = a.alloc(4096).unwrap();
        assert_ne!(y.ptr, x.ptr, "no reuse while the frame has live blocks");
        a.free(keep).unwrap();
        a.free(y).unwrap();
        let z = a.alloc(4096).unwrap();
        assert_eq!(
            z.ptr == x.ptr,
            rewind,
            "an empty arena rewinds to its start only when asked to"
        );
        assert_eq!(a.detail().rewinds, u64::from(rewind));
        a.free(z).unwrap();
    }
}

#[test]
fn the_last_block_is_reused_at_once_when_freed() {
    for reuse in [true, false] {
        let mock = MockBackend::shared();
        let a = arena(mock.clone(), small().reuse_last(reuse));
        let x = a.alloc(1000).unwrap();
        let y = a.alloc(5000).unwrap();
        let z = a.alloc(3000).unwrap();
        a.free(z).unwrap();
        a.free(y).unwrap();
        let w = a.alloc(6000).unwrap();
        assert_eq!(w.ptr == y.ptr, reuse, "stack-order frees give room back");
        check_blocks(&[x, w]);
        for gone in [y, z] {
            assert!(
                matches!(a.free(gone), Err(Error::DoubleFree { .. })),
                "a reused address does not revive the old block"
            );
        }
        // A block that is not the last one keeps its room until the frame ends.
        a.free(x).unwrap();
        let v = a.alloc(100).unwrap();
        assert_ne!(v.ptr, x.ptr);
        assert_eq!(a.stats().live_blocks.current, 2);
    }
}

#[test]
fn a_reused_record_does_not_revive_the_old_block() {
    let mock = MockBackend::shared();
    let a = arena(mock.clone(), small());
    let keep = a.alloc(100).unwrap();
    let x = a.alloc(4096).unwrap();
    a.free(x).unwrap();
    let y = a.alloc(4096).unwrap();
    assert_eq!((y.ptr, y.size), (x.ptr, x.size), "same room");
    assert_ne!(y.handle, x.handle, "another block all the same");
    assert!(matches!(a.free(x), Err(Error::DoubleFree { .. })));
    assert!(matches!(
        a.record_stream(&x, devpool_testing::MockBackend::stream(5)),
        Err(Error::DoubleFree { .. })
    ));
    assert_eq!(a.stats().live_blocks.current, 2, "y is still live");
    a.free(y).unwrap();
    a.free(keep).unwrap();
}

#[test]
fn stack_order_use_holds_no_more_host_memory() {
    let mock = MockBackend::shared();
    let a = arena(mock.clone(), small());
    let keep = a.alloc(100).unwrap();
    let pool = a.pool(StreamId::DEFAULT).unwrap();
    let pairs = |n: usize| {
        for i in 0..n {
            let x = a.alloc(1000 + i % 4000).unwrap();
            let y = a.alloc(300).unwrap();
            a.free(y).unwrap();
            a.free(x).unwrap();
        }
    };
    pairs(10);
    let host = pool.metadata_bytes();
    let reserved = a.stats().reserved_bytes.current;
    pairs(50_000);
    assert_eq!(
        pool.metadata_bytes(),
        host,
        "records are given back in stack order"
    );
    assert_eq!(
        a.stats().reserved_bytes.current,
        reserved,
        "and so is the room"
    );
    let s = a.stats();
    let n = 1 + 2 * (10 + 50_000) as u64;
    assert_eq!((s.allocations, s.frees), (n, n - 1));
    assert_eq!(a.detail().epoch_blocks, 1);
    a.free(keep).unwrap();
}

#[test]
fn reset_keeps_the_largest_chunks() {
    for keep in [0usize, 1, 2, usize::MAX] {
        let mock = MockBackend::shared();
        let a = arena(mock.clone(), small().keep_chunks(keep));
        for _ in 0..40 {
            a.alloc(256 << 10).unwrap();
        }
        let pool = a.pool(StreamId::DEFAULT).unwrap();
        let mut before = pool.chunk_sizes();
        assert!(before.len() >= 3, "the frame spans several chunks");
        assert!(
            before.windows(2).any(|w| w[0] != w[1]),
            "chunks grow: {before:?}"
        );
        a.reset().unwrap();
        before.sort_unstable_by(|x, y| y.cmp(x));
        let kept: Vec<usize> = before.iter().copied().take(keep).collect();
        assert_eq!(pool.chunk_sizes(), kept, "keep {keep}");
        let held: usize = kept.iter().sum();
        assert_eq!(a.stats().reserved_bytes.current, held as u64);
        assert_eq!(mock.counters().bytes_in_use.current, held as u64);
        // The next frame starts in the largest kept chunk.
        let b = a.alloc(1).unwrap();
        a.free(b).unwrap();
    }
}

#[test]
fn trim_gives_back_spares_then_everything() {
    let mock = MockBackend::shared();
    let a = arena(mock.clone(), small().keep_chunks(usize::MAX));
    let big: Vec<Block> = (0..30).map(|_| a.alloc(256 << 10).unwrap()).collect();
    let chunks = a.detail().chunks;
    a.reset().unwrap();
    assert_eq!(a.detail().chunks, chunks, "all kept");
    let x = a.alloc(1000).unwrap();
    let used: u64 = a.pool(StreamId::DEFAULT).unwrap().chunk_sizes()[0] as u64;
    let released = a.trim().unwrap();
    assert!(released > 0);
    assert_eq!(a.detail().chunks, 1, "only the chunk in use stays");
    assert_eq!(a.stats().reserved_bytes.current, used);
    assert_eq!(mock.counters().bytes_in_use.current, used);
    a.free(x).unwrap();
    a.trim().unwrap();
    assert_eq!(a.stats().reserved_bytes.current, 0);
    assert_eq!(mock.counters().bytes_in_use.current, 0);
    assert!(
        a.free(big[0]).is_err(),
        "blocks of old frames stay rejected"
    );
    let y = a.alloc(5000).unwrap();
    a.free(y).unwrap();
}

#[test]
fn an_oversized_block_gets_its_own_chunk_and_the_cursor_stays() {
    let mock = MockBackend::shared();
    let a = arena(mock.clone(), small());
    let x = a.alloc(1000).unwrap();
    let big = a.alloc(64 * MIB).unwrap();
    let y = a.alloc(1000).unwrap();
    assert_eq!(
        y.ptr.0,
        x.ptr.0 + x.size as u64,
        "bumping goes on where it was"
    );
    check_blocks(&[x, big, y]);
    let sizes = a.pool(StreamId::DEFAULT).unwrap().chunk_sizes();
    assert_eq!(sizes.len(), 2);
    assert!(sizes.iter().any(|&s| s >= big.size));
    // After a reset the big chunk comes first and serves the next frame.
    a.reset().unwrap();
    let z = a.alloc(32 * MIB).unwrap();
    assert_eq!(z.ptr, big.ptr);
    assert_eq!(mock.counters().region_allocs, 2, "no new chunk");
}

#[test]
fn larger_alignments_are_honoured_across_chunks() {
    let mock = MockBackend::shared();
    let a = arena(mock.clone(), small().growth(1));
    let mut blocks = Vec::new();
    for align_log in 8..=24 {
        let align = 1usize << align_log;
        let b = a
            .allocate(Request::new(3000).with_align(align))
            .unwrap_or_else(|e| panic!("align {align}: {e}"));
        assert!(b.ptr.is_aligned(align));
        blocks.push(b);
    }
    check_blocks(&blocks);
    assert!(matches!(
        a.allocate(Request::new(1).with_align(1 << 31)),
        Err(Error::InvalidAlignment { .. })
    ));
}

#[test]
fn cross_stream_frees_fence_the_rewind_not_the_reset() {
    let mock = MockBackend::shared_with(MockConfig::default().manual_events());
    let a = arena(mock.clone(), small());
    let (s1, s2, s3) = (
        devpool_testing::MockBackend::stream(1),
        devpool_testing::MockBackend::stream(2),
        devpool_testing::MockBackend::stream(3),
    );
    let x = a.allocate(Request::new(4096).on_stream(s1)).unwrap();
    a.deallocate(x, s2).unwrap();
    assert_eq!(a.stats().live_blocks.current, 0, "freed at once");
    assert!(matches!(a.deallocate(x, s2), Err(Error::DoubleFree { .. })));
    let y = a.allocate(Request::new(4096).on_stream(s1)).unwrap();
    assert_ne!(y.ptr, x.ptr, "stream 2 may still use x");
    a.record_stream(&y, s3).unwrap();
    a.free(y).unwrap();
    mock.complete_stream(s2);
    let z = a.allocate(Request::new(4096).on_stream(s1)).unwrap();
    assert!(z.ptr != x.ptr && z.ptr != y.ptr, "stream 3 may still use y");
    a.free(z).unwrap();
    mock.complete_stream(s3);
    let w = a.allocate(Request::new(4096).on_stream(s1)).unwrap();
    assert_eq!(w.ptr, x.ptr, "both streams are done: the arena rewinds");
    // A reset does not wait: the caller vouches for the device work.
    a.deallocate(w, s2).unwrap();
    a.reset().unwrap();
    let v = a.allocate(Request::new(4096).on_stream(s1)).unwrap();
    assert_eq!(v.ptr, x.ptr);
    a.free(v).unwrap();
    mock.complete_all();
    a.trim().unwrap();
    assert_eq!(mock.counters().bytes_in_use.current, 0);
}

#[test]
fn each_stream_has_its_own_arena() {
    let mock = MockBackend::shared();
    let a = arena(mock.clone(), small());
    let (s1, s2) = (
        devpool_testing::MockBackend::stream(1),
        devpool_testing::MockBackend::stream(2),
    );
    let x = a.allocate(Request::new(1000).on_stream(s1)).unwrap();
    let y = a.allocate(Request::new(1000).on_stream(s2)).unwrap();
    assert_eq!(a.detail().chunks, 2);
    a.reset_stream(s1).unwrap();
    assert!(a.free(x).is_err(), "stream 1's frame ended");
    a.free(y).unwrap();
    a.reset_stream(devpool_testing::MockBackend::stream(77))
        .unwrap();
}

#[test]
fn too_many_chunks_is_an_error() {
    let mock = MockBackend::shared();
    let a = arena(mock.clone(), small().growth(1).max_chunks(2));
    // Blocks as large as a chunk (the driver's whole pages), so each takes its own.
    let chunk = mock.region_bytes(MIB).unwrap();
    a.alloc(chunk).unwrap();
    a.alloc(chunk).unwrap();
    assert!(matches!(a.alloc(chunk), Err(Error::Limit(_))));
    a.reset().unwrap();
    a.alloc(chunk).unwrap();
}

#[test]
fn stats_follow_the_epochs() {
    let mock = MockBackend::shared();
    let a = arena(mock.clone(), small());
    let blocks: Vec<Block> = (1..=50).map(|i| a.alloc(i * 700).unwrap()).collect();
    let want_live: u64 = blocks.iter().map(|b| b.requested as u64).sum();
    let want_alloc: u64 = blocks.iter().map(|b| b.size as u64).sum();
    let s = a.stats();
    assert_eq!(s.live_bytes.current, want_live);
    assert_eq!(s.allocated_bytes.current, want_alloc);
    let st = a.detail();
    assert_eq!(st.epoch_blocks, blocks.len() as u64);
    assert!(st.epoch_used_bytes >= want_alloc);
    assert_eq!(st.chunk_bytes, s.reserved_bytes.current);
    a.reset().unwrap();
    let s2 = a.stats();
    assert_eq!((s2.live_bytes.current, s2.allocated_bytes.current), (0, 0));
    assert_eq!(s2.live_bytes.peak, want_live, "peaks survive the reset");
    assert_eq!(s2.allocations, blocks.len() as u64);
    assert_eq!(s2.frees, 0, "a reset is not a free");
    assert_eq!(a.detail().epoch_used_bytes, 0);
    let p = a.pool(StreamId::DEFAULT).unwrap();
    assert!(p.metadata_bytes() > 0);
    assert!(!p.describe_cache().is_empty());
    assert!(Pool::stats(p).reserved_bytes.current > 0);
}

#[test]
fn released_chunks_make_old_blocks_foreign() {
    let mock = MockBackend::shared();
    let a = arena(mock.clone(), small().keep_chunks(0));
    let x = a.alloc(1000).unwrap();
    a.reset().unwrap();
    assert_eq!(mock.counters().bytes_in_use.current, 0);
    assert!(matches!(a.free(x), Err(Error::NotOwned { .. })));
    let mut forged = a.alloc(1000).unwrap();
    forged.handle |= 1 << 63;
    assert!(matches!(a.free(forged), Err(Error::NotOwned { .. })));
}
