//! The GPU checks on a host-backed mock: they pass on correct allocators and catch
//! overlapping blocks, lost data and stream-order violations.

use devpool_core::{
    direct, Allocator, Backend, BackendResult, Block, DevicePtr, DirectPool, Error, Request,
    Result, StreamId, StreamOrdered,
};
use devpool_testing::gpu_checks::{OverlapCheck, StreamOrderCheck};
use devpool_testing::{MockBackend, MockConfig};
use parking_lot::Mutex;
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

fn small(blocks: usize, seed: u64) -> OverlapCheck {
    OverlapCheck::new(blocks, seed).sizes(128 << 10, 2 << 20)
}

fn host_mock() -> Arc<MockBackend> {
    MockBackend::shared_with(MockConfig::default().host_backed().capacity(4 << 30))
}

#[test]
fn overlap_check_passes_on_correct_allocators() {
    let mock = host_mock();
    for alloc in [
        Box::new(direct(mock.clone())) as Box<dyn Allocator>,
        Box::new(devpool_testing::fixtures::reuse(mock.clone())),
    ] {
        let r = small(300, 11).run(&*alloc).unwrap();
        assert_eq!(r.allocations, 300);
        assert!(r.frees > 0 && r.cross_stream_frees > 0, "{r:?}");
        assert!(r.blocks_checked >= r.allocations - r.frees, "{r:?}");
        assert!(r.bytes_checked > 0);
        assert_eq!(alloc.stats().live_blocks.current, 0, "every block is freed");
    }
    assert_eq!(mock.counters().bytes_in_use.current, 0);
}

/// Hands out, every tenth time, a copy of the last block it made: two live blocks at
/// one address.
struct Aliasing {
    inner: StreamOrdered<DirectPool>,
    calls: AtomicUsize,
    last: Mutex<Option<Block>>,
    aliases: Mutex<HashSet<u64>>,
}

impl Allocator for Aliasing {
    devpool_core::forward_allocator!(|a| &a.inner; backend, record_stream, stats, trim);
    fn name(&self) -> &str {
        "aliasing"
    }
    fn allocate(&self, req: Request) -> Result<Block> {
        if self.calls.fetch_add(1, Ordering::Relaxed) % 10 == 9 {
            if let Some(mut b) = *self.last.lock() {
                if self.aliases.lock().insert(b.ptr.0) {
                    b.requested = b.size.min(req.size);
                    return Ok(b);
                }
            }
        }
        let b = self.inner.allocate(req)?;
        *self.last.lock() = Some(b);
        Ok(b)
    }
    fn deallocate(&self, block: Block, stream: StreamId) -> Result<()> {
        if self.aliases.lock().remove(&block.ptr.0) {
            return Ok(());
        }
        self.inner.deallocate(block, stream)
    }
}

#[test]
fn overlap_check_catches_two_blocks_at_one_address() {
    let mock = host_mock();
    let a = Aliasing {
        inner: direct(mock.clone()),
        calls: AtomicUsize::new(0),
        last: Mutex::new(None),
        aliases: Mutex::new(HashSet::new()),
    };
    let e = small(300, 12)
        .run(&a)
        .expect_err("aliased blocks must be found");
    assert!(matches!(e, Error::Corrupted { .. }), "{e}");
}

/// The mock, except that one memset in `every` leaves one wrong byte behind.
struct Corrupting {
    inner: Arc<MockBackend>,
    every: usize,
    memsets: AtomicUsize,
}

impl Backend for Corrupting {
    devpool_core::forward_backend!(|s| &*s.inner; device, granularity, mem_info, alloc_region, free_region, create_stream, destroy_stream, synchronize, create_event, destroy_event, record_event, event_done, wait_event, copy_to_device, copy_to_host, counters);
    fn name(&self) -> &str {
        "corrupting"
    }
    fn memset(&self, ptr: DevicePtr, value: u8, len: usize, stream: StreamId) -> BackendResult<()> {
        self.inner.memset(ptr, value, len, stream)?;
        let n = self.memsets.fetch_add(1, Ordering::Relaxed);
        if n % self.every == self.every - 1 {
            let at = ptr.offset(len / 2);
            self.inner.copy_to_device(at, &[value ^ 0x40], stream)?;
        }
        Ok(())
    }
}

#[test]
fn overlap_check_catches_a_wrong_byte_on_the_device() {
    let backend = Arc::new(Corrupting {
        inner: host_mock(),
        every: 97,
        memsets: AtomicUsize::new(0),
    });
    let e = small(300, 13)
        .run(&direct(backend.clone()))
        .expect_err("the wrong byte must be found");
    match e {
        Error::Corrupted { detail, .. } => assert!(detail.contains("reads"), "{detail}"),
        e => panic!("unexpected {e}"),
    }
    assert_eq!(
        backend.counters().bytes_in_use.current,
        0,
        "blocks are freed on failure too"
    );
}

fn tiny_stream_check() -> StreamOrderCheck {
    StreamOrderCheck {
        block_size: 4096,
        busy_bytes: 4096,
        busy_reps: 2,
    }
}

fn manual_mock() -> Arc<MockBackend> {
    MockBackend::shared_with(
        MockConfig::default()
            .host_backed()
            .manual_events()
            .capacity(1 << 30),
    )
}

#[test]
fn stream_order_check_passes_on_correct_allocators() {
    let mock = manual_mock();
    for alloc in [
        Box::new(direct(mock.clone())) as Box<dyn Allocator>,
        Box::new(devpool_testing::fixtures::reuse(mock.clone())),
    ] {
        let r = tiny_stream_check().run(&*alloc).unwrap();
        // The mock's work completes only when a stream is synchronized: the freed
        // block was still busy when the next one was handed out, and not given.
        assert!(r.freed_on_other_stream.busy_at_alloc, "{r:?}");
        assert!(!r.freed_on_other_stream.aliased, "{r:?}");
        // A region freed back to the backend waits for the device (as cuMemFree does), so
        // the address may come back to another stream, but never while still busy.
        assert!(
            !(r.freed_on_own_stream.aliased && r.freed_on_own_stream.busy_at_alloc),
            "{r:?}"
        );
        assert_eq!(alloc.stats().live_blocks.current, 0);
    }
}

#[test]
fn stream_order_check_catches_a_cache_shared_by_streams() {
    let mock = manual_mock();
    let a = devpool_testing::fixtures::shared_cache(mock.clone());
    let e = tiny_stream_check()
        .run(&a)
        .expect_err("reuse by another stream while busy must be found");
    assert!(matches!(e, Error::Corrupted { .. }), "{e}");
    assert_eq!(
        a.stats().live_blocks.current,
        0,
        "blocks are freed on failure"
    );
}
