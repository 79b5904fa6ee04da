//! The block checker catches an allocator that breaks its promises.

use devpool::{direct, Allocator, Backend, Block, MockBackend, Request, Result, Stats, StreamId};
use devpool_fuzz::checked::Checked;
use std::sync::{Arc, Mutex};

/// Wraps the direct allocator and spoils the blocks it grants with `spoil`.
struct Broken<F> {
    inner: Box<dyn Allocator>,
    spoil: F,
    first: Mutex<Option<Block>>,
}

impl<F: Fn(Block, Option<Block>) -> Block + Send + Sync> Broken<F> {
    fn new(spoil: F) -> Self {
        Broken {
            inner: Box::new(direct(MockBackend::shared())),
            spoil,
            first: Mutex::new(None),
        }
    }
}

impl<F: Fn(Block, Option<Block>) -> Block + Send + Sync> Allocator for Broken<F> {
    fn name(&self) -> &str {
        "broken"
    }
    fn backend(&self) -> &Arc<dyn Backend> {
        self.inner.backend()
    }
    fn allocate(&self, req: Request) -> Result<Block> {
        let b = self.inner.allocate(req)?;
        let mut first = self.first.lock().expect("lock");
        let out = (self.spoil)(b, *first);
        first.get_or_insert(b);
        Ok(out)
    }
    fn deallocate(&self, block: Block, stream: StreamId) -> Result<()> {
        self.inner.deallocate(block, stream)
    }
    fn record_stream(&self, block: &Block, stream: StreamId) -> Result<()> {
        self.inner.record_stream(block, stream)
    }
    fn stats(&self) -> Stats {
        self.inner.stats()
    }
    fn trim(&self) -> Result<usize> {
        self.inner.trim()
    }
}

fn two_allocations(alloc: &dyn Allocator) {
    let checked = Checked::new(alloc);
    checked.alloc(4096).expect("first");
    checked.alloc(4096).expect("second");
}

#[test]
fn a_sound_allocator_passes() {
    two_allocations(&Broken::new(|b, _| b));
}

#[test]
#[should_panic(expected = "overlaps live")]
fn overlapping_blocks_are_caught() {
    two_allocations(&Broken::new(|b, first| match first {
        Some(f) => Block {
            ptr: f.ptr.offset(256),
            ..b
        },
        None => b,
    }));
}

#[test]
#[should_panic(expected = "not aligned")]
fn misaligned_blocks_are_caught() {
    two_allocations(&Broken::new(|b, _| Block {
        ptr: b.ptr.offset(8),
        ..b
    }));
}

#[test]
#[should_panic(expected = "smaller than")]
fn short_blocks_are_caught() {
    two_allocations(&Broken::new(|b, _| Block { size: 100, ..b }));
}

#[test]
#[should_panic(expected = "past 62 bits")]
fn wide_handles_are_caught() {
    two_allocations(&Broken::new(|b, _| Block {
        handle: 1 << 63,
        ..b
    }));
}
