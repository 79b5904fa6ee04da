//! A free whose index work waits for the next call (virtual mode): the block is
//! parked, still counted as used by the index, and the next allocation takes it
//! back when releasing it and searching again would hand out that very block
//! ([`Index::reuse_fits`](crate::index::Index)); any other call first releases it.
//!
//! A block parks only where that is likely to pay: when the pool's last allocation
//! came right after a free of its own size (a loop of one size, a training step's
//! buffer freed and made again). Otherwise the release an allocation would do first
//! is work moved from the free to the allocation, whose latency is the one that
//! counts: counted from the bundled traces' sizes (granted in 512-byte granules),
//! this rule parks no block in bert_serve and about 770 in llama_generate's 92 837
//! large allocations, about half of which an allocation of the same size follows.
//!
//! Nothing else sees the difference: the page layer is told of the free at once,
//! as before, and of the allocation in the same order and with the same bytes; the
//! index ends every call in the state it would have had without parking, because a
//! parked block is released before anything else reads or changes the index (every
//! entry point of the pool calls [`settle`](TlsfPool::settle) first) and because a
//! block is taken back only where the release, search and carve would have left
//! the index as it stands. A second free of a parked block is told as a double free:
//! the deallocation settles first, which releases the block.

use crate::pool::{Inner, TlsfPool};
use crate::span::range_of;

impl TlsfPool {
    /// Release the parked block, if one waits: what its free would have done.
    #[inline]
    pub(crate) fn settle(g: &mut Inner) {
        if let Some(i) = g.parked.take() {
            g.index.release(i);
        }
    }

    /// Take the parked block back for `size` granted bytes at `align`, `need` bytes
    /// with the alignment's slack: its node and address, its pages counted by the
    /// page layer. `None` when releasing it and searching would hand out another
    /// place, or when its pages need mapping; then it is released, and the caller
    /// searches as usual.
    #[inline]
    pub(crate) fn take_parked(
        &self,
        g: &mut Inner,
        size: u64,
        need: u64,
        align: u64,
    ) -> Option<(u32, u64)> {
        let i = g.parked.take()?;
        let (addr, span) = {
            let n = g.index.node(i);
            (n.addr, n.span)
        };
        if size == need && addr & (align - 1) == 0 && g.index.reuse_fits(i, need) {
            if let Some(r) = range_of(&g.spans, span) {
                // What the search's pick would be asked next; false changes nothing
                // that the same question asked again after the release would not.
                if g.vm.take_back_exact(r, addr, addr + size)
                    || g.vm.acquire_mapped(r, (addr, addr + size))
                {
                    return Some((i, addr));
                }
            }
        }
        g.index.release(i);
        None
    }
}
