//! Random operation sequences against a model of the arena: no two blocks live in the
//! same epoch overlap, every block is aligned, the statistics add up, and blocks of
//! ended epochs or already freed are refused without changing anything.
use devpool_arena::{arena, ArenaConfig};
use devpool_core::{Allocator, Backend, Block, Request};
use devpool_testing::MockBackend;
use proptest::prelude::*;
use std::collections::BTreeMap;

#[derive(Clone, Debug)]
enum Op {
    Alloc {
        size: usize,
        align_log: u8,
        stream: u8,
    },
    Free {
        pick: usize,
    },
    FreeGone {
        pick: usize,
    },
    Reset,
    Trim,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0usize..=19, 0usize..(1 << 19), 8u8..=16, 0u8..2).prop_map(|(shift, r, align_log, stream)| {
            Op::Alloc { size: r >> (19 - shift), align_log, stream }
        }),
        5 => any::<usize>().prop_map(|pick| Op::Free { pick }),
        1 => any::<usize>().prop_map(|pick| Op::FreeGone { pick }),
        1 => Just(Op::Reset),
        1 => Just(Op::Trim),
    ]
}

fn overlaps(live: &BTreeMap<u64, Block>, b: &Block) -> bool {
    let before = live.range(..=b.ptr.0).next_back();
    let after = live.range(b.ptr.0..).next();
    before.is_some_and(|(_, p)| p.ptr.0 + p.size as u64 > b.ptr.0)
        || after.is_some_and(|(_, n)| b.ptr.0 + b.size as u64 > n.ptr.0)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn arena_matches_its_model(
        ops in proptest::collection::vec(op(), 1..150),
        chunk_kib in 64usize..=1024,
        growth in 1usize..=3,
        keep in 0usize..=3,
        rewind in any::<bool>(),
        reuse_last in any::<bool>(),
    ) {
        let mock = MockBackend::shared();
        let cfg = ArenaConfig::default()
            .chunk_size(chunk_kib << 10)
            .max_chunk_size(4 << 20)
            .growth(growth)
            .keep_chunks(keep)
            .rewind_when_empty(rewind)
            .reuse_last(reuse_last);
        let a = arena(mock.clone(), cfg);
        // Live blocks by stream (each stream is its own arena).
        let mut live: [BTreeMap<u64, Block>; 2] = Default::default();
        // Blocks freed or reclaimed: every free of one must fail.
        let mut gone: Vec<Block> = Vec::new();
        let (mut allocs, mut frees) = (0u64, 0u64);
        for op in ops {
            match op {
                Op::Alloc { size, align_log, stream } => {
                    let align = 1usize << align_log;
                    let req = Request::new(size).with_align(align).on_stream(devpool_testing::MockBackend::stream(stream as u64));
                    let b = a.allocate(req).map_err(|e| TestCaseError::fail(format!("alloc {size}: {e}")))?;
                    prop_assert!(b.ptr.is_aligned(align));
                    prop_assert!(b.size >= size.max(1));
                    prop_assert!(b.handle >> 62 == 0);
                    let own = &mut live[stream as usize];
                    prop_assert!(!overlaps(own, &b), "{b:?} overlaps a live block");
                    for other in live.iter() {
                        prop_assert!(!other.contains_key(&b.ptr.0));
                    }
                    live[stream as usize].insert(b.ptr.0, b);
                    allocs += 1;
                }
                Op::Free { pick } => {
                    let n = live[0].len() + live[1].len();
                    if n == 0 {
                        continue;
                    }
                    let i = pick % n;
                    let s = usize::from(i >= live[0].len());
                    let key = *live[s].keys().nth(i - s * live[0].len()).unwrap();
                    let b = live[s].remove(&key).unwrap();
                    a.free(b).map_err(|e| TestCaseError::fail(format!("free: {e}")))?;
                    gone.push(b);
                    frees += 1;
                }
                Op::FreeGone { pick } => {
                    if gone.is_empty() {
                        continue;
                    }
                    let b = gone[pick % gone.len()];
                    let before = a.stats();
                    prop_assert!(a.free(b).is_err(), "{b:?} was already freed");
                    prop_assert_eq!(a.stats(), before);
                }
                Op::Reset => {
                    a.reset().map_err(|e| TestCaseError::fail(format!("reset: {e}")))?;
                    for l in live.iter_mut() {
                        gone.extend(std::mem::take(l).into_values());
                    }
                }
                Op::Trim => {
                    a.trim().map_err(|e| TestCaseError::fail(format!("trim: {e}")))?;
                }
            }
            let s = a.stats();
            let all = || live.iter().flat_map(|l| l.values());
            prop_assert_eq!(s.live_bytes.current, all().map(|b| b.requested as u64).sum::<u64>());
            prop_assert_eq!(s.allocated_bytes.current, all().map(|b| b.size as u64).sum::<u64>());
            prop_assert_eq!(s.live_blocks.current, all().count() as u64);
            prop_assert_eq!((s.allocations, s.frees), (allocs, frees));
            prop_assert!(s.reserved_bytes.current >= s.allocated_bytes.current);
            prop_assert_eq!(s.reserved_bytes.current, mock.counters().bytes_in_use.current);
            let st = a.detail();
            prop_assert_eq!(st.chunk_bytes, s.reserved_bytes.current);
            prop_assert!(st.epoch_used_bytes >= s.allocated_bytes.current);
        }
        a.reset().map_err(|e| TestCaseError::fail(format!("reset: {e}")))?;
        a.trim().map_err(|e| TestCaseError::fail(format!("trim: {e}")))?;
        prop_assert_eq!(a.stats().reserved_bytes.current, 0);
        prop_assert_eq!(mock.counters().bytes_in_use.current, 0);
    }
}
