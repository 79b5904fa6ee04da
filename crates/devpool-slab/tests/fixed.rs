//! The fixed-size pool: the conformance cases rewritten for requests up to the block
//! size (the suite's larger requests are refused by design), and its own promises:
//! one block size, O(1) reuse, no external fragmentation.
use devpool_core::{Allocator, Backend, Block, Error, Request, Rng, StreamId};
use devpool_slab::fixed;
use devpool_testing::conformance::{assert_empty, check_blocks};
use devpool_testing::{FaultOn, MockBackend, MockConfig};
use std::sync::Arc;

const BLOCK: usize = 4096;

#[test]
fn every_request_up_to_the_block_size_gets_one_block() {
    let mock = MockBackend::shared();
    let a = fixed(mock.clone(), BLOCK);
    let blocks: Vec<Block> = [0usize, 1, 255, 256, 1000, BLOCK]
        .iter()
        .map(|&s| a.alloc(s).unwrap())
        .collect();
    assert!(blocks.iter().all(|b| b.size == BLOCK));
    check_blocks(&blocks);
    for too_big in [BLOCK + 1, 1 << 30, usize::MAX] {
        assert!(matches!(a.alloc(too_big), Err(Error::TooLarge { .. })));
    }
    assert_eq!(a.stats().failures, 3);
    for b in blocks {
        a.free(b).unwrap();
    }
    assert_empty(&a, &mock);
}

#[test]
fn alignment_up_to_the_block_size() {
    let mock = MockBackend::shared();
    let a = fixed(mock.clone(), BLOCK);
    let mut blocks = Vec::new();
    for align in [256usize, 512, 1024, BLOCK] {
        let b = a.allocate(Request::new(100).with_align(align)).unwrap();
        assert!(b.ptr.is_aligned(align));
        blocks.push(b);
    }
    for bad in [0usize, 3, 1000, 2 * BLOCK] {
        assert!(matches!(
            a.allocate(Request::new(100).with_align(bad)),
            Err(Error::InvalidAlignment { .. })
        ));
    }
    for b in blocks {
        a.free(b).unwrap();
    }
    assert_empty(&a, &mock);
}

#[test]
fn a_freed_block_is_the_next_one_handed_out() {
    let mock = MockBackend::shared();
    let a = fixed(mock.clone(), BLOCK);
    let keep: Vec<Block> = (0..10).map(|_| a.alloc(BLOCK).unwrap()).collect();
    let calls = mock.counters().memory_calls();
    for &b in keep.iter().rev().step_by(3) {
        a.free(b).unwrap();
        let again = a.alloc(1).unwrap();
        assert_eq!(again.ptr, b.ptr);
        a.free(again).unwrap();
        let b2 = a.alloc(BLOCK).unwrap();
        assert_eq!(b2.ptr, b.ptr);
    }
    assert_eq!(
        mock.counters().memory_calls(),
        calls,
        "reuse makes no backend call"
    );
    for b in keep {
        a.free(b).unwrap();
    }
    assert_empty(&a, &mock);
}

#[test]
fn freed_blocks_are_reused_before_new_slabs() {
    let mock = MockBackend::shared();
    let a = fixed(mock.clone(), BLOCK);
    let pool_slots = {
        let b = a.alloc(1).unwrap();
        let n = a.pool(StreamId::DEFAULT).unwrap().detail()[0].slots_per_slab;
        a.free(b).unwrap();
        n
    };
    // Fill three slabs, free every other block, and fill again: no slab is added.
    let mut blocks: Vec<Block> = (0..3 * pool_slots)
        .map(|_| a.alloc(BLOCK).unwrap())
        .collect();
    let reserved = a.stats().reserved_bytes.current;
    let mut kept = Vec::new();
    for (i, b) in blocks.drain(..).enumerate() {
        if i % 2 == 0 {
            a.free(b).unwrap();
        } else {
            kept.push(b);
        }
    }
    let refill: Vec<Block> = (0..3 * pool_slots - kept.len())
        .map(|_| a.alloc(BLOCK).unwrap())
        .collect();
    assert_eq!(a.stats().reserved_bytes.current, reserved);
    kept.extend(refill);
    check_blocks(&kept);
    for b in kept {
        a.free(b).unwrap();
    }
    assert_empty(&a, &mock);
}

#[test]
fn four_threads_with_data() {
    let mock = MockBackend::shared_with(MockConfig::default().host_backed());
    let a = Arc::new(fixed(mock.clone(), BLOCK));
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let (a, mock) = (a.clone(), mock.clone());
            std::thread::spawn(move || {
                let mut rng = Rng::new(t + 10);
                let mut live: Vec<(Block, u8)> = Vec::new();
                for i in 0..2000u32 {
                    if live.is_empty() || rng.below(2) == 0 {
                        let b = a.alloc(rng.below(BLOCK as u64 + 1) as usize).unwrap();
                        let tag = ((t as u32 * 61 + i) % 251) as u8 + 1;
                        mock.memset(b.ptr, tag, b.size, b.stream).unwrap();
                        live.push((b, tag));
                    } else {
                        let (b, tag) = live.swap_remove(rng.below(live.len() as u64) as usize);
                        let mut back = vec![0u8; b.size];
                        mock.copy_to_host(&mut back, b.ptr, b.stream).unwrap();
                        assert!(back.iter().all(|&x| x == tag), "block lost its data");
                        a.free(b).unwrap();
                    }
                }
                live
            })
        })
        .collect();
    let live: Vec<Block> = threads
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .map(|(b, _)| b)
        .collect();
    check_blocks(&live);
    assert_eq!(a.stats().live_blocks.current, live.len() as u64);
    for b in live {
        a.free(b).unwrap();
    }
    assert_empty(&*a, &mock);
}

#[test]
fn out_of_memory_names_the_sizes_and_recovers() {
    let mock = MockBackend::shared_with(MockConfig::default().capacity(4 << 20));
    let a = fixed(mock.clone(), BLOCK);
    let mut blocks = Vec::new();
    let err = loop {
        match a.alloc(BLOCK) {
            Ok(b) => blocks.push(b),
            Err(e) => break e,
        }
    };
    let Error::OutOfMemory(info) = &err else {
        panic!("expected out of memory, got {err}");
    };
    assert_eq!(info.requested, BLOCK);
    assert_eq!(info.backend_total, 4 << 20);
    assert_eq!(info.live, (blocks.len() * BLOCK) as u64);
    let b = blocks.pop().unwrap();
    a.free(b).unwrap();
    blocks.push(
        a.alloc(BLOCK)
            .expect("a freed block serves the next request"),
    );
    for b in blocks {
        a.free(b).unwrap();
    }
    assert_empty(&a, &mock);
}

#[test]
fn backend_faults_lose_nothing() {
    let mock = MockBackend::shared();
    let a = fixed(mock.clone(), BLOCK);
    let mut live = Vec::new();
    for round in 0..20u64 {
        mock.fail_nth(FaultOn::Region, 1);
        loop {
            match a.alloc(BLOCK) {
                Ok(b) => live.push(b),
                Err(e) => {
                    assert!(matches!(e, Error::Backend(_)), "round {round}: {e}");
                    break;
                }
            }
        }
        let n = live.len() / 3;
        for b in live.drain(..n) {
            a.free(b).unwrap();
        }
    }
    mock.clear_faults();
    check_blocks(&live);
    assert_eq!(a.stats().live_blocks.current, live.len() as u64);
    for b in live {
        a.free(b).unwrap();
    }
    assert_empty(&a, &mock);
}
