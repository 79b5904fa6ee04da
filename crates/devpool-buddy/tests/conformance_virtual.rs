//! The core conformance suite against the buddy allocator in virtual mode.
use devpool_buddy::{buddy, BuddyConfig};
use devpool_testing::MockBackend;
use std::sync::Arc;

devpool_testing::conformance_tests!(|mock: Arc<MockBackend>| buddy(
    mock,
    BuddyConfig::virtual_ranges()
));
