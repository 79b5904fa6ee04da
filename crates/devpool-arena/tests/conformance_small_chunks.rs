//! The core conformance suite against an arena of small fixed-size chunks, so that
//! most cases cross chunks, take chunks of their own and keep few across resets.
use devpool_arena::{arena, ArenaConfig, MIB};
use devpool_testing::MockBackend;
use std::sync::Arc;

devpool_testing::conformance_tests!(|mock: Arc<MockBackend>| arena(
    mock,
    ArenaConfig::default()
        .chunk_size(MIB)
        .growth(1)
        .keep_chunks(1)
        .max_chunks(255)
));
