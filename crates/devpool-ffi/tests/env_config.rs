//! The settings come from `DEVPOOL_CONFIG` when nothing else is said (its own
//! process: the variable is read once, on first use).

mod common;
use common::*;
use devpool_ffi::*;

#[test]
fn the_environment_gives_the_first_settings() {
    // Set before any devpool call in this process, and this is the only test here.
    std::env::set_var(CONFIG_ENV, "backend=mock; strategy=tlsf-region; log=off");
    let p = malloc(5000, 3, 0);
    assert_ne!(p, 0, "{}", last_error());
    let v = stats(3);
    assert_eq!(v["strategy"], "tlsf-region");
    assert_eq!(v["backend"], "mock");
    assert!(v["routes"].is_null());
    assert_consistent(&v, 1, 5000);
    free(p, 5000, 3, 0);
    assert_consistent(&stats(3), 0, 0);
}
