//! The shared conformance suite: the default ring (virtual memory, grows when full),
//! rings in regions, and rings that start small, keep the strict order or may pass
//! only a few live blocks, so that growth, second rings and pinning all run.
use devpool_ring::{ring, RingConfig, RingMode};
use devpool_testing::MockBackend;
use std::sync::Arc;

mod virtual_memory {
    use super::*;
    devpool_testing::conformance_tests!(|mock: Arc<MockBackend>| ring(mock, RingConfig::default()));
}

mod region {
    use super::*;
    devpool_testing::conformance_tests!(|mock: Arc<MockBackend>| ring(
        mock,
        RingConfig::default()
            .mode(RingMode::Region)
            .capacity(4 << 20)
    ));
}

mod strict_order {
    // The tail never passes a live block: only growth makes room.
    use super::*;
    devpool_testing::conformance_tests!(|mock: Arc<MockBackend>| ring(
        mock,
        RingConfig::default().capacity(2 << 20).max_pinned(0)
    ));
}

mod few_pins_in_regions {
    use super::*;
    devpool_testing::conformance_tests!(|mock: Arc<MockBackend>| ring(
        mock,
        RingConfig::default()
            .mode(RingMode::Region)
            .capacity(1 << 20)
            .max_pinned(2)
    ));
}
