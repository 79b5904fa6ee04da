//! A free's index work waits for the next call, and an allocation right after it may
//! take the block back (crate docs of `parked`): that must change nothing anyone can
//! see. Two pools on two mocks get the same random calls; one is made to settle
//! after every call (its `stats` releases a parked block), the other parks as it
//! likes. Every call must give both the same result (address, size, handle, or the
//! same error), both mocks the same calls, and at the end both pools the same
//! statistics and detail. Frees followed at once by an allocation of the same size,
//! the case a parked block is taken back in, are drawn often; double frees of a
//! block just freed, and checks of it, too.
use devpool_core::{Backend, Block, Pool, Request};
use devpool_testing::MockBackend;
use devpool_tlsf::{TlsfConfig, TlsfMode, TlsfPool};
use proptest::prelude::*;
use std::sync::Arc;

#[derive(Clone, Debug)]
enum Op {
    Alloc {
        size: usize,
        align_log: u8,
    },
    Free {
        pick: usize,
    },
    /// Free a block and at once allocate its requested size again, `times` times
    /// over (from the second time on, the free parks the block).
    Again {
        pick: usize,
        align_log: u8,
        times: usize,
    },
    /// Free a block, then free it again (an error) or check it (an error).
    Twice {
        pick: usize,
        check: bool,
    },
    Trim,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0u32..=24, 0usize..(1 << 24), 8u8..=21).prop_map(|(shift, r, align_log)| Op::Alloc {
            size: r >> (24 - shift),
            align_log,
        }),
        3 => any::<usize>().prop_map(|pick| Op::Free { pick }),
        5 => (any::<usize>(), prop_oneof![Just(8u8), 9u8..=21], 1usize..5)
            .prop_map(|(pick, align_log, times)| Op::Again { pick, align_log, times }),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(pick, check)| Op::Twice { pick, check }),
        1 => Just(Op::Trim),
    ]
}

/// What a call gave, comparable across the two pools.
fn seen(r: &devpool_core::Result<Block>) -> Result<(u64, usize, u64), String> {
    r.as_ref()
        .map(|b| (b.ptr.0, b.size, b.handle))
        .map_err(|e| format!("{e}"))
}

fn unit(r: devpool_core::Result<()>) -> Result<(), String> {
    r.map_err(|e| format!("{e}"))
}

struct Side {
    mock: Arc<MockBackend>,
    pool: TlsfPool,
    settle: bool,
}

impl Side {
    fn new(settle: bool, window: u64, batch: usize) -> Side {
        let mock = MockBackend::shared();
        let cfg = TlsfConfig::default()
            .mode(TlsfMode::Virtual)
            .range_size(64 << 20)
            .map_batch_pages(batch)
            .window_ops(window);
        Side {
            pool: TlsfPool::new(mock.clone(), cfg),
            mock,
            settle,
        }
    }

    /// After a call: the settling side releases what it parked.
    fn after(&self) {
        if self.settle {
            let _ = self.pool.stats();
        }
    }

    fn alloc(&self, size: usize, align_log: u8) -> devpool_core::Result<Block> {
        let r = self
            .pool
            .allocate(&Request::new(size).with_align(1 << align_log));
        self.after();
        r
    }

