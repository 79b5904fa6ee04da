//! Tagged blocks: a block filled with a byte pattern through the backend and read
//! back later, so that two blocks sharing a byte, or a block reused too early, show
//! up as a lost pattern. On a host-backed mock or a real device.

use devpool_core::{Allocator, Backend, Block};

/// A tag for step `n` of thread `thread`: never zero, so an untouched block does
/// not pass for a tagged one.
pub fn tag_of(thread: usize, n: usize) -> u8 {
    ((thread * 131 + n * 7) % 251) as u8 + 1
}

/// Fill the block's first `requested` bytes (at least one) with `tag`, on its stream.
pub fn fill(backend: &dyn Backend, b: &Block, tag: u8) {
    backend
        .memset(b.ptr, tag, b.requested.max(1), b.stream)
        .expect("block memory is writable");
}

/// Panic unless the block's first `requested` bytes (at least one) all read `tag`;
/// `what` says which block. Returns the bytes checked.
pub fn assert_tag(backend: &dyn Backend, b: &Block, tag: u8, what: &str) -> u64 {
    let mut back = vec![0u8; b.requested.max(1)];
    backend
        .copy_to_host(&mut back, b.ptr, b.stream)
        .expect("block memory is readable");
    assert!(
        back.iter().all(|&x| x == tag),
        "{what}: block {b:?} lost its pattern {tag}: its bytes were handed out twice"
    );
    back.len() as u64
}

/// The end of a run that left `left` live: they are apart and the allocator counts
/// exactly them (blocks, bytes, allocations less frees); each still holds its tag,
/// and once all are freed and the allocator trimmed, the backend holds nothing.
pub fn free_tagged(a: &dyn Allocator, backend: &dyn Backend, left: Vec<(Block, u8)>) {
    super::check_blocks(&left.iter().map(|(b, _)| *b).collect::<Vec<_>>());
    let s = a.stats();
    assert_eq!(s.live_blocks.current, left.len() as u64);
    assert_eq!(
        s.live_bytes.current,
        left.iter().map(|(b, _)| b.requested as u64).sum::<u64>()
    );
    assert_eq!(s.allocations - s.frees, left.len() as u64);
    for (b, tag) in left {
        assert_tag(backend, &b, tag, "left at the end");
        a.free(b).expect("final free");
    }
    a.trim().expect("trim");
    assert_eq!(a.stats().live_blocks.current, 0);
    assert_eq!(backend.counters().bytes_in_use.current, 0);
}
