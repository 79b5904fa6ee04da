//! The conformance suite against the direct allocator.
use devpool_core::{direct, MockBackend};
use std::sync::Arc;

devpool_core::conformance_tests!(|mock: Arc<MockBackend>| direct(mock));
