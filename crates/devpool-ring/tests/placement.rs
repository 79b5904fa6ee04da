//! A proptest model test of the placement alone: random carves (sizes, alignments),
//! frees (retired at once, or waiting for events), event completions, pins and
//! growth, against a list of every block whose bytes may not be handed out again
//! (live, or waiting for events that have not completed). After every step the
//! placement's invariants hold and no new block overlaps such a block.
use devpool_ring::{Placement, State};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

const LO: u64 = 1 << 40;

#[derive(Clone, Debug)]
enum Op {
    Carve { size: u64, align_log: u8 },
    Free { pick: usize, waiting: bool },
    Complete { pick: usize },
    Pin { max: usize },
    Grow { pages: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1u64..64, 8u8..=14).prop_map(|(k, align_log)| Op::Carve { size: k * 256 * 9, align_log }),
        5 => (any::<usize>(), prop::bool::weighted(0.2)).prop_map(|(pick, waiting)| Op::Free { pick, waiting }),
        1 => any::<usize>().prop_map(|pick| Op::Complete { pick }),
        1 => (0usize..8).prop_map(|max| Op::Pin { max }),
        1 => (1u64..4).prop_map(|pages| Op::Grow { pages }),
    ]
}

#[derive(Clone, Copy, Debug)]
struct B {
    ptr: u64,
    size: u64,
    seq: u64,
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn placement_matches_model(ops in proptest::collection::vec(op(), 1..200)) {
        let page = 64 << 10;
        let mut p = Placement::new(LO, LO + 4 * page);
        // Blocks whose bytes are not free: live, or waiting for an event.
        let mut live: BTreeMap<u64, B> = BTreeMap::new();
        let mut waiting: BTreeMap<u64, B> = BTreeMap::new();
        let mut done: BTreeSet<u64> = BTreeSet::new();
        for op in ops {
            match op {
                Op::Carve { size, align_log } => {
                    let align = 1u64 << align_log;
                    if let Some((ptr, seq)) = p.carve(size, size - 7, align) {
                        prop_assert_eq!(ptr % align, 0);
                        prop_assert!(ptr >= LO && ptr + size <= p.hi());
                        for b in live.values().chain(waiting.values()) {
                            prop_assert!(
                                ptr + size <= b.ptr || b.ptr + b.size <= ptr,
                                "{ptr:#x}+{size} overlaps {b:?}"
                            );
                        }
                        live.insert(ptr, B { ptr, size, seq });
                    }
                }
                Op::Free { pick, waiting: w } => {
                    if live.is_empty() {
                        continue;
                    }
                    let key = *live.keys().nth(pick % live.len()).unwrap();
                    let b = live.remove(&key).unwrap();
                    p.free(b.seq, b.ptr, b.size, b.size - 7, w).unwrap();
                    prop_assert!(p.free(b.seq, b.ptr, b.size, b.size - 7, w).is_err(), "double free caught");
                    if w {
                        waiting.insert(b.ptr, b);
                    }
                }
                Op::Complete { pick } => {
                    if waiting.is_empty() {
                        continue;
                    }
                    let key = *waiting.keys().nth(pick % waiting.len()).unwrap();
                    let b = waiting.remove(&key).unwrap();
                    done.insert(b.seq);
                }
                Op::Pin { max } => {
                    p.pin_front(max);
                }
                Op::Grow { pages } => {
                    let hi = p.hi() + pages * page;
                    p.set_hi(hi);
                    prop_assert_eq!(p.hi(), hi);
                }
            }
            // Only events the model completed may let a waiting block go.
            let mut asked = Vec::new();
            p.retire(&mut |seq| { asked.push(seq); done.contains(&seq) });
            for seq in &p.waiting_seqs() {
                prop_assert!(!done.contains(seq) || !asked.contains(seq), "seq {seq} done but kept");
            }
            p.verify().map_err(TestCaseError::fail)?;
            let sh = p.shape();
            prop_assert_eq!(sh.live, live.len());
            prop_assert_eq!(sh.waiting, p.waiting_seqs().len());
        }
        // Free everything, complete every event: the ring is empty again.
        for (_, b) in std::mem::take(&mut live) {
            p.free(b.seq, b.ptr, b.size, b.size - 7, false).unwrap();
        }
        p.retire(&mut |_| true);
        p.verify().map_err(TestCaseError::fail)?;
        prop_assert!(p.is_empty(), "{:?}", p.shape());
        let (ptr, _) = p.carve(256, 256, 256).expect("an empty ring has room");
        prop_assert_eq!(ptr, LO);
    }
}

