//! The core conformance cases whose requests fit the default slab configuration
//! (classes up to 1 MiB) and the fixed pool of 1 MiB blocks. The cases that ask
//! for more than 1 MiB (random sizes, mixed steps, threads, data integrity, faults,
//! the model test) run on a wider configuration in `conformance_slab.rs`; their
//! equivalents within 1 MiB are in `model.rs`, `stress.rs` and `fixed.rs`.
use devpool_core::{testing, Allocator, MockBackend};
use devpool_slab::{fixed, slab, SlabConfig};
use std::sync::Arc;

fn default_slab(mock: Arc<MockBackend>) -> Box<dyn Allocator> {
    Box::new(slab(mock, SlabConfig::default()))
}

fn fixed_1mib(mock: Arc<MockBackend>) -> Box<dyn Allocator> {
    Box::new(fixed(mock, 1 << 20))
}

macro_rules! cases {
    ($name:ident, $make:path) => {
        mod $name {
            use super::*;
            #[test]
            fn zero_size() {
                testing::zero_size(&$make)
            }
            #[test]
            fn alignment() {
                testing::alignment(&$make)
            }
            #[test]
            fn huge_requests() {
                testing::huge_requests(&$make)
            }
            #[test]
            fn bad_frees() {
                testing::bad_frees(&$make)
            }
            #[test]
            fn cross_thread_free() {
                testing::cross_thread_free(&$make)
            }
            #[test]
            fn stream_order() {
                testing::stream_order(&$make)
            }
        }
    };
}

cases!(default_config, default_slab);
cases!(fixed_pool, fixed_1mib);
