//! The core conformance suite against every hybrid preset.
use devpool_core::MockBackend;
use devpool_hybrid::{hybrid, HybridConfig};
use std::sync::Arc;

mod training {
    use super::*;
    devpool_core::conformance_tests!(|mock: Arc<MockBackend>| hybrid(
        mock,
        HybridConfig::training()
    ));
}

mod inference {
    use super::*;
    devpool_core::conformance_tests!(|mock: Arc<MockBackend>| hybrid(
        mock,
        HybridConfig::inference()
    ));
}

mod buddy {
    use super::*;
    devpool_core::conformance_tests!(|mock: Arc<MockBackend>| hybrid(
        mock,
        HybridConfig::with_buddy()
    ));
}
