//! The conformance suite against the direct allocator.
use devpool_core::direct;
use devpool_testing::MockBackend;
use std::sync::Arc;

devpool_testing::conformance_tests!(|mock: Arc<MockBackend>| direct(mock));
