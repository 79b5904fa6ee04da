//! 16 threads allocate and free blocks of random classes in one slab pool on the
//! host-backed mock. Each block is filled with its owner's tag when it is handed out
//! and checked when it is freed, so a slot handed to two owners at once shows up as
//! a wrong tag. Some blocks are passed to other threads to free, so frees reach the
//! caches of other threads too.
use devpool_core::{Allocator, Block, Rng};
use devpool_slab::{slab, SlabConfig};
use devpool_testing::conformance::{assert_tag, fill, free_tagged, tag_of};
use devpool_testing::{MockBackend, MockConfig};
use parking_lot::Mutex;
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
    let handoff: Arc<Mutex<Vec<(Block, u8)>>> = Arc::default();
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (alloc, mock, handoff) = (alloc.clone(), mock.clone(), handoff.clone());
            std::thread::spawn(move || {
                let mut rng = Rng::new(t as u64 + 1);
                let mut mine: Vec<(Block, u8)> = Vec::new();
                for n in 0..STEPS {
                    match rng.below(8) {
                        0..=3 => {
                            let size = rng.log_uniform(1, 64 << 10);
                            let b = alloc.alloc(size).expect("alloc");
                            let tag = tag_of(t, n);
                            fill(&*mock, &b, tag);
                            mine.push((b, tag));
                        }
                        4..=5 if !mine.is_empty() => {
                            let i = rng.below(mine.len() as u64) as usize;
                            let (b, tag) = mine.swap_remove(i);
                            assert_tag(&*mock, &b, tag, "live");
                            alloc.free(b).expect("free");
                        }
                        6 if !mine.is_empty() => {
                            let i = rng.below(mine.len() as u64) as usize;
                            handoff.lock().push(mine.swap_remove(i));
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
    let pool = alloc
        .pool(devpool_core::StreamId::DEFAULT)
        .expect("the stream's pool");
    pool.verify().expect("slabs, bitmaps and counts agree");
    free_tagged(&*alloc, &*mock, left);
}
