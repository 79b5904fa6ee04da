//! The conformance suite against the cudaMalloc baseline, over the mock backend.
use devpool_testing::MockBackend;
use std::sync::Arc;

devpool_testing::conformance_tests!(|mock: Arc<MockBackend>| devpool_cuda::cuda_malloc(mock));
