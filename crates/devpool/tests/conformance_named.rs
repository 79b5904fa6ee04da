//! The whole core conformance suite on every strategy exactly as `build` makes it
//! by name: what the command-line tool and the C ABI hand their users.
use devpool::{build, MockBackend, STRATEGIES};
use std::sync::Arc;

macro_rules! named {
    ($($module:ident => $name:literal),* $(,)?) => {
        $(
            mod $module {
                use super::*;
                devpool_core::conformance_tests!(|mock: Arc<MockBackend>| {
                    build($name, mock).expect($name)
                });
            }
        )*
        /// The names the modules above test.
        const TESTED: &[&str] = &[$($name),*];
    };
}

named! {
    direct => "direct",
    slab => "slab",
    buddy_region => "buddy-region",
    buddy_virtual => "buddy-virtual",
    tlsf_region => "tlsf-region",
    tlsf_virtual => "tlsf-virtual",
    arena => "arena",
    ring => "ring",
    hybrid => "hybrid",
    hybrid_inference => "hybrid-inference",
    hybrid_buddy => "hybrid-buddy",
}

#[test]
fn every_listed_strategy_runs_the_suite() {
    let listed: Vec<&str> = STRATEGIES.iter().map(|s| s.name).collect();
    assert_eq!(listed, TESTED, "add new strategies to the list above");
}