    fn free(&self, b: &Block) -> devpool_core::Result<()> {
        let r = self.pool.deallocate(b);
        self.after();
        r
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn parking_changes_nothing_anyone_sees(
        ops in prop::collection::vec(op(), 1..300),
        window in 1u64..64,
        batch in 1usize..6,
    ) {
        let (a, b) = (Side::new(false, window, batch), Side::new(true, window, batch));
        // The same blocks on both sides: (block of a, block of b).
        let mut live: Vec<(Block, Block)> = Vec::new();
        for op in &ops {
            match *op {
                Op::Alloc { size, align_log } => {
                    let (x, y) = (a.alloc(size, align_log), b.alloc(size, align_log));
                    prop_assert_eq!(seen(&x), seen(&y));
                    if let (Ok(x), Ok(y)) = (x, y) {
                        live.push((x, y));
                    }
                }
                Op::Free { pick } | Op::Again { pick, .. } | Op::Twice { pick, .. }
                    if !live.is_empty() =>
                {
                    let (x, y) = live.swap_remove(pick % live.len());
                    prop_assert_eq!(unit(a.free(&x)), unit(b.free(&y)));
                    match *op {
                        Op::Again { align_log, times, .. } => {
                            let (mut x, mut y) = (x, y);
                            for t in 0..times {
                                if t > 0 {
                                    prop_assert_eq!(unit(a.free(&x)), unit(b.free(&y)));
                                }
                                let (x2, y2) = (a.alloc(x.requested, align_log), b.alloc(y.requested, align_log));
                                prop_assert_eq!(seen(&x2), seen(&y2));
                                match (x2, y2) {
                                    (Ok(x2), Ok(y2)) => (x, y) = (x2, y2),
                                    _ => break,
                                }
                                if t + 1 == times {
                                    live.push((x, y));
                                }
                            }
                        }
                        Op::Twice { check: true, .. } => {
                            let (ex, ey) = (a.pool.check(&x), b.pool.check(&y));
                            prop_assert!(ex.is_err(), "a freed block checks as live");
                            prop_assert_eq!(unit(ex), unit(ey));
                        }
                        Op::Twice { check: false, .. } => {
                            let (ex, ey) = (a.free(&x), b.free(&y));
                            prop_assert!(ex.is_err(), "a double free was taken");
                            prop_assert_eq!(unit(ex), unit(ey));
                        }
                        _ => {}
                    }
                }
                Op::Trim => {
                    prop_assert_eq!(
                        a.pool.trim().map_err(|e| e.to_string()),
                        b.pool.trim().map_err(|e| e.to_string())
                    );
                }
                _ => {}
            }
            prop_assert_eq!(a.mock.counters(), b.mock.counters());
        }
        a.pool.verify().map_err(TestCaseError::fail)?;
        b.pool.verify().map_err(TestCaseError::fail)?;
        prop_assert_eq!(a.pool.stats(), b.pool.stats());
        prop_assert_eq!(format!("{:?}", a.pool.detail()), format!("{:?}", b.pool.detail()));
        for (x, y) in live {
            prop_assert_eq!(unit(a.free(&x)), unit(b.free(&y)));
        }
        prop_assert_eq!(a.pool.trim().ok(), b.pool.trim().ok());
        prop_assert_eq!(a.mock.counters(), b.mock.counters());
    }
}

/// The pair loop the parking is for: a free and an allocation of the same size,
/// again and again, take the block back every time (the index is left alone, so
/// the free list keeps one block, the span's tail) and hand out a new generation
/// each time, so the old handle is refused.
#[test]
fn a_pair_loop_takes_its_block_back_with_a_new_handle() {
    let mock = MockBackend::shared();
    let pool = TlsfPool::new(mock.clone(), TlsfConfig::default().mode(TlsfMode::Virtual));
    let keep = pool.allocate(&Request::new(3 << 20)).unwrap();
    let mut b = pool.allocate(&Request::new(1 << 20)).unwrap();
    let calls = mock.counters();
    for _ in 0..1000 {
        pool.deallocate(&b).unwrap();
        let next = pool.allocate(&Request::new(1 << 20)).unwrap();
        assert_eq!((next.ptr, next.size), (b.ptr, b.size));
        assert_ne!(next.handle, b.handle);
        assert!(pool.deallocate(&b).is_err(), "the old handle is refused");
        b = next;
    }
    assert_eq!(mock.counters(), calls, "no backend call in the loop");
    let d = pool.detail();
    assert_eq!((d.live_blocks, d.free_blocks), (2, 1));
    pool.deallocate(&b).unwrap();
    pool.deallocate(&keep).unwrap();
    pool.verify().unwrap();
}
