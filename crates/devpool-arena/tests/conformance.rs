//! The core conformance suite against the arena with its default settings.
use devpool_arena::{arena, ArenaConfig};
use devpool_testing::MockBackend;
use std::sync::Arc;

devpool_testing::conformance_tests!(|mock: Arc<MockBackend>| arena(mock, ArenaConfig::default()));
