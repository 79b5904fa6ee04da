//! [`ReserveOnce`]: an allocator's reserve goes to one of its pools.

use crate::config::VmConfig;
use std::sync::atomic::{AtomicBool, Ordering};

/// Hands an allocator's reserve ([`VmConfig::reserve`]) to the first of its pools
/// only. A stream-ordered allocator makes one pool, with a page layer of its own, per
/// stream that allocates; a reserve in each would hold it once per stream.
///
/// ```
/// use devpool_vm::{ReserveOnce, VmConfig};
/// let cfg = VmConfig::default().reserve(1 << 30);
/// let once = ReserveOnce::default();
/// assert_eq!(once.settings(&cfg).reserve, 1 << 30);
/// assert_eq!(once.settings(&cfg).reserve, 0);
/// ```
#[derive(Debug, Default)]
pub struct ReserveOnce(AtomicBool);

impl ReserveOnce {
    /// The settings of the next pool: `cfg` with its reserve for the first one asked
    /// for, without it for every later one.
    pub fn settings(&self, cfg: &VmConfig) -> VmConfig {
        let mut c = cfg.clone();
        if c.reserve > 0 && self.0.swap(true, Ordering::Relaxed) {
            c.reserve = 0;
        }
        c
    }
}
