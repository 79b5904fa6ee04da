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

mod virtual_mode_bursts {
    // Growth in bursts maps ahead (`burst=on`), with short windows so that what was
    // mapped ahead also goes back within the suite's work.
    use super::*;
    devpool_testing::conformance_tests!(|mock: Arc<MockBackend>| tlsf(
        mock,
        TlsfConfig::default().mode(TlsfMode::Virtual).pages(
            devpool_tlsf::VmConfig::default()
                .window_ops(64)
                .burst_ops(devpool_tlsf::BURST_ON)
        )
    ));
}
