//! The core conformance suite against an arena that never rewinds by itself: memory
//! comes back only when a trim finds nothing live.
use devpool_arena::{arena, ArenaConfig};
use devpool_testing::MockBackend;
use std::sync::Arc;

devpool_testing::conformance_tests!(|mock: Arc<MockBackend>| arena(
    mock,
    ArenaConfig::default().rewind_when_empty(false)
));
