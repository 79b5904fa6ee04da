//! The core conformance suite against the buddy allocator in virtual mode.
use devpool_buddy::{buddy, BuddyConfig};
use devpool_core::MockBackend;
use std::sync::Arc;

devpool_core::conformance_tests!(|mock: Arc<MockBackend>| buddy(
    mock,
    BuddyConfig::virtual_ranges()
));
