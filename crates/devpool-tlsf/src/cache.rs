//! Region mode's cache: wholly free regions are given back when the memory held
//! without a live block passes the bound of the same [`CachePolicy`] that the page
//! layer applies to unused pages in virtual mode. The bound is enforced when the
//! pool is about to take a new region and at the end of each window.
//!
//! [`CachePolicy`]: devpool_vm::CachePolicy

use crate::pool::{Inner, TlsfPool};
use devpool_core::Result;

impl TlsfPool {
    /// Bring the bytes in wholly free regions within the policy's bound once
    /// `incoming` more bytes are allocated.
    pub(crate) fn enforce_regions(&self, g: &mut Inner, incoming: u64) -> Result<()> {
        let bound = g.policy.bound(incoming);
        let cached = self
            .counters
            .reserved()
            .saturating_sub(g.policy.allocated() + incoming);
        if cached > bound {
            let n = self.release_free_spans(g, (cached - bound) as usize, false)?;
            if n > 0 {
                g.policy.on_release(n as u64);
            }
        }
        Ok(())
    }
}
