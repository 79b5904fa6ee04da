//! The shared conformance suite through a full stack of adaptors:
//! `Statistics<Limit<Logging<Tracking<direct>>>>`, and the retrying stack.
use devpool_adaptors::{Limit, Logging, OomRetry, Statistics, Tracking};
use devpool_core::direct;
use devpool_testing::MockBackend;
use std::sync::Arc;

/// Well above anything the suite allocates, so the cap never decides a case.
const CAP: u64 = 1 << 60;

mod stack {
    use super::*;
    devpool_testing::conformance_tests!(|mock: Arc<MockBackend>| {
        Statistics::new(Limit::new(
            Logging::new(Tracking::new(direct(mock)), std::io::sink()),
            CAP,
        ))
    });
}

mod retrying {
    use super::*;
    devpool_testing::conformance_tests!(|mock: Arc<MockBackend>| {
        OomRetry::new(Statistics::new(direct(mock)))
    });
}
