//! Every row of docs/BAD_INPUTS.md, checked: one function per row, applied to the
//! direct allocator, to the adaptor stack over it, and to each strategy.
mod common;

use devpool_adaptors::{Limit, Logging, Statistics, Tracking};
use devpool_core::{
    direct, Allocator, Backend, Block, DeviceId, DevicePtr, DirectPool, Error, Request, StreamId,
    StreamOrdered,
};
use devpool_testing::conformance::{assert_empty, check_blocks, free_all_then_empty};
use devpool_testing::{MockBackend, MockConfig};
use std::sync::Arc;

type Make = dyn Fn(Arc<MockBackend>) -> Box<dyn Allocator> + Sync;

/// Nothing the allocator reports changed.
fn assert_unchanged(a: &dyn Allocator, before: &devpool_core::Stats, what: &str) {
    let s = a.stats();
    assert_eq!(
        (
            s.live_blocks.current,
            s.live_bytes.current,
            s.allocated_bytes.current
        ),
        (
            before.live_blocks.current,
            before.live_bytes.current,
            before.allocated_bytes.current
        ),
        "{what} changed what is live"
    );
    assert_eq!(s.frees, before.frees, "{what} counted a free");
}

fn is_not_owned_or_double(e: &Error) -> bool {
    matches!(e, Error::NotOwned { .. } | Error::DoubleFree { .. })
}

/// A fresh mock and the allocator `make` builds over it.
fn fresh(make: &Make) -> (Arc<MockBackend>, Box<dyn Allocator>) {
    let mock = MockBackend::shared();
    let a = make(mock.clone());
    (mock, a)
}

/// An allocator over a mock with manual events, and a block of 4 KiB allocated on
/// stream 1 and freed on stream 2, so that its free waits for stream 2's work.
fn pending_cross_stream_free(
    make: &Make,
) -> (Arc<MockBackend>, Box<dyn Allocator>, [StreamId; 2], Block) {
    let mock = MockBackend::shared_with(MockConfig::default().manual_events());
    let a = make(mock.clone());
    let (s1, s2) = (MockBackend::stream(1), MockBackend::stream(2));
    let b = a.allocate(Request::new(4096).on_stream(s1)).unwrap();
    a.deallocate(b, s2)
        .expect("a free on another stream is valid");
    (mock, a, [s1, s2], b)
}

/// Row: zero size. A real, aligned, distinct block that frees normally.
pub fn zero_size(make: &Make) {
    let (mock, a) = fresh(make);
    let blocks: Vec<Block> = (0..3).map(|_| a.alloc(0).expect("zero is valid")).collect();
    check_blocks(&blocks);
    assert!(blocks.iter().all(|b| b.size >= 1 && b.requested == 0));
    assert_eq!(a.stats().live_bytes.current, 0);
    assert_eq!(a.stats().live_blocks.current, 3);
    free_all_then_empty(&*a, &mock, blocks);
}

/// Row: huge size (1 PiB, more than the device). Out of memory after the retry,
/// counted as a failure; the allocator still works.
pub fn huge_size(make: &Make) {
    let (mock, a) = fresh(make);
    let e = a.alloc(1 << 50).expect_err("1 PiB");
    assert!(e.is_oom() || matches!(e, Error::TooLarge { .. }), "{e}");
    if let Error::OutOfMemory(info) = &e {
        assert_eq!(info.requested, 1 << 50);
        assert_eq!(info.backend_total, mock.mem_info().unwrap().1);
    }
    assert!(a.stats().failures >= 1);
    let b = a.alloc(4096).expect("still works");
    a.free(b).unwrap();
    assert_empty(&*a, &mock);
}

/// Row: size overflow (sizes whose rounding overflows). An error, never a panic.
pub fn size_overflow(make: &Make) {
    let (mock, a) = fresh(make);
    for size in [usize::MAX, usize::MAX - 255, usize::MAX / 2 + 1] {
        let e = a.alloc(size).expect_err("cannot be served");
        assert!(
            e.is_oom() || matches!(e, Error::TooLarge { .. } | Error::Limit(_)),
            "{size}: {e}"
        );
        let e = a
            .allocate(Request::new(size).with_align(1 << 20))
            .expect_err("cannot be served");
        assert!(
            e.is_oom()
                || matches!(
                    e,
                    Error::TooLarge { .. } | Error::InvalidAlignment { .. } | Error::Limit(_)
                ),
            "{size} aligned: {e}"
        );
    }
    assert_empty(&*a, &mock);
}

