//! [`Memo`]: what the placement search learned about free blocks that cannot take a
//! block without mapping, so that the next search passes them by.
//!
//! When the index's pick for a block lands on pages that are not mapped, the pool
//! looks at up to 64 free blocks for one whose start, or a run of unused mapped pages
//! inside it, needs no mapping (`TlsfPool::prefer_mapped`). On inference-shaped work,
//! where memory moves and leaves holes, most large allocations take that path, and
//! most of the blocks a search looks at are holes it looked at before, with the same
//! answer (docs/BENCHMARKS.md, "Placement searches that remember").
//! What a look found is kept per free block:
//!
//! - from the page its placement starts on, the fewest pages found to take in one
//!   that is not mapped;
//! - the fewest pages found to have no run of unused mapped pages in the block.
//!
//! Both stay true while the block keeps its start and size and the layer's
//! [`map_epoch`](devpool_vm::PageLayer::map_epoch) has not moved: until then no page
//! becomes mapped or usable again (pages only lose their mapping or go to retire),
//! and no block uses a page inside a free block. A longer request cannot do better.
//! So the search passes such a block by without reading a bit, exactly as the full
//! look would, and works out its key (pages to map, address) only when no block
//! needing no mapping turns up at all.

use crate::index::{Node, NIL};

/// Blocks remembered, by node number modulo this: a search looks at the heads of
/// a few classes, the same few again and again.
const SLOTS: usize = 128;

/// What a search asks of a free block: a placement starting on page `page` (the
/// address over the page size) and touching `touched` pages, and a run of `run`
/// unused mapped pages somewhere in the block.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Look {
    pub page: u64,
    pub touched: u64,
    pub run: u64,
}

impl Look {
    /// The look for `size` bytes (at least one) at `at`, with pages of `1 << shift`
    /// bytes.
    #[inline]
    pub fn new(at: u64, size: u64, shift: u32) -> Look {
        let first = at >> shift;
        Look {
            page: first,
            touched: ((at + size - 1) >> shift) - first + 1,
            run: (size + (1 << shift) - 1) >> shift,
        }
    }
}

/// One remembered block: valid while the node, its start and size and the layer's
/// epoch are those recorded.
#[derive(Clone, Copy, Debug)]
struct Entry {
    node: u32,
    epoch: u64,
    addr: u64,
    size: u64,
    /// The page placements in the block start on.
    page: u64,
    /// Fewest pages from `page` found to take in one not mapped (`u64::MAX`: none).
    touch_fails: u64,
    /// Fewest pages found to have no unused mapped run in the block (`u64::MAX`:
    /// none).
    run_fails: u64,
}

const EMPTY: Entry = Entry {
    node: NIL,
    epoch: 0,
    addr: 0,
    size: 0,
    page: 0,
    touch_fails: u64::MAX,
    run_fails: u64::MAX,
};

/// The remembered blocks of one pool (empty until its first search).
#[derive(Debug, Default)]
pub(crate) struct Memo {
    slots: Vec<Entry>,
    /// Blocks passed by so far (for tests and the curious).
    pub passed: u64,
    /// Remember nothing: every look reads the bits (for tests that compare).
    pub off: bool,
}

impl Memo {
    /// Whether a look at free block `i` (`n`) would find, as an earlier one did,
    /// that placing there needs mapping and that no run in the block is long enough.
    #[inline]
    pub fn passes(&mut self, i: u32, n: &Node, epoch: u64, look: &Look) -> bool {
        let Some(e) = self.slots.get(i as usize % SLOTS) else {
            return false;
        };
        let pass = e.node == i
            && e.epoch == epoch
            && e.addr == n.addr
            && e.size == n.size
            && e.page == look.page
            && look.touched >= e.touch_fails
            && look.run >= e.run_fails;
        self.passed += pass as u64;
        pass
    }

