//! The shared conformance suite, in virtual mode and in region mode.
use devpool_testing::MockBackend;
use devpool_tlsf::{tlsf, TlsfConfig, TlsfMode};
use std::sync::Arc;

mod virtual_mode {
    use super::*;
    devpool_testing::conformance_tests!(|mock: Arc<MockBackend>| tlsf(
        mock,
        TlsfConfig::default().mode(TlsfMode::Virtual)
    ));
}

mod region_mode {
    use super::*;
    devpool_testing::conformance_tests!(|mock: Arc<MockBackend>| tlsf(
        mock,
        TlsfConfig::default().mode(TlsfMode::Region)
    ));
}

mod virtual_mode_eager_unmap {
    // No cache at all: every page without a live block goes back when the pool grows.
    use super::*;
    devpool_testing::conformance_tests!(|mock: Arc<MockBackend>| tlsf(
        mock,
        TlsfConfig::default()
            .mode(TlsfMode::Virtual)
            .cache(0, 0.0)
            .window_ops(16)
    ));
}