/// Row: alignment not a power of two. `InvalidAlignment` with the value asked for.
pub fn alignment_not_power_of_two(make: &Make) {
    let (mock, a) = fresh(make);
    for align in [0usize, 3, 1000, 768, usize::MAX] {
        match a.allocate(Request::new(64).with_align(align)) {
            Err(Error::InvalidAlignment { align: got }) => assert_eq!(got, align),
            other => panic!("align {align}: {other:?}"),
        }
    }
    assert_empty(&*a, &mock);
}

/// Row: alignment larger than supported. `InvalidAlignment`, never a block that is
/// not aligned.
pub fn alignment_too_large(make: &Make) {
    let (mock, a) = fresh(make);
    for align in [1usize << 40, 1 << 62, 1 << 63] {
        match a.allocate(Request::new(64).with_align(align)) {
            Err(Error::InvalidAlignment { .. } | Error::TooLarge { .. }) => {}
            Err(e) if e.is_oom() => {}
            Ok(b) => panic!("align {align}: got {b:?}"),
            Err(e) => panic!("align {align}: {e}"),
        }
    }
    assert_empty(&*a, &mock);
}

/// Rows: foreign pointer, pointer inside a block, forged size. `NotOwned`, changing
/// nothing.
pub fn forged_blocks(make: &Make) {
    let (mock, a) = fresh(make);
    let x = a.alloc(100_000).unwrap();
    let y = a.alloc(3000).unwrap();
    let z = a
        .allocate(Request::new(3000).on_stream(devpool_testing::MockBackend::stream(5)))
        .unwrap();
    let before = a.stats();
    let cases = [
        (
            "foreign pointer",
            Block {
                ptr: DevicePtr(0x1234_5600),
                ..x
            },
        ),
        (
            "pointer inside a block",
            Block {
                ptr: x.ptr.offset(256),
                ..x
            },
        ),
        (
            "forged size",
            Block {
                size: x.size + (1 << 20),
                ..x
            },
        ),
        ("size of another block", Block { size: y.size, ..x }),
        (
            "stream of another pool",
            Block {
                stream: z.stream,
                ..x
            },
        ),
        (
            "stream with no pool",
            Block {
                stream: devpool_testing::MockBackend::stream(77),
                ..x
            },
        ),
    ];
    for (what, b) in cases {
        let e = a.free(b).expect_err(what);
        assert!(matches!(e, Error::NotOwned { .. }), "{what}: {e}");
        assert_unchanged(&*a, &before, what);
    }
    for b in [x, y, z] {
        a.free(b).unwrap();
    }
    assert_empty(&*a, &mock);
}

/// Row: stale block after its address was handed out again. Refused, unless the new
/// block is identical in every field (then no allocator can tell them apart).
pub fn stale_block_after_reuse(make: &Make) {
    let (mock, a) = fresh(make);
    let mut stale = Vec::new();
    for size in [256usize, 4096, 100_000] {
        let x = a.alloc(size).unwrap();
        a.free(x).unwrap();
        let y = a.alloc(size).unwrap();
        if y == x {
            a.free(y).unwrap();
            continue;
        }
        let before = a.stats();
        let e = a.free(x).expect_err("a stale block");
        assert!(is_not_owned_or_double(&e), "{e}");
        assert_unchanged(&*a, &before, "a stale free");
        stale.push(y);
    }
    for y in stale {
        a.free(y).expect("the new owner's block is untouched");
    }
    assert_empty(&*a, &mock);
}

/// Row: forged handle. Refused without change, or (by a pool that does not need
/// the handle) accepted as the real block: never another block freed.
pub fn forged_handle(make: &Make) {
    let (mock, a) = fresh(make);
    let x = a.alloc(100_000).unwrap();
    let y = a.alloc(3000).unwrap();
    let before = a.stats();
    for forged in [y.handle, x.handle ^ 0x5, x.handle ^ (1 << 61)] {
        if forged == x.handle {
            continue;
        }
        match a.free(Block {
            handle: forged,
            ..x
        }) {
            Err(e) => {
                assert!(is_not_owned_or_double(&e), "handle {forged:#x}: {e}");
                assert_unchanged(&*a, &before, "a forged handle");
            }
            Ok(()) => {
                assert_eq!(a.stats().live_blocks.current, 1, "x only was freed");
                assert!(a.free(x).is_err(), "x is gone");
                a.free(y).expect("y is untouched");
                assert_empty(&*a, &mock);
                return;
            }
        }
    }
    a.free(x).unwrap();
    a.free(y).unwrap();
    assert_empty(&*a, &mock);
}

