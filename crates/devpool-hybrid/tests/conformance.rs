//! The core conformance suite against every hybrid preset.
use devpool_hybrid::{hybrid, HybridConfig};
use devpool_testing::MockBackend;
use std::sync::Arc;

mod training {
    use super::*;
    devpool_testing::conformance_tests!(|mock: Arc<MockBackend>| hybrid(
        mock,
        HybridConfig::training()
    ));
}

mod inference {
    use super::*;
    devpool_testing::conformance_tests!(|mock: Arc<MockBackend>| hybrid(
        mock,
        HybridConfig::inference()
    ));
}

mod buddy {
    use super::*;
    devpool_testing::conformance_tests!(|mock: Arc<MockBackend>| hybrid(
        mock,
        HybridConfig::with_buddy()
    ));
}
