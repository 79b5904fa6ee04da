//! 16 threads allocate and free blocks of random classes in one slab pool on the
//! host-backed mock. Each block is filled with its owner's tag when it is handed out
//! and checked when it is freed, so a slot handed to two owners at once shows up as
//! a wrong tag. Some blocks are passed to other threads to free, so frees reach the
//! caches of other threads too.
use devpool_core::{Allocator, Block};
use devpool_slab::{slab, SlabConfig};
use devpool_testing::conformance::{alloc_tagged, assert_tag, free_tagged, Handoff};
use devpool_testing::{MockBackend, MockConfig};
use std::sync::Arc;

const THREADS: usize = 16;
const STEPS: usize = 3000;

#[test]
fn sixteen_threads_tagged_blocks() {
    let mock = MockBackend::shared_with(MockConfig::default().host_backed().capacity(8 << 30));
    // Small slabs so that slabs fill, empty and change hands often.
    let cfg = SlabConfig::geometric(4, 64 << 10)
        .min_slab_bytes(64 << 10)
        .min_slots(4)
        .keep_empty(1);
    let alloc = Arc::new(slab(mock.clone(), cfg));
    let handoff = Handoff::default();
    let left = {
        let (alloc, mock) = (alloc.clone(), mock.clone());
        handoff.run(THREADS, move |t, rng, handoff| {
            let mut mine: Vec<(Block, u8)> = Vec::new();
            for n in 0..STEPS {
                match rng.below(8) {
                    0..=3 => mine.push(alloc_tagged(
                        &*alloc,
                        &*mock,
                        rng.log_uniform(1, 64 << 10),
                        t,
                        n,
                    )),
                    4..=5 if !mine.is_empty() => {
                        let i = rng.below(mine.len() as u64) as usize;
                        let (b, tag) = mine.swap_remove(i);
                        assert_tag(&*mock, &b, tag, "live");
                        alloc.free(b).expect("free");
                    }
                    6 if !mine.is_empty() => {
                        let i = rng.below(mine.len() as u64) as usize;
                        handoff.give(mine.swap_remove(i));
                    }
                    _ => handoff.free_one(&*alloc, &*mock),
                }
            }
            mine
        })
    };
    let pool = alloc
        .pool(devpool_core::StreamId::DEFAULT)
        .expect("the stream's pool");
    pool.verify().expect("slabs, bitmaps and counts agree");
    free_tagged(&*alloc, &*mock, left);
}