/// Row: forged requested size (pointer and size right), on a large block and on a
/// small one. Refused without change, or accepted as the real block with the
/// counters still exact; an allocator that trusts the field for blocks of up to
/// `trusted` bytes (the slab, the hybrid's slab route) frees the memory exactly and
/// counts the forged figure, which this checks to the byte.
pub fn forged_requested(make: &Make, trusted: usize) {
    for size in [100_000usize, 3000] {
        let trusts = size <= trusted;
        let mock = MockBackend::shared();
        let a = make(mock.clone());
        let x = a.alloc(size).unwrap();
        let y = a.alloc(512).unwrap();
        let before = a.stats();
        let forged = Block {
            requested: x.requested - 1000,
            ..x
        };
        match a.free(forged) {
            Err(e) => {
                assert!(
                    !trusts,
                    "{size}: refused ({e}) by an allocator said to trust it"
                );
                assert!(is_not_owned_or_double(&e), "{e}");
                assert_unchanged(&*a, &before, "a forged requested size");
                a.free(x).unwrap();
            }
            Ok(()) => {
                let s = a.stats();
                assert_eq!(s.live_blocks.current, 1);
                let counted = if trusts {
                    y.requested + 1000
                } else {
                    y.requested
                };
                assert_eq!(
                    s.live_bytes.current, counted as u64,
                    "{size}: live bytes after a free with a forged requested size"
                );
                assert!(a.free(x).is_err(), "{size}: x is gone");
            }
        }
        a.free(y).unwrap();
        if trusts {
            // The forged 1000 bytes stay counted as live; the memory is all back.
            a.trim().unwrap();
            assert_eq!(a.stats().live_blocks.current, 0);
            assert_eq!(mock.counters().bytes_in_use.current, 0);
        } else {
            assert_empty(&*a, &mock);
        }
    }
}

/// Row: double free. `DoubleFree` or `NotOwned`, changing nothing.
pub fn double_free(make: &Make) {
    let (mock, a) = fresh(make);
    let keep = a.alloc(512).unwrap();
    let b = a.alloc(70_000).unwrap();
    a.free(b).unwrap();
    let before = a.stats();
    for _ in 0..2 {
        let e = a.free(b).expect_err("double free");
        assert!(is_not_owned_or_double(&e), "{e}");
        assert_unchanged(&*a, &before, "a double free");
    }
    a.free(keep).unwrap();
    assert_empty(&*a, &mock);
}

/// Row: double free while a cross-stream free is pending. `DoubleFree`.
pub fn double_free_while_pending(make: &Make) {
    let (mock, a, [s1, s2], b) = pending_cross_stream_free(make);
    for free_on in [s1, s2] {
        let e = a.deallocate(b, free_on).expect_err("pending");
        assert!(is_not_owned_or_double(&e), "{e}");
    }
    let c = a.allocate(Request::new(8192).on_stream(s1)).unwrap();
    a.record_stream(&c, s2).unwrap();
    a.free(c).unwrap();
    let e = a.free(c).expect_err("pending after record_stream");
    assert!(is_not_owned_or_double(&e), "{e}");
    mock.complete_all();
    assert_empty(&*a, &mock);
}

/// Row: free on a wrong device. `WrongDevice`, changing nothing.
pub fn wrong_device(make: &Make) {
    let mock = MockBackend::shared_with(MockConfig::default().device(1));
    let a = make(mock.clone());
    let b = a.alloc(4096).unwrap();
    assert_eq!(b.device, DeviceId(1));
    let before = a.stats();
    let other = Block {
        device: DeviceId(0),
        ..b
    };
    match a.free(other) {
        Err(Error::WrongDevice {
            block_device,
            allocator_device,
            ..
        }) => assert_eq!((block_device, allocator_device), (DeviceId(0), DeviceId(1))),
        r => panic!("{r:?}"),
    }
    assert!(matches!(
        a.record_stream(&other, devpool_testing::MockBackend::stream(3)),
        Err(Error::WrongDevice { .. })
    ));
    assert_unchanged(&*a, &before, "a free on the wrong device");
    a.free(b).unwrap();
    assert_empty(&*a, &mock);
}

