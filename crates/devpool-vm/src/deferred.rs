//! A release whose page work waits for the next call, so that a block freed and
//! taken again at once (a loop of one size) costs the page layer two counts, not a
//! release and an acquire of every page it touches.
//!
//! [`PageLayer::release_deferred`] counts the free (the policy's bytes and its
//! window) at once, as [`release`](PageLayer::release) does, but leaves the block's
//! pages counted as used. The next call settles it: an
//! [`acquire_mapped`](PageLayer::acquire_mapped) of exactly those bytes in the same
//! range takes the block back with nothing to undo; any other call of the layer
//! first takes the uses off the pages, as the release would have. A release is
//! deferred only when the release itself would have done nothing more: no window
//! ends at it, none ended before it, nothing waits to be unmapped, and its stream is
//! the last one released here. Then a release and an acquire of the same bytes
//! change the pages' bits and counts by exactly opposite amounts, and settling later
//! is the same as settling now, since no other call came in between: the layer's
//! state after every call is what it would have been without the deferral.
//!
//! The readers of the used pages (`unused_run`, `detail`, `verify`) would see a
//! deferred block as still live: a placement calls
//! [`finish_deferred`](PageLayer::finish_deferred) before them (`verify` refuses,
//! and debug builds check the others). The readers of the mapped pages only
//! (`missing`, `mapped_in`, `is_empty`) are unaffected.

use crate::layer::{at, PageLayer, RangeId};
use crate::uses::{take_uses, Footprint};
use devpool_core::StreamId;

/// A block released with its page work left for the next call.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Deferred {
    pub r: RangeId,
    pub lo: u64,
    pub hi: u64,
    pub pages: Footprint,
}

impl PageLayer {
    /// [`release`](Self::release), with the page work left for the next call where
    /// that changes nothing (the module docs say when): the common free of a pool
    /// that reuses its memory at once.
    #[inline]
    pub fn release_deferred(&mut self, r: RangeId, (lo, hi): (u64, u64), stream: StreamId) {
        self.finish_deferred();
        let quiet = !self.window_due
            && !self.policy.window_ends_next()
            && self.retire.is_empty()
            && self.retire.moved.is_empty()
            && self.streams.last() == Some(&stream);
        if quiet {
            let shift = self.shift;
            if let Some(Some(rg)) = self.ranges.get(r.index()) {
                if let Some(pages) = Footprint::within(rg, shift, lo, hi) {
                    self.policy.on_free(hi - lo);
                    // Not the end of a window: checked above.
                    let _ = self.policy.tick();
                    self.deferred = Some(Deferred { r, lo, hi, pages });
                    return;
                }
            }
        }
        self.release(r, (lo, hi), stream);
    }

    /// Do the page work of a deferred release, if one waits. Every call of the layer
    /// that changes it does this first; a placement calls it before the methods
    /// that only read the pages.
    #[inline]
    pub fn finish_deferred(&mut self) {
        if let Some(d) = self.deferred.take() {
            self.finish_now(d);
        }
    }

    #[inline(never)]
    fn finish_now(&mut self, d: Deferred) {
        take_uses(at(&mut self.ranges, d.r), &mut self.n, d.pages);
    }

    /// [`acquire_mapped`](PageLayer::acquire_mapped) of the deferred release's very
    /// bytes: taken back and counted, true; otherwise false and nothing changed (the
    /// caller asks `acquire_mapped`, which settles a deferred release of other
    /// bytes). For a caller that expects the block just freed, in line.
    #[inline(always)]
    pub fn take_back_exact(&mut self, r: RangeId, lo: u64, hi: u64) -> bool {
        match self.deferred {
            Some(d) if d.r == r && d.lo == lo && d.hi == hi => {
                self.deferred = None;
                // Its pages never stopped being counted as used.
                self.policy.on_alloc(hi - lo);
                self.after_op(false);
                true
            }
            _ => false,
        }
    }

    /// Whether no release waits for its page work (for the readers' debug checks).
    #[inline]
    pub(crate) fn settled(&self) -> bool {
        self.deferred.is_none()
    }
}
