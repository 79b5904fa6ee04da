//! The core conformance suite on a slab allocator whose classes reach 1 GiB (the
//! suite asks for up to 1 GiB). Huge-class policy: slabs of at most 32 MiB, so the
//! classes above 4 MiB hold fewer than 8 slots per slab, and those above 32 MiB
//! one slot per slab.
use devpool_slab::{slab, SlabConfig};
use devpool_testing::MockBackend;
use std::sync::Arc;

devpool_testing::conformance_tests!(|mock: Arc<MockBackend>| slab(
    mock,
    SlabConfig::geometric(4, 1 << 30).max_slab_bytes(32 << 20)
));