/// Row: free on another stream. Accepted; the memory is reused by no stream until
/// the work queued on the freeing stream has completed.
pub fn free_on_another_stream(make: &Make) {
    let (mock, a, [s1, s2], b) = pending_cross_stream_free(make);
    // Blocks are held until the checks are done: a backend free waits for the device
    // (as cuMemFree does), which would complete the pending work legitimately.
    let mut held = Vec::new();
    for s in [s1, s2, StreamId::DEFAULT] {
        let x = a.allocate(Request::new(4096).on_stream(s)).unwrap();
        assert_ne!(
            x.ptr, b.ptr,
            "reused by {s:?} before the free's event completed"
        );
        held.push(x);
    }
    for x in held {
        a.free(x).unwrap();
    }
    mock.complete_stream(s2);
    assert_empty(&*a, &mock);
}

/// Row: free after the allocator is dropped. Dropping gives all memory back; a stale
/// block shown to another allocator is not owned. (Freeing through a dropped
/// allocator does not compile: see the crate docs.)
pub fn after_drop(make: &Make) {
    let mock = MockBackend::shared();
    let a: Arc<dyn Allocator> = Arc::from(make(mock.clone()));
    let b = a.alloc(1 << 20).unwrap();
    let handle = a.clone();
    drop(a);
    handle.free(b).expect("the Arc kept the allocator alive");
    let c = handle.alloc(1 << 20).unwrap();
    drop(handle);
    assert_eq!(
        mock.counters().bytes_in_use.current,
        0,
        "a dropped allocator gives everything back, live blocks included"
    );
    let fresh = make(mock.clone());
    let e = fresh.free(c).expect_err("a stale block");
    assert!(is_not_owned_or_double(&e), "{e}");
    assert_empty(&*fresh, &mock);
}

/// Row: too many streams. `Limit` past the allocator's stream table, or out of
/// memory first where each stream's pool takes a large region or address range;
/// never a panic, and the streams already served keep working. The reserved handle
/// `u64::MAX` is `Unsupported`.
pub fn too_many_streams(make: &Make) {
    let (mock, a) = fresh(make);
    let mut blocks = Vec::new();
    let (mut limited, mut oom) = (0, 0);
    for s in 1..=2048u64 {
        match a.allocate(Request::new(256).on_stream(devpool_testing::MockBackend::stream(s))) {
            Ok(b) => blocks.push(b),
            Err(Error::Limit(msg)) => {
                assert!(msg.contains("streams"), "{msg}");
                limited += 1;
            }
            Err(e) if e.is_oom() => oom += 1,
            Err(e) => panic!("stream {s}: {e}"),
        }
    }
    assert!(
        limited + oom > 0,
        "2048 streams are more than any table holds"
    );
    assert!(
        oom > 0 || blocks.len() >= devpool_core::DEFAULT_MAX_STREAMS,
        "at least the default number of streams is served ({})",
        blocks.len()
    );
    assert!(matches!(
        a.allocate(Request::new(1).on_stream(devpool_testing::MockBackend::stream(u64::MAX))),
        Err(Error::Unsupported(_))
    ));
    // Served streams still serve; a never-seen stream owns nothing.
    let again = a
        .allocate(Request::new(256).on_stream(blocks[0].stream))
        .unwrap();
    blocks.push(again);
    let stranger = Block {
        stream: devpool_testing::MockBackend::stream(1 << 40),
        ..blocks[0]
    };
    assert!(matches!(a.free(stranger), Err(Error::NotOwned { .. })));
    free_all_then_empty(&*a, &mock, blocks);
}

/// Row: record_stream of a block that is not live. `NotOwned`.
pub fn record_stream_of_dead_block(make: &Make) {
    let (mock, a) = fresh(make);
    let b = a.alloc(4096).unwrap();
    a.free(b).unwrap();
    let e = a
        .record_stream(&b, devpool_testing::MockBackend::stream(9))
        .expect_err("freed");
    assert!(is_not_owned_or_double(&e), "{e}");
    let foreign = Block {
        ptr: DevicePtr(0x4000_0000),
        ..b
    };
    assert!(a
        .record_stream(&foreign, devpool_testing::MockBackend::stream(9))
        .is_err());
    assert_empty(&*a, &mock);
}

