//! The conformance suite every allocator crate runs from its own tests, and a
//! proptest model test of random operation sequences.
//!
//! Use [`conformance_tests!`](crate::conformance_tests) in a test file:
//!
//! ```ignore
//! devpool_testing::conformance_tests!(|mock: std::sync::Arc<devpool_testing::MockBackend>| {
//!     devpool_core::direct(mock)
//! });
//! // An allocator that serves blocks of at most 1 MiB runs every case with sizes
//! // up to that:
//! devpool_testing::conformance_tests!(|mock| devpool_slab::fixed(mock, 1 << 20), max_size = 1 << 20);
//! ```
//!
//! Each case builds its own mock backend (sometimes host-backed, sometimes with
//! manual events) and hands it to the constructor. Each takes the largest request
//! the allocator is meant to serve (`usize::MAX` for no limit) and keeps its sizes
//! within it, so an allocator with a size limit runs every case, not a subset.

use crate::MockBackend;
use devpool_core::{Allocator, Backend, Block};
use std::sync::Arc;

mod cases;
mod handoff;
mod model;
mod tags;

pub use cases::*;
pub use devpool_core::Rng;
pub use handoff::{alloc_tagged, Handoff};
pub use model::model_test;
pub use tags::{assert_tag, fill, free_tagged, tag_of};

/// A constructor of the allocator under test.
pub type Make<'a> = &'a (dyn Fn(Arc<MockBackend>) -> Box<dyn Allocator> + Sync);

/// `n` streams of `mock`: the default stream first, then `n - 1` the mock makes.
pub fn streams(mock: &MockBackend, n: usize) -> Vec<devpool_core::StreamId> {
    std::iter::once(devpool_core::StreamId::DEFAULT)
        .chain((1..n).map(|_| mock.create_stream().expect("the mock makes streams")))
        .collect()
}

/// Whether two blocks share a byte (by granted size, at least one byte each).
///
/// ```
/// use devpool_core::{Block, DeviceId, DevicePtr, StreamId};
/// use devpool_testing::conformance::overlaps;
/// let at = |ptr: u64, size: usize| Block {
///     ptr: DevicePtr(ptr), size, requested: size, stream: StreamId::DEFAULT,
///     device: DeviceId(0), handle: 0,
/// };
/// assert!(overlaps(&at(0x1000, 0x200), &at(0x1100, 0x100)));
/// assert!(overlaps(&at(0x1100, 0x100), &at(0x1000, 0x200)), "starts higher, inside");
/// assert!(!overlaps(&at(0x1000, 0x100), &at(0x1100, 0x100)), "neighbours");
/// ```
pub fn overlaps(a: &Block, b: &Block) -> bool {
    let end = |x: &Block| x.ptr.0.saturating_add(x.size.max(1) as u64);
    a.ptr.0 < end(b) && b.ptr.0 < end(a)
}

/// Take the live block `pick` chooses (modulo how many there are) out of a model
/// keyed by address; `None` when the model is empty.
///
/// ```
/// use devpool_core::{Block, DeviceId, DevicePtr, StreamId};
/// use devpool_testing::conformance::take_pick;
/// use std::collections::BTreeMap;
/// let at = |ptr: u64| Block {
///     ptr: DevicePtr(ptr), size: 16, requested: 16, stream: StreamId::DEFAULT,
///     device: DeviceId(0), handle: 0,
/// };
/// let mut model: BTreeMap<u64, Block> = [(0x100, at(0x100)), (0x200, at(0x200))].into();
/// assert_eq!(take_pick(&mut model, 3).unwrap().ptr.0, 0x200);
/// assert_eq!(take_pick(&mut model, 3).unwrap().ptr.0, 0x100);
/// assert!(take_pick(&mut model, 3).is_none());
/// ```
pub fn take_pick(model: &mut std::collections::BTreeMap<u64, Block>, pick: usize) -> Option<Block> {
    let key = *model.keys().nth(pick % model.len().max(1))?;
    model.remove(&key)
}

/// A block of a model keyed by address (whose blocks are apart) that `b` would
/// overlap: its neighbour below or above, by granted size.
pub fn overlapping_neighbour<'m>(
    model: &'m std::collections::BTreeMap<u64, Block>,
    b: &Block,
) -> Option<&'m Block> {
    let below = model.range(..=b.ptr.0).next_back().map(|(_, p)| p);
    let above = model.range(b.ptr.0..).next().map(|(_, n)| n);
    below
        .filter(|p| p.ptr.0 + p.size as u64 > b.ptr.0)
        .or(above.filter(|n| b.ptr.0 + b.size as u64 > n.ptr.0))
}

/// Adds `b` to a model keyed by address, failing the proptest case if it overlaps a
/// block already there.
pub fn insert_apart(
    model: &mut std::collections::BTreeMap<u64, Block>,
    b: Block,
) -> Result<(), proptest::test_runner::TestCaseError> {
    let o = overlapping_neighbour(model, &b);
    proptest::prop_assert!(o.is_none(), "overlap {b:?} {o:?}");
    model.insert(b.ptr.0, b);
    Ok(())
}

