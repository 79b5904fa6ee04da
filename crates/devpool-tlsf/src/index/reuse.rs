//! Taking a block back that was freed just before, when releasing it and searching
//! again would hand out that same block: the index is left as it stands, with no
//! merge, search or split.
//!
//! A free followed by an allocation of the same size is the commonest pair of a
//! training loop. [`Index::reuse_fits`] tells, from the lists as they are before the
//! release, whether [`release`](Index::release) followed by [`find`](Index::find)
//! and [`carve`](Index::carve) at the found block's start would give back the same
//! node at the same address and leave every list, link and count as it is now. That
//! holds in two cases:
//!
//! - **No free neighbour.** The release pushes the block on its class list, the
//!   search looks at that list's head first and takes the smallest block that fits
//!   among the first `scan` (lowest address on ties), and the carve of a whole block
//!   pops it again. The block is taken unless one of the next `scan - 1` blocks of
//!   that list has its size and a lower address.
//! - **A free block after it that heads its list and stays in its class.** The
//!   release lets that block take it in place, the search finds the merged block
//!   (in the request's own class, or as the first non-empty class above it) if it is
//!   the smallest among the first `scan` there, and the carve from its front gives
//!   the freed node back (the last one vacated) and shrinks the neighbour in place.
//!
//! In every other case (a free block before it, or both neighbours free, or a
//! neighbour that moves lists) the caller releases the block and searches.

use super::{Index, State, NIL};

impl Index {
    /// Whether releasing used block `i` and then finding and carving `need` bytes
    /// from the found block's start would hand out `i` again at its address and
    /// leave the index as it is now (the module docs say when).
    #[inline]
    pub fn reuse_fits(&self, i: u32, need: u64) -> bool {
        let Some(b) = self.nodes.get(i as usize) else {
            return false;
        };
        if b.state != State::Used || b.size != need {
            return false;
        }
        let free = |j: u32| j != NIL && self.nodes[j as usize].state == State::Free;
        if free(b.prev_phys) {
            return false;
        }
        let (fl, sl) = self.class(need);
        if !free(b.next_phys) {
            // Pushed on its own class list, then looked at first.
            return self.first_among(self.heads[fl][sl], need, (need, b.addr), 1);
        }
        let nx = b.next_phys;
        let nj = &self.nodes[nx as usize];
        if !self.same_class(nj.size + need, nj.size) {
            return false;
        }
        // The merged block, at `b.addr`, takes the neighbour's place in its list;
        // both ways below ask that the neighbour head that list (a class is told by
        // its head, with no class computed), else the merge would move it up.
        let merged = (nj.size + need, b.addr);
        let head = self.heads[fl][sl];
        if head == nx {
            return self.first_among(nj.next_free, need, merged, 1);
        }
        if head != NIL && self.smallest(head, need) != NIL {
            return false;
        }
        match self.next_class(fl, sl + 1) {
            Some((f, c)) if self.heads[f][c] == nx => {
                nj.next_free == NIL || self.first_among(nj.next_free, 0, merged, 1)
            }
            _ => false,
        }
    }

    /// Whether a block of `key` (size, address) at a list's head, `seen` blocks
    /// looked at, is the smallest fitting `need` among the first `scan` of the list
    /// once the blocks from `j` on follow it.
    #[inline]
    fn first_among(&self, mut j: u32, need: u64, key: (u64, u64), mut seen: usize) -> bool {
        while j != NIL && seen < self.scan {
            let n = &self.nodes[j as usize];
            if n.size >= need && (n.size, n.addr) < key {
                return false;
            }
            j = n.next_free;
            seen += 1;
        }
        true
    }

    /// Hand used block `i` out again for `requested` bytes, where
    /// [`reuse_fits`](Self::reuse_fits) said so: what the release, search and carve
    /// would have left, a new generation (returned), and nothing else changed.
    #[inline]
    pub fn reuse(&mut self, i: u32, requested: u64) -> u32 {
        let n = &mut self.nodes[i as usize];
        debug_assert_eq!(n.state, State::Used);
        n.requested = requested;
        n.gen = n.gen.wrapping_add(1);
        n.gen
    }
}

#[cfg(test)]
mod tests {
    use super::super::Index;