/// The allocator `make` builds over `mock`, boxed.
fn boxed<A: Allocator + 'static>(
    mock: Arc<MockBackend>,
    make: impl FnOnce(Arc<MockBackend>) -> A,
) -> Box<dyn Allocator> {
    Box::new(make(mock))
}

/// One `#[test]` per row for the allocator built by `$make`; `trusts_requested = N`
/// marks allocators that count the requested size a free is given, for blocks of up
/// to `N` bytes (the slab).
macro_rules! bad_input_suite {
    ($name:ident, $make:expr) => {
        bad_input_suite!($name, $make, trusts_requested = 0);
    };
    ($name:ident, $make:expr, trusts_requested = $trusted:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            fn make(mock: Arc<MockBackend>) -> Box<dyn Allocator> {
                boxed(mock, $make)
            }
            #[test]
            fn zero_size() {
                super::zero_size(&make)
            }
            #[test]
            fn huge_size() {
                super::huge_size(&make)
            }
            #[test]
            fn size_overflow() {
                super::size_overflow(&make)
            }
            #[test]
            fn alignment_not_power_of_two() {
                super::alignment_not_power_of_two(&make)
            }
            #[test]
            fn alignment_too_large() {
                super::alignment_too_large(&make)
            }
            #[test]
            fn forged_blocks() {
                super::forged_blocks(&make)
            }
            #[test]
            fn stale_block_after_reuse() {
                super::stale_block_after_reuse(&make)
            }
            #[test]
            fn forged_handle() {
                super::forged_handle(&make)
            }
            #[test]
            fn double_free() {
                super::double_free(&make)
            }
            #[test]
            fn double_free_while_pending() {
                super::double_free_while_pending(&make)
            }
            #[test]
            fn wrong_device() {
                super::wrong_device(&make)
            }
            #[test]
            fn free_on_another_stream() {
                super::free_on_another_stream(&make)
            }
            #[test]
            fn after_drop() {
                super::after_drop(&make)
            }
            #[test]
            fn too_many_streams() {
                super::too_many_streams(&make)
            }
            #[test]
            fn record_stream_of_dead_block() {
                super::record_stream_of_dead_block(&make)
            }
            #[test]
            fn forged_requested() {
                super::forged_requested(&make, $trusted)
            }
        }
    };
}

bad_input_suite!(direct_pool, |m: Arc<MockBackend>| direct(m));
bad_input_suite!(adaptor_stack, |m: Arc<MockBackend>| {
    Statistics::new(Limit::new(
        Logging::new(Tracking::new(direct(m)), std::io::sink()),
        1 << 60,
    ))
});
bad_input_suite!(reuse_pool, |m: Arc<MockBackend>| common::reuse(m));

bad_input_suite!(
    slab,
    |m: Arc<MockBackend>| devpool_slab::slab(m, devpool_slab::SlabConfig::geometric(8, 16 << 20)),
    trusts_requested = usize::MAX
);
bad_input_suite!(tlsf_virtual, |m: Arc<MockBackend>| {
    devpool_tlsf::tlsf(m, devpool_tlsf::TlsfConfig::default())
});
bad_input_suite!(tlsf_region, |m: Arc<MockBackend>| {
    devpool_tlsf::tlsf(
        m,
        devpool_tlsf::TlsfConfig::default().mode(devpool_tlsf::TlsfMode::Region),
    )
});
bad_input_suite!(buddy_virtual, |m: Arc<MockBackend>| {
    devpool_buddy::buddy(m, devpool_buddy::BuddyConfig::default())
});
bad_input_suite!(buddy_region, |m: Arc<MockBackend>| {
    devpool_buddy::buddy(m, devpool_buddy::BuddyConfig::region())
});
bad_input_suite!(arena, |m: Arc<MockBackend>| {
    devpool_arena::arena(m, devpool_arena::ArenaConfig::default())
});
bad_input_suite!(
    hybrid_training,
    |m: Arc<MockBackend>| devpool_hybrid::hybrid(m, devpool_hybrid::HybridConfig::training()),
    trusts_requested = devpool_hybrid::HybridConfig::training().small_max
);
bad_input_suite!(
    hybrid_with_buddy,
    |m: Arc<MockBackend>| devpool_hybrid::hybrid(m, devpool_hybrid::HybridConfig::with_buddy()),
    trusts_requested = devpool_hybrid::HybridConfig::with_buddy().small_max
);

