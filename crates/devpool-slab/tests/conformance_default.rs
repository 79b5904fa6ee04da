//! The whole core conformance suite on what users of this crate get by default:
//! the default slab configuration (classes up to 1 MiB) and a fixed pool of 1 MiB
//! blocks, every case with requests of at most 1 MiB.
use devpool_slab::{fixed, slab, SlabConfig};
use devpool_testing::MockBackend;
use std::sync::Arc;

mod default_config {
    use super::*;
    devpool_testing::conformance_tests!(
        |mock: Arc<MockBackend>| slab(mock, SlabConfig::default()),
        max_size = 1 << 20
    );
}

mod fixed_pool {
    use super::*;
    devpool_testing::conformance_tests!(
        |mock: Arc<MockBackend>| fixed(mock, 1 << 20),
        max_size = 1 << 20
    );
}
