//! 16 threads share one ring (all on the default stream) on the host-backed mock, each
//! keeping a queue of blocks it frees mostly in order; some blocks are handed to other
//! threads to free, and some are freed on the thread's own stream (another stream than
//! the block's, so they wait for an event). Each block is filled with its owner's tag
//! when it is handed out and checked when it is freed: bytes handed to two owners at
//! once show up as a wrong tag.
use devpool_core::{Allocator, Backend, Block, Rng, StreamId};
use devpool_ring::{ring, RingConfig};
use devpool_testing::{MockBackend, MockConfig};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;

const THREADS: usize = 16;
const STEPS: usize = 2000;

fn tag_of(thread: usize, n: usize) -> u8 {
    ((thread * 131 + n * 7) % 251) as u8 + 1
}

fn verify(mock: &MockBackend, b: &Block, tag: u8) {
    let mut back = vec![0u8; b.requested.max(1)];
    mock.copy_to_host(&mut back, b.ptr, b.stream)
        .expect("block memory is readable");
    assert!(
        back.iter().all(|&x| x == tag),
        "block {b:?} lost its tag {tag}: its bytes were handed out twice"
    );
}

#[test]
fn sixteen_threads_tagged_blocks() {
    let mock = MockBackend::shared_with(MockConfig::default().host_backed().capacity(8 << 30));
    // A small first capacity so that the ring grows, wraps and passes blocks often.
    let alloc = Arc::new(ring(mock.clone(), RingConfig::default().capacity(4 << 20)));
    let handoff: Arc<Mutex<Vec<(Block, u8)>>> = Arc::default();
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (alloc, mock, handoff) = (alloc.clone(), mock.clone(), handoff.clone());
            std::thread::spawn(move || {
                let mut rng = Rng::new(t as u64 + 1);
                let own = devpool_testing::MockBackend::stream(100 + t as u64);
                let mut mine: VecDeque<(Block, u8)> = VecDeque::new();
                for n in 0..STEPS {
                    match rng.below(10) {
                        0..=4 => {
                            let b = alloc.alloc(rng.log_uniform(1, 256 << 10)).expect("alloc");
                            let tag = tag_of(t, n);
                            mock.memset(b.ptr, tag, b.requested.max(1), b.stream)
                                .expect("block memory is writable");
                            mine.push_back((b, tag));
                        }
                        5..=6 if !mine.is_empty() => {
                            let (b, tag) = mine.pop_front().unwrap();
                            verify(&mock, &b, tag);
                            alloc.free(b).expect("free in order");
                        }
                        7 if !mine.is_empty() => {
                            let i = rng.below(mine.len() as u64) as usize;
                            let (b, tag) = mine.remove(i).unwrap();
                            verify(&mock, &b, tag);
                            alloc.deallocate(b, own).expect("free on another stream");
                        }
                        8 if !mine.is_empty() => {
                            handoff.lock().push(mine.pop_front().unwrap());
                        }
                        _ => {
                            let got = handoff.lock().pop();
                            if let Some((b, tag)) = got {
                                verify(&mock, &b, tag);
                                alloc.free(b).expect("free of another thread's block");
                            }
                        }
                    }
                }
                mine
            })
        })
        .collect();
    let mut left: Vec<(Block, u8)> = threads
        .into_iter()
        .flat_map(|h| h.join().expect("thread"))
        .collect();
    left.append(&mut handoff.lock());
    devpool_testing::conformance::check_blocks(&left.iter().map(|(b, _)| *b).collect::<Vec<_>>());
    let s = alloc.stats();
    assert_eq!(s.live_blocks.current, left.len() as u64);
    assert_eq!(
        s.live_bytes.current,
        left.iter().map(|(b, _)| b.requested as u64).sum::<u64>()
    );
    assert_eq!(s.allocations - s.frees, left.len() as u64);
    let pool = alloc.pool(StreamId::DEFAULT).expect("the stream's pool");
    pool.verify().expect("rings, records and counts agree");
    let rs = alloc.detail();
    assert!(
        rs.jumps > 0 && rs.grows > 0,
        "the ring wrapped and grew: {rs}"
    );
    for (b, tag) in left {
        verify(&mock, &b, tag);
        alloc.free(b).expect("final free");
    }
    devpool_testing::conformance::assert_empty(&*alloc, &mock);
}
