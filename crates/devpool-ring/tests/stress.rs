//! 16 threads share one ring (all on the default stream) on the host-backed mock, each
//! keeping a queue of blocks it frees mostly in order; some blocks are handed to other
//! threads to free, and some are freed on the thread's own stream (another stream than
//! the block's, so they wait for an event). Each block is filled with its owner's tag
//! when it is handed out and checked when it is freed: bytes handed to two owners at
//! once show up as a wrong tag.
use devpool_core::{Allocator, Block, StreamId};
use devpool_ring::{ring, RingConfig};
use devpool_testing::conformance::{alloc_tagged, assert_tag, free_tagged, Handoff};
use devpool_testing::{MockBackend, MockConfig};
use std::collections::VecDeque;
use std::sync::Arc;

const THREADS: usize = 16;
const STEPS: usize = 2000;

#[test]
fn sixteen_threads_tagged_blocks() {
    let mock = MockBackend::shared_with(MockConfig::default().host_backed().capacity(8 << 30));
    // A small first capacity so that the ring grows, wraps and passes blocks often.
    let alloc = Arc::new(ring(mock.clone(), RingConfig::default().capacity(4 << 20)));
    let handoff = Handoff::default();
    let left = {
        let (alloc, mock) = (alloc.clone(), mock.clone());
        handoff.run(THREADS, move |t, rng, handoff| {
            let own = devpool_testing::MockBackend::stream(100 + t as u64);
            let mut mine: VecDeque<(Block, u8)> = VecDeque::new();
            for n in 0..STEPS {
                match rng.below(10) {
                    0..=4 => {
                        let size = rng.log_uniform(1, 256 << 10);
                        mine.push_back(alloc_tagged(&*alloc, &*mock, size, t, n));
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
                        handoff.give(mine.pop_front().unwrap());
                    }
                    _ => handoff.free_one(&*alloc, &*mock),
                }
            }
            mine
        })
    };
    let pool = alloc.pool(StreamId::DEFAULT).expect("the stream's pool");
    pool.verify().expect("rings, records and counts agree");
    let rs = alloc.detail();
    assert!(
        rs.jumps > 0 && rs.grows > 0,
        "the ring wrapped and grew: {rs}"
    );
    free_tagged(&*alloc, &*mock, left);
}
