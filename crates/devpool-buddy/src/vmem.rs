//! Virtual mode: what the page layer ([`devpool_vm::PageLayer`]) is told when a
//! block is handed out and taken back.
//!
//! A block of a page or more needs its granted bytes mapped (it is aligned to its
//! size, so it starts on a page); a smaller block needs the one page it lies in,
//! shared with its neighbours: the page layer counts the live blocks on each page.
//! A freed block's pages stay mapped as the layer's cache, under the same policy as
//! TLSF's, and are unmapped in stream order.

use crate::pool::BuddyPool;
use crate::span::Inner;
use crate::tree::State;
use devpool_core::{Result, StreamId};
use devpool_vm::RangeId;

impl BuddyPool {
    /// The page layer's range of the span holding block `i`.
    #[inline]
    fn range_of(g: &Inner, i: u32) -> Option<RangeId> {
        g.span(g.tree.node(i).span).range
    }

    /// Back taken block `i`, of which `len` bytes are handed out, with mapped pages.
    /// On failure nothing is counted (pages mapped on the way stay mapped, as cache).
    pub(crate) fn back(&self, g: &mut Inner, i: u32, len: u64) -> Result<()> {
        let Some(r) = Self::range_of(g, i) else {
            return Ok(());
        };
        let addr = g.tree.node(i).addr;
        let bytes = (addr, addr + len.max(1));
        // A block whose pages are all mapped and none retiring: counted in one pass.
        if g.vm.acquire_mapped(r, bytes) {
            return Ok(());
        }
        g.vm.acquire(r, bytes, bytes)
    }

    /// The first `len` bytes of live block `i`, last used on `stream`, are no longer
    /// in use.
    pub(crate) fn release_pages(&self, g: &mut Inner, i: u32, len: u64, stream: StreamId) {
        if let Some(r) = Self::range_of(g, i) {
            let addr = g.tree.node(i).addr;
            g.vm.release_deferred(r, (addr, addr + len.max(1)), stream);
        }
    }

    /// Mapped pages among the first `n` pages of block `i` (all of them in region
    /// mode).
    #[inline]
    pub(crate) fn warmth(&self, g: &Inner, i: u32, n: usize) -> usize {
        let node = g.tree.node(i);
        match g.span(node.span).range {
            Some(r) => {
                let len = ((n as u64) << self.r.page_order).min(1 << node.order);
                g.vm.mapped_in(r, node.addr, node.addr + len)
            }
            None => n,
        }
    }

    /// Check the page layer's bookkeeping against the live blocks.
    pub(crate) fn verify_pages(&self, g: &Inner) -> std::result::Result<(), String> {
        let live = g.tree.live_nodes().filter_map(|(i, n)| {
            let r = Self::range_of(g, i)?;
            debug_assert!(matches!(n.state, State::Live | State::Head));
            let len = self.granted(n.order.into(), n.requested.max(1));
            Some((r, n.addr, n.addr + len))
        });
        g.vm.verify(live)
    }
}
