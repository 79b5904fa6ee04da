//! The conformance suite against the cudaMalloc baseline, over the mock backend.
use devpool_core::MockBackend;
use std::sync::Arc;

devpool_core::conformance_tests!(|mock: Arc<MockBackend>| devpool_cuda::cuda_malloc(mock));
