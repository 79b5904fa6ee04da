//! The core conformance suite against the arena with its default settings.
use devpool_arena::{arena, ArenaConfig};
use devpool_core::MockBackend;
use std::sync::Arc;

devpool_core::conformance_tests!(|mock: Arc<MockBackend>| arena(mock, ArenaConfig::default()));