#[test]
fn strict_fifo_reuses_the_same_bytes_forever() {
    // Blocks of three sizes, freed in order, eight live: the ring never needs more than
    // the bytes it was given, and never passes or pins anything.
    let mut p = Placement::new(LO, LO + (8 << 20));
    let mut q = std::collections::VecDeque::new();
    for i in 0..10_000u64 {
        let size = [256 << 10, 512 << 10, 768 << 10][(i % 3) as usize];
        let (ptr, seq) = p.carve(size, size, 256).expect("room in a FIFO ring");
        q.push_back((ptr, seq, size));
        if q.len() > 8 {
            let (ptr, seq, size) = q.pop_front().unwrap();
            p.free(seq, ptr, size, size, false).unwrap();
        }
    }
    p.verify().unwrap();
    let sh = p.shape();
    assert_eq!((sh.live, sh.freed, sh.pinned), (8, 0, 0));
    assert!(p.jumps() > 100, "it went round: {} wraps", p.jumps());
}

#[test]
fn a_block_freed_early_retires_with_its_elders() {
    let mut p = Placement::new(LO, LO + 4096);
    let a = p.carve(1024, 1024, 256).unwrap();
    let b = p.carve(1024, 1024, 256).unwrap();
    let c = p.carve(1024, 1024, 256).unwrap();
    p.free(b.1, b.0, 1024, 1024, false).unwrap();
    assert_eq!(p.shape().freed, 1, "b waits for a");
    p.free(a.1, a.0, 1024, 1024, false).unwrap();
    assert_eq!(p.shape().freed, 0, "a and b retired together");
    assert_eq!(p.shape().tail, c.0);
    // A block waiting for events stays until they complete, and holds back the tail.
    let d = p.carve(1024, 1024, 256).unwrap();
    p.free(c.1, c.0, 1024, 1024, true).unwrap();
    p.free(d.1, d.0, 1024, 1024, false).unwrap(); // the newest: back at once
    assert_eq!(p.waiting_seqs(), vec![c.1]);
    p.retire(&mut |_| false);
    assert!(!p.is_empty());
    p.retire(&mut |s| s == c.1);
    assert!(p.is_empty());
    assert_eq!(State::Live, State::Live);
}

#[test]
fn pinning_passes_a_long_lived_block() {
    // A block that never dies at the bottom, then a stream of blocks freed in order.
    let mut p = Placement::new(LO, LO + (4 << 20));
    let weights = p.carve(1 << 20, 1 << 20, 256).unwrap();
    let mut q = std::collections::VecDeque::new();
    for _ in 0..1000 {
        let got = match p.carve(512 << 10, 512 << 10, 256) {
            Some(x) => x,
            None => {
                assert!(p.can_pin(16), "something behind the live block is freed");
                assert_eq!(p.pin_front(16), 1, "the weights are passed");
                p.carve(512 << 10, 512 << 10, 256)
                    .expect("room behind the weights")
            }
        };
        assert!(got.0 >= weights.0 + (1 << 20), "never over the weights");
        q.push_back(got);
        if q.len() > 4 {
            let (ptr, seq) = q.pop_front().unwrap();
            p.free(seq, ptr, 512 << 10, 512 << 10, false).unwrap();
        }
    }
    p.verify().unwrap();
    assert_eq!(p.shape().pinned, 1);
    p.free(weights.1, weights.0, 1 << 20, 1 << 20, false)
        .unwrap();
    assert_eq!(
        p.shape().pinned,
        0,
        "a pinned block's bytes come back at its free"
    );
}
