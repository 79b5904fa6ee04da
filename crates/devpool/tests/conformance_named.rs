//! The whole core conformance suite on every strategy exactly as its name builds it:
//! what the command-line tool and the C ABI hand their users.
use devpool::{MockBackend, StrategySpec, STRATEGIES};
use std::sync::Arc;

macro_rules! named {
    ($($module:ident => $name:literal $(, max_size = $max:expr)?);* $(;)?) => {
        $(
            mod $module {
                use super::*;
                devpool_testing::conformance_tests!(|mock: Arc<MockBackend>| {
                    $name.parse::<StrategySpec>().expect($name).build(mock)
                } $(, max_size = $max)?);
            }
        )*
        /// The names the modules above test.
        const TESTED: &[&str] = &[$($name),*];
    };
}

named! {
    direct => "direct";
    slab => "slab";
    buddy_region => "buddy-region";
    buddy_virtual => "buddy-virtual";
    tlsf_region => "tlsf-region";
    tlsf_virtual => "tlsf-virtual";
    arena => "arena";
    ring => "ring";
    hybrid => "hybrid";
    hybrid_coarse => "hybrid-coarse";
    hybrid_inference => "hybrid-inference";
    hybrid_buddy => "hybrid-buddy";
    fixed => "fixed", max_size = devpool::FIXED_BLOCK_SIZE;
    buddy => "buddy";
    tlsf => "tlsf";
}

#[test]
fn every_named_strategy_runs_the_suite() {
    let named: Vec<&str> = STRATEGIES.iter().map(|s| s.name).collect();
    assert_eq!(named, TESTED, "add new strategies to the list above");
}