    /// Against the long way: release, find, carve. Wherever `reuse_fits` says yes,
    /// the long way gives the same node at the same address, and an index that took
    /// the short way verifies and agrees with one that took the long way.
    #[test]
    fn reuse_fits_only_where_the_long_way_gives_the_block_back() {
        let (mut short, mut long) = (Index::new(512, 4), Index::new(512, 4));
        for ix in [&mut short, &mut long] {
            ix.add_span(0, 0, 1 << 30);
        }
        let mut live: Vec<u32> = Vec::new();
        let mut x = 7u64;
        let (mut fits, mut refused) = (0, 0);
        for _ in 0..20000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Mostly small blocks, some large ones, whose holes merge into free
            // blocks of many classes.
            let size = if (x >> 45).is_multiple_of(8) {
                512 * (600 + (x >> 20) % 1400)
            } else {
                512 * (1 + (x >> 20) % 40)
            };
            if live.len() < 200 && !(x >> 40).is_multiple_of(3) {
                let a = short.find(size).unwrap();
                let b = long.find(size).unwrap();
                assert_eq!(a, b);
                live.push(short.carve(a, 0, size, size));
                long.carve(b, 0, size, size);
                continue;
            }
            if live.is_empty() {
                continue;
            }
            let i = live.swap_remove((x >> 33) as usize % live.len());
            if (x >> 50).is_multiple_of(2) {
                // A plain free, leaving a hole.
                short.release(i);
                long.release(i);
                continue;
            }
            let want = short.node(i).size;
            let yes = short.reuse_fits(i, want);
            long.release(i);
            let j = long.find(want).unwrap();
            let (addr, node) = (long.node(j).addr, short.node(i).addr);
            let got = long.carve(j, 0, want, want);
            if yes {
                fits += 1;
                assert_eq!(
                    (got, long.node(got).addr),
                    (i, node),
                    "the long way differs"
                );
                let gen = short.reuse(i, want);
                assert_eq!(gen, long.node(got).gen);
                live.push(i);
            } else {
                refused += 1;
                short.release(i);
                let k = short.find(want).unwrap();
                assert_eq!(short.node(k).addr, addr);
                let k = short.carve(k, 0, want, want);
                assert_eq!(k, got);
                live.push(k);
            }
            short.verify().unwrap();
            assert_same(&short, &long);
        }
        assert!(
            fits > 200 && refused > 200,
            "{fits} fits, {refused} refused"
        );
    }

    /// A free block after the freed one that is not the head of its list moves
    /// up its list when they merge: no reuse, and indeed the long way hands out
    /// another node and leaves the list in another order.
    #[test]
    fn a_neighbour_behind_the_head_of_its_list_is_no_reuse() {
        let mut ix = Index::new(512, 4);
        ix.add_span(0, 0, 1 << 30);
        let take = |ix: &mut Index, size: u64| {
            let i = ix.find(size).unwrap();
            ix.carve(i, 0, size, size)
        };
        let sizes = [4096, (1 << 20) + (32 << 10), 4096, 4096, 1 << 20, 4096];
        let ids: Vec<u32> = sizes.iter().map(|&s| take(&mut ix, s)).collect();
        // The second large hole is pushed first, so the first heads their list.
        ix.release(ids[4]);
        ix.release(ids[1]);
        let d = ids[3];
        assert!(!ix.reuse_fits(d, 4096));
        ix.release(d);
        let j = ix.find(4096).unwrap();
        assert_ne!(
            ix.carve(j, 0, 4096, 4096),
            d,
            "the long way gives another node"
        );
        // With the neighbour at the head of its list, the block is taken back.
        let mut ix = Index::new(512, 4);
        ix.add_span(0, 0, 1 << 30);
        let ids: Vec<u32> = sizes.iter().map(|&s| take(&mut ix, s)).collect();
        ix.release(ids[1]);
        ix.release(ids[4]);
        assert!(ix.reuse_fits(ids[3], 4096));
    }

    /// Every node's place, state and generation, the free lists and their bitmaps,
    /// and the counts agree.
    fn assert_same(a: &Index, b: &Index) {
        assert_eq!(a.counts(), b.counts());
        assert_eq!(
            (a.fl_map, a.sl_map, a.heads.clone()),
            (b.fl_map, b.sl_map, b.heads.clone())
        );
        assert_eq!(
            (a.vacant, a.span_last.clone()),
            (b.vacant, b.span_last.clone())
        );
        assert_eq!(a.nodes.len(), b.nodes.len());
        for (i, (x, y)) in a.nodes.iter().zip(&b.nodes).enumerate() {
            use super::super::{Node, State};
            // A vacant node keeps only its generation and its place in the vacant
            // chain; a used one's list links are not read.
            let key = |n: &Node| {
                let place = (n.addr, n.size, n.prev_phys, n.next_phys);
                match n.state {
                    State::Vacant => (n.state, (0, 0, 0, 0), n.gen, (0, n.next_free)),
                    State::Used => (n.state, place, n.gen, (0, 0)),
                    State::Free => (n.state, place, n.gen, (n.prev_free, n.next_free)),
                }
            };
            assert_eq!(key(x), key(y), "node {i}");
        }
    }
}
