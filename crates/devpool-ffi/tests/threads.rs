//! Many threads allocating and freeing at once, each on its own stream, handing
//! blocks to each other so that frees also cross streams and threads.

mod common;
use common::*;
use devpool_core::Rng;
use parking_lot::Mutex;
use std::sync::Arc;

const THREADS: u64 = 8;
const STEPS: usize = 3000;

#[test]
fn eight_threads_share_one_device() {
    setup("");
    let dev = 2;
    // Blocks any thread may free: (address, size).
    let shared: Arc<Mutex<Vec<(u64, usize)>>> = Arc::default();
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let shared = shared.clone();
            std::thread::spawn(move || {
                let s = 0x1000 + t; // this thread's stream
                let mut rng = Rng::new(t + 1);
                let mut mine: Vec<(u64, usize)> = Vec::new();
                let mut served = 0usize;
                for _ in 0..STEPS {
                    match rng.below(10) {
                        0..=4 => {
                            let size = rng.log_uniform(1, 8 << 20);
                            let p = malloc(size, dev, s);
                            assert_ne!(p, 0, "{}", last_error());
                            served += 1;
                            if rng.below(4) == 0 {
                                shared.lock().push((p, size));
                            } else {
                                mine.push((p, size));
                            }
                        }
                        5..=7 if !mine.is_empty() => {
                            let i = rng.below(mine.len() as u64) as usize;
                            let (p, size) = mine.swap_remove(i);
                            free(p, size, dev, s);
                        }
                        _ => {
                            // Free a block another thread may have made, on this stream.
                            let taken = shared.lock().pop();
                            if let Some((p, size)) = taken {
                                free(p, size, dev, s);
                            }
                        }
                    }
                }
                for (p, size) in mine {
                    free(p, size, dev, s);
                }
                served
            })
        })
        .collect();
    let served: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    for (p, size) in shared.lock().drain(..) {
        free(p, size, dev, 0);
    }
    let v = stats(dev);
    assert_consistent(&v, 0, 0);
    assert_eq!(num(&v, &["stats", "allocations"]), served as u64);
    assert_eq!(num(&v, &["bad_calls", "unknown_pointer"]), 0);
    devpool_ffi::devpool_trim(dev);
    assert_eq!(num(&stats(dev), &["reserved_bytes"]), 0);
}
