//! Tagged blocks that threads hand to each other to free.

use super::tags::{assert_tag, fill, tag_of};
use devpool_core::{Allocator, Backend, Block, Rng};
use parking_lot::Mutex;
use std::sync::Arc;
use std::thread::JoinHandle;

/// Allocates `size` bytes on `a` for step `n` of thread `thread`, fills the block
/// with that step's tag and gives both.
pub fn alloc_tagged(
    a: &dyn Allocator,
    backend: &dyn Backend,
    size: usize,
    thread: usize,
    n: usize,
) -> (Block, u8) {
    let b = a.alloc(size).expect("alloc");
    let tag = tag_of(thread, n);
    fill(backend, &b, tag);
    (b, tag)
}

/// Tagged blocks one thread gives away for any other to free.
#[derive(Clone, Default)]
pub struct Handoff(Arc<Mutex<Vec<(Block, u8)>>>);

impl Handoff {
    /// Gives `block` away.
    pub fn give(&self, block: (Block, u8)) {
        self.0.lock().push(block);
    }

    /// Frees the block given last, if any, after checking its tag.
    pub fn free_one(&self, a: &dyn Allocator, backend: &dyn Backend) {
        let got = self.0.lock().pop();
        if let Some((b, tag)) = got {
            assert_tag(backend, &b, tag, "live");
            a.free(b).expect("free of another thread's block");
        }
    }

    /// Runs `body` on `threads` threads, each with its index and its own random
    /// numbers (seeded with the index plus one), then gives what [`join`](Self::join)
    /// gives.
    pub fn run<C, F>(&self, threads: usize, body: F) -> Vec<(Block, u8)>
    where
        C: IntoIterator<Item = (Block, u8)> + Send + 'static,
        F: Fn(usize, &mut Rng, &Handoff) -> C + Send + Sync + 'static,
    {
        let body = Arc::new(body);
        let handles = (0..threads)
            .map(|t| {
                let (body, handoff) = (body.clone(), self.clone());
                std::thread::spawn(move || body(t, &mut Rng::new(t as u64 + 1), &handoff))
            })
            .collect();
        self.join(handles)
    }

    /// Joins `threads`, each giving the blocks it still holds, and gives those with
    /// the blocks given away and not freed.
    pub fn join<C>(&self, threads: Vec<JoinHandle<C>>) -> Vec<(Block, u8)>
    where
        C: IntoIterator<Item = (Block, u8)>,
    {
        let mut left: Vec<(Block, u8)> = threads
            .into_iter()
            .flat_map(|h| h.join().expect("thread"))
            .collect();
        left.append(&mut self.0.lock());
        left
    }
}
