//! 16 threads share one ring (all on the default stream) on the host-backed mock, each
//! keeping a queue of blocks it frees mostly in order; some blocks are handed to other
//! threads to free, and some are freed on the thread's own stream (another stream than
//! the block's, so they wait for an event). Each block is filled with its owner's tag
//! when it is handed out and checked when it is freed: bytes handed to two owners at
//! once show up as a wrong tag.
use devpool_core::{Allocator, Block, Rng, StreamId};
use devpool_ring::{ring, RingConfig};
use devpool_testing::conformance::{assert_tag, fill, free_tagged, tag_of};
use devpool_testing::{MockBackend, MockConfig};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;

const THREADS: usize = 16;
const STEPS: usize = 2000;

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
                            fill(&*mock, &b, tag);
                            mine.push_back((b, tag));
                        }
                        5..=6 if !mine.is_empty() => {
                            let (b, tag) = mine.pop_front().unwrap();
                            assert_tag(&*mock, &b, tag, "live");
                            alloc.free(b).expect("free in order");
                        }
                        7 if !mine.is_empty() => {
                            let i = rng.below(mine.len() as u64) as usize;
                            let (b, tag) = mine.remove(i).unwrap();
                            assert_tag(&*mock, &b, tag, "live");
                            alloc.deallocate(b, own).expect("free on another stream");
                        }
                        8 if !mine.is_empty() => {
                            handoff.lock().push(mine.pop_front().unwrap());
                        }
                        _ => {
                            let got = handoff.lock().pop();
                            if let Some((b, tag)) = got {
                                assert_tag(&*mock, &b, tag, "live");
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
    let pool = alloc.pool(StreamId::DEFAULT).expect("the stream's pool");
    pool.verify().expect("rings, records and counts agree");
    let rs = alloc.detail();
    assert!(
        rs.jumps > 0 && rs.grows > 0,
        "the ring wrapped and grew: {rs}"
    );
    free_tagged(&*alloc, &*mock, left);
}
