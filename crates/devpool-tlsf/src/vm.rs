//! Virtual mode: where a new block goes when pages are missing, and what the page
//! layer is told.
//!
//! Blocks are packed contiguously, so neighbours share pages. The page layer
//! ([`devpool_vm::PageLayer`]) counts the live blocks on each page, maps what a new
//! block is missing (rounded up to the map batch inside the free block it is carved
//! from) and decides what to unmap.

use crate::index::{Node, NIL};
use crate::memo::Look;
use crate::pool::{Inner, TlsfPool};
use crate::span::range_of;
use devpool_core::{DevicePtr, Error, Result, StreamId};

/// Free blocks looked at when the first pick would need mapping.
const PREFER_SCAN: usize = 64;

impl TlsfPool {
    /// Where to carve `size` bytes at `align` for a request of `need` bytes, given
    /// `first`, the index's pick, with the block's pages counted as used (those
    /// missing mapped): the pick's start when its pages are all mapped (a few checks
    /// of their bits), else the wider search of [`prefer_mapped`](Self::prefer_mapped).
    /// On error nothing is counted.
    #[inline]
    pub(crate) fn place(
        &self,
        g: &mut Inner,
        first: u32,
        need: u64,
        size: u64,
        align: u64,
    ) -> Result<(u32, u64)> {
        let n = g.index.node(first);
        // Spans end far below the top of the address space: no overflow.
        let at = (n.addr + align - 1) & !(align - 1);
        if let Some(r) = range_of(&g.spans, n.span) {
            if g.vm.acquire_mapped(r, (at, at + size)) {
                return Ok((first, at));
            }
        }
        self.place_mapping(g, first, need, size, align)
    }

    /// [`place`](Self::place) when the pick lands on pages that are not mapped (or
    /// retiring): another free block may need fewer.
    #[inline(never)]
    fn place_mapping(
        &self,
        g: &mut Inner,
        first: u32,
        need: u64,
        size: u64,
        align: u64,
    ) -> Result<(u32, u64)> {
        let (i, addr) = self.prefer_mapped(g, first, need, size, align);
        let n = *g.index.node(i);
        // Most searches find a place on mapped pages: counted as `place` counts one.
        if let Some(r) = range_of(&g.spans, n.span) {
            if g.vm.acquire_mapped(r, (addr, addr + size)) {
                return Ok((i, addr));
            }
        }
        self.map_for(g, n.span, (n.addr, n.addr + n.size), (addr, addr + size))?;
        Ok((i, addr))
    }

    /// Map what block `[b, e)`, about to be carved from free block `[fa, fe)` of span
    /// `span`, is missing, and count its pages as used. On error nothing is counted.
    pub(crate) fn map_for(
        &self,
        g: &mut Inner,
        span: u32,
        room: (u64, u64),
        block: (u64, u64),
    ) -> Result<()> {
        let Some(r) = range_of(&g.spans, span) else {
            return Err(Error::NotOwned {
                ptr: DevicePtr(block.0),
            });
        };
        g.vm.acquire(r, block, room)
    }

    /// Block `[b, e)` of span `span`, last used on `stream`, was freed.
    #[inline]
    pub(crate) fn unmapped_by_free(
        &self,
        g: &mut Inner,
        span: u32,
        block: (u64, u64),
        stream: StreamId,
    ) {
        if let Some(r) = range_of(&g.spans, span) {
            g.vm.release_deferred(r, block, stream);
        }
    }

    /// The free block to carve `size` bytes at `align` from, and the address in it
    /// (its start, aligned): `first`, the index's pick, unless it lands on unmapped
    /// pages and another fitting block needs fewer (fewest first, then lowest
    /// address). Mapping is dear, so this wider search runs only when the pool would
    /// otherwise grow. Blocks that an earlier search found needing mapping, unchanged
    /// since, are passed by ([`crate::memo`]); their keys are worked out only if no
    /// block needing no mapping turns up.
    pub(crate) fn prefer_mapped(
        &self,
        g: &mut Inner,
        first: u32,
        need: u64,
        size: u64,
        align: u64,
    ) -> (u32, u64) {
        let Inner {
            index,
            spans,
            vm,
            memo,
            ..
        } = g;
        let (index, spans, vm) = (&*index, &spans[..], &*vm);
        let epoch = vm.map_epoch();
        let shift = self.page.trailing_zeros();
        let place = |n: &Node| (n.addr + align - 1) & !(align - 1);
        let key_of = |i: u32, n: &Node| {
            let at = place(n);
            let missing = match range_of(spans, n.span) {
                Some(r) => vm.missing(r, at, at + size),
                None => 0,
            };
            (missing, at, i)
        };
        // Blocks passed by, the pick among them (it may come round again in its
        // class): their keys are worked out only if nothing needs no mapping.
        let mut passed = [NIL; PREFER_SCAN + 1];
        let mut n_passed = 0;
        let n = index.node(first);
        let look = Look::new(place(n), size, shift);
        let mut best = (usize::MAX, 0, NIL);
        if memo.passes(first, n, epoch, &look) {
            passed[0] = first;
            n_passed = 1;
        } else {
            best = key_of(first, n);
            if best.0 == 0 {
                return (first, best.1);
            }
            memo.start_needs_mapping(first, n, epoch, &look);
        }
        index.candidates(need, PREFER_SCAN, |i, n| {
            let look = Look::new(place(n), size, shift);
            if memo.passes(i, n, epoch, &look) {
                passed[n_passed] = i;
                n_passed += 1;
                return best.0 > 0;
            }
            let key = key_of(i, n);
            best = best.min(key);
            if key.0 > 0 {
                memo.start_needs_mapping(i, n, epoch, &look);
                // Mapped pages no block uses, further in this free block.
                let run = range_of(spans, n.span)
                    .and_then(|r| vm.unused_run(r, n.addr, n.addr + n.size, size));
                match run {
                    Some(run) => best = best.min((0, run, i)),
                    None => memo.no_run(i, n, epoch, &look),
                }
            }
            best.0 > 0
        });
        if best.0 > 0 {
            for &i in &passed[..n_passed] {
                best = best.min(key_of(i, index.node(i)));
            }
        }
        (best.2, best.1)
    }

    /// Check the page layer's bookkeeping against the live blocks.
    pub(crate) fn verify_pages(&self, g: &Inner) -> std::result::Result<(), String> {
        use crate::index::State;
        let mut live = Vec::new();
        let mut regions = 0u64;
        for (sid, sp) in g.spans.iter().enumerate() {
            let Some(sp) = sp else { continue };
            let Some(r) = sp.range else {
                regions += sp.size;
                continue;
            };
            let mut i = g.index.last(sid as u32);
            while i != NIL {
                let n = g.index.node(i);
                if n.state == State::Used {
                    live.push((r, n.addr, n.addr + n.size));
                }
                i = n.prev_phys;
            }
        }
        g.vm.verify(live)?;
        let reserved = self.reserved(g).current;
        if reserved != g.vm.held().current + regions {
            return Err(format!(
                "stats say {reserved} reserved bytes, spans hold {}",
                g.vm.held().current + regions
            ));
        }
        Ok(())
    }
}