    /// A placement in block `i` from `look.page` over `look.touched` pages takes in
    /// a page that is not mapped.
    pub fn start_needs_mapping(&mut self, i: u32, n: &Node, epoch: u64, look: &Look) {
        if let Some(e) = self.entry(i, n, epoch, look.page) {
            e.touch_fails = e.touch_fails.min(look.touched);
        }
    }

    /// Block `i` holds no run of `look.run` unused mapped pages.
    pub fn no_run(&mut self, i: u32, n: &Node, epoch: u64, look: &Look) {
        if let Some(e) = self.entry(i, n, epoch, look.page) {
            e.run_fails = e.run_fails.min(look.run);
        }
    }

    /// The entry of block `i` as it is now, started afresh if what it held was
    /// about another block, start, size, page or epoch.
    #[inline]
    fn entry(&mut self, i: u32, n: &Node, epoch: u64, page: u64) -> Option<&mut Entry> {
        if self.off {
            return None;
        }
        if self.slots.is_empty() {
            self.slots = vec![EMPTY; SLOTS];
        }
        let e = &mut self.slots[i as usize % SLOTS];
        if (e.node, e.epoch, e.addr, e.size, e.page) != (i, epoch, n.addr, n.size, page) {
            *e = Entry {
                node: i,
                epoch,
                addr: n.addr,
                size: n.size,
                page,
                ..EMPTY
            };
        }
        Some(e)
    }

    /// Host bytes of the remembered blocks.
    pub fn metadata_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Entry>()
    }
}

#[cfg(test)]
mod tests {
    use crate::{TlsfConfig, TlsfPool};
    use devpool_core::{Block, Pool, Request, Rng};
    use devpool_testing::{FaultOn, MockBackend};

    /// Blocks of 256 KiB to 48 MiB, allocated and freed at random around a live
    /// set that drifts up and down, so that memory moves and leaves unmapped holes
    /// that searches look at again and again, and now and then an unmap fails (its
    /// pages stay mapped, usable again): every block lands where it lands when
    /// nothing is remembered, and the memo did pass blocks by.
    #[test]
    fn searches_place_every_block_where_a_full_look_would() {
        let mocks: Vec<_> = (0..2).map(|_| MockBackend::shared()).collect();
        let pools: Vec<TlsfPool> = mocks
            .iter()
            .map(|m| TlsfPool::new(m.clone(), TlsfConfig::default()))
            .collect();
        pools[1].inner.lock().memo.off = true;
        let mut rng = Rng::new(7);
        let mut live: Vec<[Block; 2]> = Vec::new();
        for step in 0..20_000 {
            if step % 97 == 0 {
                for m in &mocks {
                    m.fail_nth(FaultOn::Unmap, 1);
                }
            }
            let cap = if (step / 2_000) % 2 == 0 { 120 } else { 40 };
            let r = rng.next_u64();
            if live.len() < cap && (live.is_empty() || r & 3 != 0) {
                let req = Request::new(rng.log_uniform(256 << 10, 48 << 20));
                // An allocation that must unmap first fails when that unmap does, in
                // both pools alike.
                match (pools[0].allocate(&req), pools[1].allocate(&req)) {
                    (Ok(a), Ok(b)) => {
                        assert_eq!((a.ptr, a.size), (b.ptr, b.size), "step {step}");
                        live.push([a, b]);
                    }
                    (Err(_), Err(_)) => {}
                    (a, b) => panic!("step {step}: {a:?} against {b:?}"),
                }
            } else {
                let pair = live.swap_remove((r >> 8) as usize % live.len());
                for (p, b) in pools.iter().zip(&pair) {
                    p.deallocate(b).unwrap();
                }
            }
        }
        for (p, m) in pools.iter().zip(&mocks) {
            p.verify().unwrap();
            assert!(
                m.injected_faults() > 10,
                "unmaps failed: {}",
                m.injected_faults()
            );
        }
        let passed = |p: &TlsfPool| p.inner.lock().memo.passed;
        assert!(passed(&pools[0]) > 100, "passed {}", passed(&pools[0]));
        assert_eq!(passed(&pools[1]), 0);
    }
}
