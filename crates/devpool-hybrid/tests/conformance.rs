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

mod training_bursts {
    // The default preset with growth in bursts (`burst=on`).
    use super::*;
    devpool_testing::conformance_tests!(|mock: Arc<MockBackend>| {
        let mut c = HybridConfig::training();
        if let devpool_hybrid::LargeStrategy::Tlsf(t) = &mut c.large {
            t.pages = t.pages.clone().burst_ops(devpool_tlsf::BURST_ON);
        }
        hybrid(mock, c)
    });
}