/// Panic unless `got` shares no byte with `pending`, a block whose free has not
/// completed yet; `what` says why it must not.
pub fn assert_apart(got: &Block, pending: &Block, what: &str) {
    assert!(
        !overlaps(got, pending),
        "{what}: {got:?} overlaps the pending {pending:?}"
    );
}

/// Panic unless no two blocks overlap (by granted size) and each is 256-byte aligned
/// and at least as large as requested.
pub fn check_blocks(blocks: &[Block]) {
    let mut v: Vec<&Block> = blocks.iter().collect();
    v.sort_by_key(|b| b.ptr);
    for b in &v {
        assert!(
            b.ptr.is_aligned(devpool_core::MIN_ALIGN),
            "{:?} is not 256-byte aligned",
            b.ptr
        );
        assert!(
            b.size >= b.requested.max(1),
            "{b:?} is smaller than requested"
        );
        assert!(!b.ptr.is_null(), "null block {b:?}");
    }
    for w in v.windows(2) {
        assert!(
            w[0].ptr.0 + w[0].size as u64 <= w[1].ptr.0,
            "blocks overlap: {:?} and {:?}",
            w[0],
            w[1]
        );
    }
}

/// After everything is freed and trimmed, nothing is held from the backend.
pub fn assert_empty(a: &dyn Allocator, mock: &MockBackend) {
    a.trim().expect("trim");
    let s = a.stats();
    assert_eq!(
        s.live_bytes.current, 0,
        "live bytes after freeing all: {s:?}"
    );
    assert_eq!(
        s.live_blocks.current, 0,
        "live blocks after freeing all: {s:?}"
    );
    assert_eq!(
        s.reserved_bytes.current, 0,
        "reserved bytes after trim: {s:?}"
    );
    assert_eq!(
        mock.counters().bytes_in_use.current,
        0,
        "backend still holds memory after trim"
    );
}

/// Frees every block of `blocks`, then checks as [`assert_empty`] does.
pub fn free_all_then_empty(
    a: &dyn Allocator,
    mock: &MockBackend,
    blocks: impl IntoIterator<Item = Block>,
) {
    for b in blocks {
        a.free(b).unwrap();
    }
    assert_empty(a, mock);
}

/// Generate one `#[test]` per conformance case for the allocator built by `$make`, a
/// closure `|mock: Arc<MockBackend>| -> impl Allocator`. With `max_size = N`, every
/// case keeps its requests at or below `N` bytes (for allocators with a size limit).
#[macro_export]
macro_rules! conformance_tests {
    ($make:expr) => {
        $crate::conformance_tests!($make, max_size = usize::MAX);
    };
    ($make:expr, max_size = $max:expr) => {
        mod conformance {
            #[allow(unused_imports)]
            use super::*;
            fn make(
                mock: ::std::sync::Arc<$crate::MockBackend>,
            ) -> ::std::boxed::Box<dyn $crate::__private::Allocator> {
                let f = $make;
                ::std::boxed::Box::new(f(mock))
            }
            const MAX: usize = $max;
            #[test]
            fn zero_size() {
                $crate::conformance::zero_size(&make, MAX)
            }
            #[test]
            fn sizes_aligned_distinct() {
                $crate::conformance::sizes_aligned_distinct(&make, MAX)
            }
            #[test]
            fn handles_leave_router_bits() {
                $crate::conformance::handles_leave_router_bits(&make, MAX)
            }
            #[test]
            fn alignment() {
                $crate::conformance::alignment(&make, MAX)
            }
            #[test]
            fn huge_requests() {
                $crate::conformance::huge_requests(&make, MAX)
            }
            #[test]
            fn out_of_memory() {
                $crate::conformance::out_of_memory(&make, MAX)
            }
            #[test]
            fn random_sizes() {
                $crate::conformance::random_sizes(&make, MAX)
            }
            #[test]
            fn mixed_steps() {
                $crate::conformance::mixed_steps(&make, MAX)
            }
            #[test]
            fn four_threads() {
                $crate::conformance::four_threads(&make, MAX)
            }
            #[test]
            fn cross_thread_free() {
                $crate::conformance::cross_thread_free(&make, MAX)
            }
            #[test]
            fn bad_frees() {
                $crate::conformance::bad_frees(&make, MAX)
            }
            #[test]
            fn data_integrity() {
                $crate::conformance::data_integrity(&make, MAX)
            }
            #[test]
            fn stream_order() {
                $crate::conformance::stream_order(&make, MAX)
            }
            #[test]
            fn backend_faults() {
                $crate::conformance::backend_faults(&make, MAX)
            }
            #[test]
            fn model() {
                $crate::conformance::model_test(&make, MAX, 64)
            }
        }
    };
}
