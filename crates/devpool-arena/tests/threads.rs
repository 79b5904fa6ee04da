//! Four threads bump one arena at once; blocks never overlap, counts add up, and
//! rewinds racing with allocations never hand out memory that is in use.
use devpool_arena::{arena, ArenaConfig, MIB};
use devpool_core::{Allocator, Backend, Block, Request, StreamId};
use devpool_testing::conformance::{check_blocks, Rng};
use devpool_testing::{MockBackend, MockConfig};
use std::sync::Arc;

const THREADS: u8 = 4;
const PER_THREAD: u32 = 1500;

#[test]
fn four_threads_bump_one_arena() {
    let mock = MockBackend::shared();
    let a = Arc::new(arena(mock.clone(), ArenaConfig::default().chunk_size(MIB)));
    for frame in 0..5u64 {
        let handles: Vec<_> = (0..4u64)
            .map(|t| {
                let a = a.clone();
                std::thread::spawn(move || {
                    let mut rng = Rng::new(frame * 10 + t);
                    (0..2000)
                        .map(|_| {
                            let align = 256usize << rng.below(4);
                            a.allocate(Request::new(rng.log_uniform(1, 64 << 10)).with_align(align))
                                .unwrap()
                        })
                        .collect::<Vec<Block>>()
                })
            })
            .collect();
        let blocks: Vec<Block> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        check_blocks(&blocks);
        let s = a.stats();
        assert_eq!(s.live_blocks.current, blocks.len() as u64);
        assert_eq!(
            s.live_bytes.current,
            blocks.iter().map(|b| b.requested as u64).sum::<u64>()
        );
        let st = a.detail();
        assert_eq!(st.epoch_blocks, blocks.len() as u64);
        assert!(st.epoch_used_bytes >= s.allocated_bytes.current);
        // Free half from other threads, then end the frame.
        let (half, rest) = blocks.split_at(blocks.len() / 2);
        let half = half.to_vec();
        let a2 = a.clone();
        std::thread::spawn(move || half.into_iter().for_each(|b| a2.free(b).unwrap()))
            .join()
            .unwrap();
        assert_eq!(a.stats().live_blocks.current, rest.len() as u64);
        a.reset().unwrap();
        assert_eq!(a.stats().live_blocks.current, 0);
    }
    a.trim().unwrap();
    assert_eq!(mock.counters().bytes_in_use.current, 0);
}

#[test]
fn rewinds_racing_with_allocations_keep_data_intact() {
    let mock = MockBackend::shared_with(MockConfig::default().host_backed().capacity(1 << 30));
    let a = Arc::new(arena(
        mock.clone(),
        ArenaConfig::default().chunk_size(MIB).growth(1),
    ));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (a, mock) = (a.clone(), mock.clone());
            std::thread::spawn(move || {
                let mut rng = Rng::new(t as u64);
                for i in 0..PER_THREAD {
                    // Few blocks live at once, so the arena often empties and rewinds
                    // while other threads allocate.
                    let b = a.alloc(rng.log_uniform(1, 16 << 10)).unwrap();
                    let tag = t * 60 + (i % 60) as u8 + 1;
                    mock.memset(b.ptr, tag, b.requested.max(1), StreamId::DEFAULT)
                        .unwrap();
                    std::thread::yield_now();
                    let mut back = vec![0u8; b.requested.max(1)];
                    mock.copy_to_host(&mut back, b.ptr, StreamId::DEFAULT)
                        .unwrap();
                    assert!(back.iter().all(|&x| x == tag), "{b:?} was handed out twice");
                    a.free(b).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let s = a.stats();
    assert_eq!(s.live_blocks.current, 0);
    let n = u64::from(THREADS) * u64::from(PER_THREAD);
    assert_eq!((s.allocations, s.frees), (n, n));
    assert!(a.detail().rewinds > 0, "the arena rewound along the way");
    a.trim().unwrap();
    assert_eq!(mock.counters().bytes_in_use.current, 0);
}

#[test]
fn blocks_held_at_once_never_overlap_under_rewinds() {
    use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
    const T: usize = 4;
    const N: u32 = 50_000;
    let mock = MockBackend::shared();
    // Room to grow: with four threads the arena empties (and rewinds) only now and
    // then, and memory comes back only then.
    let cfg = ArenaConfig::default()
        .chunk_size(MIB)
        .max_chunk_size(64 * MIB);
    let a = Arc::new(arena(mock.clone(), cfg));
    // What each thread holds now, address and size in one word (address << 16 |
    // size) so that a reader sees both of one block; 0 when nothing.
    let held: Arc<Vec<AtomicU64>> = Arc::new((0..T).map(|_| AtomicU64::new(0)).collect());
    let handles: Vec<_> = (0..T)
        .map(|t| {
            let (a, held) = (a.clone(), held.clone());
            std::thread::spawn(move || {
                let mut rng = Rng::new(100 + t as u64);
                for _ in 0..N {
                    let b = a.alloc(rng.log_uniform(1, 4096)).unwrap();
                    assert!(b.size < 1 << 16 && b.ptr.0 < 1 << 48);
                    held[t].store(b.ptr.0 << 16 | b.size as u64, SeqCst);
                    for (o, word) in held.iter().enumerate() {
                        let w = word.load(SeqCst);
                        let (p, s) = (w >> 16, w & 0xFFFF);
                        if o != t && w != 0 {
                            assert!(
                                p + s <= b.ptr.0 || b.ptr.0 + b.size as u64 <= p,
                                "{b:?} overlaps a block thread {o} holds"
                            );
                        }
                    }
                    held[t].store(0, SeqCst);
                    a.free(b).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(a.stats().live_blocks.current, 0);
    assert!(a.detail().rewinds > 0);
}
