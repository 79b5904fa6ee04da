//! Helpers shared by the adaptor tests: a pool that reuses addresses at once, an
//! adaptor that counts trims, and block tagging on the host-backed mock.
#![allow(dead_code)]

use devpool_core::{Allocator, Backend, Block, Result};
use devpool_testing::MockBackend;
use std::sync::atomic::{AtomicU64, Ordering};

#[allow(unused_imports)]
pub use devpool_testing::fixtures::reuse;

/// An adaptor that counts calls to `trim`.
pub struct CountTrims<A> {
    pub inner: A,
    pub trims: AtomicU64,
}

impl<A: Allocator> CountTrims<A> {
    pub fn new(inner: A) -> Self {
        CountTrims {
            inner,
            trims: AtomicU64::new(0),
        }
    }
    pub fn trims(&self) -> u64 {
        self.trims.load(Ordering::Relaxed)
    }
}

impl<A: Allocator> Allocator for CountTrims<A> {
    devpool_core::forward_allocator!(|a| &a.inner; name, backend, allocate, deallocate,
        record_stream, stats);
    fn trim(&self) -> Result<usize> {
        self.trims.fetch_add(1, Ordering::Relaxed);
        self.inner.trim()
    }
}

/// Fill a block with `tag`, and its first and last eight bytes with `id` (when it
/// has room), through the backend.
pub fn write_tag(mock: &MockBackend, b: &Block, tag: u8, id: u64) {
    let n = b.requested.max(1);
    mock.memset(b.ptr, tag, n, b.stream)
        .expect("block memory is accessible");
    if n >= 16 {
        mock.copy_to_device(b.ptr, &id.to_le_bytes(), b.stream)
            .expect("block memory is accessible");
        mock.copy_to_device(b.ptr.offset(n - 8), &id.to_le_bytes(), b.stream)
            .expect("block memory is accessible");
    }
}

/// Panic unless the block still holds what [`write_tag`] wrote.
pub fn check_tag(mock: &MockBackend, b: &Block, tag: u8, id: u64) {
    let n = b.requested.max(1);
    let mut back = vec![0u8; n];
    mock.copy_to_host(&mut back, b.ptr, b.stream)
        .expect("block memory is accessible");
    let body = if n >= 16 {
        assert_eq!(
            &back[..8],
            &id.to_le_bytes(),
            "block {b:?} lost its id {id}"
        );
        assert_eq!(
            &back[n - 8..],
            &id.to_le_bytes(),
            "block {b:?} lost its id {id} at the end"
        );
        &back[8..n - 8]
    } else {
        &back[..]
    };
    // A slice comparison is a memcmp, fast even without optimisation.
    if body != vec![tag; body.len()].as_slice() {
        let i = body.iter().position(|&x| x != tag).unwrap_or(0);
        panic!("block {b:?} lost its pattern {tag:#x} at byte {i}");
    }
}