// The exact answers of the core layer, where the rows above accept a family.

#[test]
fn direct_ignores_a_forged_requested_size() {
    // The direct pool records each block's requested size and counts that one: a
    // free with another figure changes nothing in the count.
    let mock = MockBackend::shared();
    let a = direct(mock.clone());
    let keep = a.alloc(3000).unwrap();
    let x = a.alloc(100_000).unwrap();
    a.free(Block {
        requested: usize::MAX,
        ..x
    })
    .unwrap();
    assert_eq!(a.stats().live_blocks.current, 1);
    assert_eq!(a.stats().live_bytes.current, 3000);
    assert!(a.free(x).is_err());
    a.free(keep).unwrap();
    assert_eq!(a.stats().live_bytes.current, 0);
    assert_eq!(mock.counters().bytes_in_use.current, 0);
}

#[test]
fn direct_exact_errors() {
    let a = direct(MockBackend::shared());
    assert!(matches!(a.alloc(1 << 50), Err(Error::OutOfMemory(_))));
    assert!(matches!(a.alloc(usize::MAX), Err(Error::TooLarge { .. })));
    let g = a.backend().granularity();
    assert!(matches!(
        a.allocate(Request::new(1).with_align(2 * g)),
        Err(Error::InvalidAlignment { .. })
    ));
    let b = a
        .allocate(Request::new(1).with_align(g))
        .expect("granularity is supported");
    assert!(b.ptr.is_aligned(g));
    a.free(b).unwrap();
    // The direct pool forgets a block once freed: a double free is not owned.
    assert!(matches!(a.free(b), Err(Error::NotOwned { .. })));
}

#[test]
fn pending_double_free_is_named() {
    let mock = MockBackend::shared_with(MockConfig::default().manual_events());
    let a = direct(mock.clone());
    let b = a
        .allocate(Request::new(4096).on_stream(devpool_testing::MockBackend::stream(1)))
        .unwrap();
    a.deallocate(b, devpool_testing::MockBackend::stream(2))
        .unwrap();
    assert_eq!(a.pending_frees(), 1);
    assert!(matches!(a.free(b), Err(Error::DoubleFree { .. })));
    mock.complete_all();
    a.trim().unwrap();
    assert_eq!(a.pending_frees(), 0);
}

#[test]
fn stream_table_bound() {
    let mock = MockBackend::shared();
    let backend: Arc<dyn Backend> = mock.clone();
    let b2 = backend.clone();
    let a =
        StreamOrdered::with_max_streams("direct", backend, 4, move |_| DirectPool::new(b2.clone()));
    let mut served = Vec::new();
    let mut first_refusal = None;
    for s in 1..=16u64 {
        match a.allocate(Request::new(1).on_stream(devpool_testing::MockBackend::stream(s))) {
            Ok(b) => served.push(b),
            Err(Error::Limit(_)) => {
                first_refusal.get_or_insert(s);
            }
            Err(e) => panic!("{e}"),
        }
    }
    let first = first_refusal.expect("a table for 4 streams refuses some of 16");
    assert!(
        first > 4,
        "the first 4 streams are always served (refused at {first})"
    );
    for b in served {
        a.free(b).unwrap();
    }
    assert_eq!(mock.counters().bytes_in_use.current, 0);
}

#[test]
fn limit_and_guard_answers() {
    // The adaptors that refuse on their own: a cap, and guard bookkeeping.
    let a = Limit::new(direct(MockBackend::shared()), 1 << 20);
    assert!(matches!(a.alloc(2 << 20), Err(Error::Limit(_))));
    assert!(matches!(a.alloc(usize::MAX), Err(Error::Limit(_))));
    let mock = MockBackend::shared_with(MockConfig::default().host_backed());
    let g = devpool_adaptors::Guarded::new(direct(mock));
    let b = g
        .allocate(Request::new(10).on_stream(devpool_testing::MockBackend::stream(1)))
        .unwrap();
    g.deallocate(b, devpool_testing::MockBackend::stream(2))
        .unwrap();
    assert!(
        matches!(g.free(b), Err(Error::NotOwned { .. })),
        "guarded forgets a block at its free, pending or not"
    );
}
