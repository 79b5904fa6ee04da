//! Giving pages back in stream order, on a real GPU: the backend's chunks and
//! aliases count memory once, an unmap waits for nothing, and the page layer unmaps
//! a page only after the stream that last used it has passed, with no device-wide
//! wait on the allocation or free path (work queued on another stream stays
//! queued through all of it).

use devpool_core::{Backend, EventId, Pool, Request, StreamId};
use devpool_cuda::CudaBackend;
use devpool_tlsf::{TlsfConfig, TlsfMode, TlsfPool, VmConfig};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes used on the device now, by everyone.
fn used(b: &CudaBackend) -> u64 {
    let (free, total) = b.mem_info().unwrap();
    total - free
}

/// Slack for memory the driver takes for itself between two readings.
const SLACK: u64 = 64 << 20;

/// Keep `stream` busy for a while, kernel-free: memsets over a 1 GiB region, many
/// times. Returns the region (free it when done) and an event recorded after.
fn keep_busy(b: &CudaBackend, stream: StreamId, reps: u8) -> (devpool_core::DevicePtr, EventId) {
    let work = b.alloc_region(1 << 30).unwrap();
    for i in 0..reps {
        b.memset(work, i, 1 << 30, stream).unwrap();
    }
    let e = b.create_event().unwrap();
    b.record_event(e, stream).unwrap();
    (work, e)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn chunks_and_aliases_count_memory_once() {
    let b = CudaBackend::new(0).expect("a CUDA device 0");
    let g = b.granularity();
    let range = b.reserve(32 * g, g).unwrap();
    let before = used(&b);
    // Three pages in two chunks: one physical allocation of two pages, one of one.
    b.map_chunks(range, &[2 * g, g]).unwrap();
    let mapped = used(&b);
    assert!(
        mapped >= before + 3 * g as u64 && mapped <= before + 3 * g as u64 + SLACK,
        "used {before} -> {mapped}"
    );
    assert!(b.unmap(range, g).is_err(), "half a chunk");
    let s = StreamId::DEFAULT;
    b.memset(range, 0x3C, 3 * g, s).unwrap();
    // The same memory at a second address, in another order: the one-page chunk
    // first.
    let to = range.offset(16 * g);
    b.alias(to, &[(range.offset(2 * g), g), (range, 2 * g)])
        .unwrap();
    let aliased = used(&b);
    assert!(
        aliased <= mapped + SLACK,
        "no memory taken: {mapped} -> {aliased}"
    );
    let mut back = vec![0u8; 64];
    b.copy_to_host(&mut back, to.offset(g + 100), s).unwrap();
    assert!(
        back.iter().all(|&x| x == 0x3C),
        "the bytes show through the alias"
    );
    b.memset(to, 0x77, g, s).unwrap();
    b.copy_to_host(&mut back, range.offset(2 * g + 5), s)
        .unwrap();
    assert!(back.iter().all(|&x| x == 0x77), "and the other way round");
    // The first mappings go; the memory lives on at the alias.
    b.unmap(range, 3 * g).unwrap();
    let one_left = used(&b);
    assert!(
        one_left + SLACK >= mapped,
        "still held at the alias: {mapped} -> {one_left}"
    );
    b.copy_to_host(&mut back, to.offset(2 * g), s).unwrap();
    assert!(back.iter().all(|&x| x == 0x3C));
    let c = b.counters();
    assert_eq!(
        (c.chunks_created, c.chunks_released, c.alias_calls),
        (2, 0, 1)
    );
    b.unmap(to, 3 * g).unwrap();
    let after = used(&b);
    assert!(
        after <= before + SLACK,
        "used {before} -> {after} at the end"
    );
    assert_eq!(b.counters().chunks_released, 2);
    assert_eq!(b.counters().bytes_in_use.current, 0);
    b.unreserve(range, 32 * g).unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn pages_go_back_after_their_stream_passed_and_nothing_waits_for_the_device() {
    let b = CudaBackend::new(0).expect("a CUDA device 0");
    let backend: Arc<dyn Backend> = b.clone();
    let (s, other) = (b.create_stream().unwrap(), b.create_stream().unwrap());
    // No cache, a window of one operation: unused pages are given back at once.
    let pool = TlsfPool::new(
        backend,
        TlsfConfig::default().mode(TlsfMode::Virtual).pages(
            VmConfig::default()
                .cache(0, 0.0)
                .window_ops(1)
                .map_batch_pages(1),
        ),
    );
    let blk = pool
        .allocate(&Request::new(256 << 20).on_stream(s))
        .unwrap();
    // Slow, kernel-free work on the block's stream writes the block; unrelated, much
    // longer work runs on another stream.
    let (busy_s, done_s) = keep_busy(&b, s, 24);
    b.memset(blk.ptr, 0xAB, blk.size, s).unwrap();
    let e_block = b.create_event().unwrap();
    b.record_event(e_block, s).unwrap();
    let (busy_other, done_other) = keep_busy(&b, other, 255);
    let start = used(&b);
    let t0 = Instant::now();
    pool.deallocate(&blk).unwrap();
    for _ in 0..4 {
        let x = pool.allocate(&Request::new(4096).on_stream(s)).unwrap();
        pool.deallocate(&x).unwrap();
    }
    let quick = t0.elapsed();
    let d = pool.detail();
    assert!(
        !b.event_done(e_block).unwrap(),
        "the memset on s must still be queued for this test to mean anything"
    );
    assert!(
        d.pages.retiring_pages >= 127,
        "the block's pages wait for s: {d}"
    );
    assert!(
        used(&b) + SLACK >= start,
        "still held while s may write them"
    );
    assert!(
        quick < Duration::from_millis(50),
        "the frees returned at once ({quick:?}): no wait for the device"
    );
    // s passes; the next frees unmap the block's pages. The other stream's work is
    // still queued: nothing waited for the device.
    b.wait_event(e_block).unwrap();
    assert!(b.event_done(done_s).unwrap());
    for _ in 0..16 {
        let x = pool.allocate(&Request::new(4096).on_stream(s)).unwrap();
        pool.deallocate(&x).unwrap();
    }
    let d = pool.detail();
    assert!(
        d.pages.mapped_pages <= 2,
        "the block's pages went back: {d}"
    );
    assert!(
        !b.event_done(done_other).unwrap(),
        "work on the other stream is still queued: the pool never waited for the device"
    );
    assert!(
        used(&b) + (256 << 20) <= start + SLACK,
        "driver-reported memory fell by the block's pages"
    );
    b.synchronize(other).unwrap();
    pool.trim().unwrap();
    for (work, e) in [(busy_s, done_s), (busy_other, done_other)] {
        b.free_region(work, 1 << 30).unwrap();
        b.destroy_event(e).unwrap();
    }
    b.destroy_event(e_block).unwrap();
    drop(pool);
    assert_eq!(b.counters().bytes_in_use.current, 0);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn moved_memory_serves_a_new_block_with_its_data_intact_elsewhere() {
    let b = CudaBackend::new(0).expect("a CUDA device 0");
    let backend: Arc<dyn Backend> = b.clone();
    let s = b.create_stream().unwrap();
    // A large cache, so the freed block's pages stay; no batch.
    let pool = TlsfPool::new(
        backend,
        TlsfConfig::default().mode(TlsfMode::Virtual).pages(
            VmConfig::default()
                .cache(0, 0.0)
                .map_batch_pages(1)
                .chunk_pages(1),
        ),
    );
    let a = pool.allocate(&Request::new(64 << 20).on_stream(s)).unwrap();
    let keep = pool.allocate(&Request::new(2 << 20).on_stream(s)).unwrap();
    b.memset(keep.ptr, 0x11, keep.size, s).unwrap();
    pool.deallocate(&a).unwrap();
    let held = b.counters().bytes_in_use.current;
    let before = used(&b);
    // Larger than the hole: it lands above, and the hole's memory moves there.
    let c = pool.allocate(&Request::new(96 << 20).on_stream(s)).unwrap();
    let d = pool.detail();
    assert!(d.pages.move_calls >= 1, "{d}");
    assert_eq!(
        b.counters().bytes_in_use.current,
        held + (32 << 20),
        "only what the hole could not give is new"
    );
    assert!(used(&b) <= before + (32 << 20) + SLACK);
    b.memset(c.ptr, 0x22, c.size, s).unwrap();
    let mut back = vec![0u8; 4096];
    for off in [0, 40 << 20, c.size - 4096] {
        b.copy_to_host(&mut back, c.ptr.offset(off), s).unwrap();
        assert!(back.iter().all(|&x| x == 0x22), "new block at {off}");
    }
    b.copy_to_host(&mut back, keep.ptr, s).unwrap();
    assert!(
        back.iter().all(|&x| x == 0x11),
        "the neighbour kept its bytes"
    );
    pool.deallocate(&c).unwrap();
    pool.deallocate(&keep).unwrap();
    pool.trim().unwrap();
    drop(pool);
    assert_eq!(b.counters().bytes_in_use.current, 0);
}
