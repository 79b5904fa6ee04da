//! The lock-free bump: one compare-and-swap on the cursor word moves it past a new
//! block, so threads bumping at once each get their own bytes. The loom model test
//! at the bottom checks this under every interleaving.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::AtomicU64;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{AcqRel, Acquire};

use crate::word::{self, NO_SLOT};

/// Bump `size` bytes at `align` (a power of two) in the chunk the `cursor` word
/// points at, whose address and capacity `chunk(slot)` gives: the block's address
/// and the short epoch of the cursor, or `None` when the cursor points at no chunk
/// or the chunk has no room left.
#[inline]
pub(crate) fn bump(
    cursor: &AtomicU64,
    chunk: impl Fn(usize) -> (u64, u64),
    size: u64,
    align: u64,
) -> Option<(u64, u64)> {
    let mut c = cursor.load(Acquire);
    loop {
        let (e, slot, off) = word::split_cursor(c);
        if slot == NO_SLOT {
            return None;
        }
        let (base, cap) = chunk(slot);
        let start = (base + off).next_multiple_of(align) - base;
        let end = start + size;
        if end > cap {
            return None;
        }
        match cursor.compare_exchange_weak(c, word::cursor(e, slot, end), AcqRel, Acquire) {
            Ok(_) => return Some((base + start, e)),
            Err(now) => c = now,
        }
    }
}

/// Model test with loom: `RUSTFLAGS="--cfg loom" cargo test -p devpool-arena --lib --release loom`.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    const BASE: u64 = 0x7f00_0000_0000;

    /// Three threads bump at once, one with a larger alignment, in a chunk with room
    /// for two of the three: the blocks served never overlap, lie in the chunk, are
    /// aligned, and the cursor ends past the last; a bump that finds no room leaves
    /// the cursor alone.
    #[test]
    fn concurrent_bumps_get_their_own_bytes() {
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(3);
        b.check(|| {
            let cap = 3 * 1024;
            let cursor = Arc::new(AtomicU64::new(word::cursor(5, 0, 256)));
            let chunk = move |slot: usize| {
                assert_eq!(slot, 0);
                (BASE, cap)
            };
            let handles: Vec<_> = [(1024u64, 256u64), (1024, 256), (1024, 1024)]
                .into_iter()
                .map(|(size, align)| {
                    let cursor = cursor.clone();
                    thread::spawn(move || {
                        bump(&cursor, chunk, size, align).map(|b| (b, size, align))
                    })
                })
                .collect();
            let got: Vec<_> = handles
                .into_iter()
                .filter_map(|h| h.join().unwrap())
                .collect();
            assert!(got.len() >= 2, "two fit in any order: {got:?}");
            for ((ptr, e), size, align) in &got {
                assert_eq!(*e, word::short(5));
                assert_eq!(ptr % align, 0);
                assert!(*ptr >= BASE + 256 && ptr + size <= BASE + cap);
            }
            for (i, ((a, _), sa, _)) in got.iter().enumerate() {
                for ((b, _), sb, _) in &got[i + 1..] {
                    assert!(a + sa <= *b || b + sb <= *a, "blocks overlap: {got:?}");
                }
            }
            let (_, _, off) = word::split_cursor(cursor.load(Acquire));
            let last = got.iter().map(|((p, _), s, _)| p + s - BASE).max().unwrap();
            assert_eq!(off, last, "the cursor ends past the last block served");
        });
    }
}
