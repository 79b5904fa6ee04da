//! The TLSF index: every block of every span as a host-side node, free blocks in
//! segregated lists found through two levels of bitmaps.
//!
//! Sizes are counted in granules. The first level is the power of two of the size,
//! the second splits each power of two into 16 equal classes (a 4-bit mantissa), so
//! a class spans at most 1/16 of its lower bound. Sizes below 16 granules get one
//! class each.
//!
//! A search first looks at a few blocks of the request's own class and takes the
//! smallest that fits (lowest address on ties): training loops free and allocate the
//! same sizes again and again, and the exact fit lives in that class. Otherwise the
//! bitmaps give, in O(1), the first non-empty class above, whose blocks all fit; the
//! smallest among its first few blocks is taken, lowest address on ties. Splitting
//! from the front then keeps live data packed at the low end of each span, and the
//! large free tail of a span is used only when no hole fits.
//!
//! Blocks keep links to their address neighbours, so a freed block merges with free
//! neighbours at once. Nodes live in one `Vec`; freed slots are reused, and each node
//! counts its allocations so that a stale handle is told from a live one.

mod reuse;

/// No node.
pub(crate) const NIL: u32 = u32::MAX;

const SL_BITS: u32 = 4;
const SL: usize = 1 << SL_BITS;
const FL: usize = 64;

/// What a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// A free block, in its class list.
    Free,
    /// A block handed out.
    Used,
    /// An unused slot of the arena.
    Vacant,
}

/// One block of address space.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Node {
    pub addr: u64,
    pub size: u64,
    pub requested: u64,
    pub prev_phys: u32,
    pub next_phys: u32,
    pub prev_free: u32,
    pub next_free: u32,
    pub span: u32,
    /// Allocations of this slot so far: part of the block's handle.
    pub gen: u32,
    pub state: State,
}

/// The segregated free lists and the node arena.
pub(crate) struct Index {
    shift: u32,
    scan: usize,
    nodes: Vec<Node>,
    vacant: u32,
    fl_map: u64,
    sl_map: [u32; FL],
    heads: Box<[[u32; SL]; FL]>,
    span_last: Vec<u32>,
    free_blocks: usize,
    free_bytes: u64,
    used_blocks: usize,
}

impl Index {
    /// An empty index for sizes in multiples of `granule` (a power of two), looking at
    /// up to `scan` blocks of a class per search.
    pub fn new(granule: u64, scan: usize) -> Self {
        debug_assert!(granule.is_power_of_two());
        Index {
            shift: granule.trailing_zeros(),
            scan: scan.max(1),
            nodes: Vec::new(),
            vacant: NIL,
            fl_map: 0,
            sl_map: [0; FL],
            heads: Box::new([[NIL; SL]; FL]),
            span_last: Vec::new(),
            free_blocks: 0,
            free_bytes: 0,
            used_blocks: 0,
        }
    }

    /// The node `i`.
    #[inline]
    pub fn node(&self, i: u32) -> &Node {
        &self.nodes[i as usize]
    }

    /// The node `i`, if the arena has that slot.
    #[inline]
    pub fn get(&self, i: u32) -> Option<&Node> {
        self.nodes.get(i as usize)
    }

    /// Free blocks and their bytes; blocks handed out.
    pub fn counts(&self) -> (usize, u64, usize) {
        (self.free_blocks, self.free_bytes, self.used_blocks)
    }

    /// Host bytes of the arena.
    pub fn metadata_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node>()
            + std::mem::size_of::<[[u32; SL]; FL]>()
            + self.span_last.capacity() * 4
    }

    /// The highest block of span `s`.
    #[inline]
    pub fn last(&self, s: u32) -> u32 {
        self.span_last.get(s as usize).copied().unwrap_or(NIL)
    }

    #[inline]
    fn class(&self, size: u64) -> (usize, usize) {
        let u = size >> self.shift;
        if u < SL as u64 {
            (0, u as usize)
        } else {
            let msb = 63 - u.leading_zeros();
            (
                (msb - SL_BITS + 1) as usize,
                ((u >> (msb - SL_BITS)) as usize) & (SL - 1),
            )
        }
    }

    /// Whether sizes `a` and `b` fall in one class: their granule counts agree on
    /// the highest set bit and the `SL_BITS` bits below it (below `SL` granules, on
    /// every bit). Cheaper than comparing two `class` results.
    #[inline]
    fn same_class(&self, a: u64, b: u64) -> bool {
        let (a, b) = (a >> self.shift, b >> self.shift);
        let msb = 63 - (a | 1).leading_zeros();
        (a ^ b) >> msb.saturating_sub(SL_BITS) == 0
    }

    /// The first non-empty class at or above (`fl`, `sl`).
    #[inline]
    fn next_class(&self, fl: usize, sl: usize) -> Option<(usize, usize)> {
        if sl < SL {
            let bits = self.sl_map[fl] & (u32::MAX << sl);
            if bits != 0 {
                return Some((fl, bits.trailing_zeros() as usize));
            }
        }
        if fl + 1 >= FL {
            return None;
        }
        let bits = self.fl_map & (u64::MAX << (fl + 1));
        if bits == 0 {
            return None;
        }
        let f = bits.trailing_zeros() as usize;
        Some((f, self.sl_map[f].trailing_zeros() as usize))
    }

    #[inline]
    fn insert_free(&mut self, i: u32) {
        let (fl, sl) = self.class(self.nodes[i as usize].size);
        let head = self.heads[fl][sl];
        {
            let n = &mut self.nodes[i as usize];
            n.state = State::Free;
            n.prev_free = NIL;
            n.next_free = head;
            self.free_bytes += n.size;
        }
        if head != NIL {
            self.nodes[head as usize].prev_free = i;
        }
        self.heads[fl][sl] = i;
        self.sl_map[fl] |= 1 << sl;
        self.fl_map |= 1 << fl;
        self.free_blocks += 1;
    }

    #[inline(always)]
    fn remove_free(&mut self, i: u32) {
        let n = &self.nodes[i as usize];
        debug_assert_eq!(n.state, State::Free);
        let (prev, next, size) = (n.prev_free, n.next_free, n.size);
        if prev != NIL {
            self.nodes[prev as usize].next_free = next;
        } else {
            let (fl, sl) = self.class(size);
            self.heads[fl][sl] = next;
            if next == NIL {
                self.sl_map[fl] &= !(1 << sl);
                if self.sl_map[fl] == 0 {
                    self.fl_map &= !(1 << fl);
                }
            }
        }
        if next != NIL {
            self.nodes[next as usize].prev_free = prev;
        }
        self.free_blocks -= 1;
        self.free_bytes -= size;
    }

    #[inline]
    fn new_node(&mut self, addr: u64, size: u64, span: u32) -> u32 {
        let fresh = Node {
            addr,
            size,
            requested: 0,
            prev_phys: NIL,
            next_phys: NIL,
            prev_free: NIL,
            next_free: NIL,
            span,
            gen: 0,
            state: State::Vacant,
        };
        if self.vacant != NIL {
            let i = self.vacant;
            let n = &mut self.nodes[i as usize];
            self.vacant = n.next_free;
            *n = Node {
                gen: n.gen,
                ..fresh
            };
            i
        } else {
            self.nodes.push(fresh);
            (self.nodes.len() - 1) as u32
        }
    }

    #[inline]
    fn vacate(&mut self, i: u32) {
        let n = &mut self.nodes[i as usize];
        n.state = State::Vacant;
        n.next_free = self.vacant;
        self.vacant = i;
    }

    /// A free block of at least `need` bytes (a multiple of the granule), if any.
    #[inline(always)]
    pub fn find(&self, need: u64) -> Option<u32> {
        let (fl, sl) = self.class(need);
        let head = self.heads[fl][sl];
        if head != NIL {
            let best = self.smallest(head, need);
            if best != NIL {
                return Some(best);
            }
        }
        let (fl, sl) = self.next_class(fl, sl + 1)?;
        // Every block of a class above fits: a class of one block gives it.
        let head = self.heads[fl][sl];
        if self.nodes[head as usize].next_free == NIL {
            return Some(head);
        }
        Some(self.smallest(head, 0))
    }

    /// The smallest block of at least `need` bytes (lowest address on ties) among
    /// the first `scan` blocks of the list from `i`; `NIL` if none fits.
    #[inline]
    fn smallest(&self, mut i: u32, need: u64) -> u32 {
        let mut best = NIL;
        let (mut best_size, mut best_addr) = (u64::MAX, u64::MAX);
        let mut seen = 0;
        while i != NIL && seen < self.scan {
            let n = &self.nodes[i as usize];
            if n.size >= need && (n.size, n.addr) < (best_size, best_addr) {
                (best, best_size, best_addr) = (i, n.size, n.addr);
            }
            i = n.next_free;
            seen += 1;
        }
        best
    }

    /// Visit the free blocks of at least `need` bytes, class by class upwards from
    /// the class of `need`, until `visit` returns false or `limit` blocks were looked
    /// at (the too-small blocks of the first class count too).
    pub fn candidates(&self, need: u64, limit: usize, mut visit: impl FnMut(u32, &Node) -> bool) {
        let (mut fl, mut sl) = self.class(need);
        let mut seen = 0;
        while let Some((f, c)) = self.next_class(fl, sl) {
            let mut i = self.heads[f][c];
            while i != NIL {
                let n = &self.nodes[i as usize];
                // Every block looked at counts, a too-small one of the first class
                // too: the scan never grows with the free blocks of a class.
                seen += 1;
                if n.size >= need && !visit(i, n) {
                    return;
                }
                if seen >= limit {
                    return;
                }
                i = n.next_free;
            }
            (fl, sl) = if c + 1 < SL {
                (f, c + 1)
            } else if f + 1 < FL {
                (f + 1, 0)
            } else {
                return;
            };
        }
    }

    /// Add span `s` of `size` bytes at `addr` as one free block.
    pub fn add_span(&mut self, s: u32, addr: u64, size: u64) -> u32 {
        let i = self.new_node(addr, size, s);
        if self.span_last.len() <= s as usize {
            self.span_last.resize(s as usize + 1, NIL);
        }
        self.span_last[s as usize] = i;
        self.insert_free(i);
        i
    }

    /// The single free block of span `s` when the whole span is free.
    pub fn whole_free(&self, s: u32) -> Option<u32> {
        let i = self.last(s);
        if i == NIL {
            return None;
        }
        let n = &self.nodes[i as usize];
        (n.state == State::Free && n.prev_phys == NIL).then_some(i)
    }

    /// Drop span `s`, which must be wholly free.
    pub fn remove_span(&mut self, s: u32) {
        if let Some(i) = self.whole_free(s) {
            self.remove_free(i);
            self.vacate(i);
            self.span_last[s as usize] = NIL;
        }
    }

    /// Hand out `size` bytes of free block `i`, `pad` bytes past its start: the
    /// bytes before and after become free blocks of their own. Returns the used
    /// block's node (its generation bumped): a new node when the block comes from
    /// the front of `i` and `i` keeps the rest, else `i`.
    #[inline]
    pub fn carve(&mut self, i: u32, pad: u64, size: u64, requested: u64) -> u32 {
        let n = self.nodes[i as usize];
        debug_assert_eq!(n.state, State::Free);
        debug_assert!(pad + size <= n.size);
        let rest = n.size - pad - size;
        let u = if pad == 0 && rest > 0 && n.prev_free == NIL && self.same_class(rest, n.size) {
            // The rest stays in the class and `i` heads its list: `i` keeps the rest
            // and its place in the list, which is where unlinking `i` and pushing the
            // rest would put it; no list or bitmap changes. The block gets a node.
            let u = self.new_node(n.addr, size, n.span);
            let un = &mut self.nodes[u as usize];
            un.prev_phys = n.prev_phys;
            un.next_phys = i;
            if n.prev_phys != NIL {
                self.nodes[n.prev_phys as usize].next_phys = u;
            }
            let ni = &mut self.nodes[i as usize];
            ni.prev_phys = u;
            ni.addr = n.addr + size;
            ni.size = rest;
            self.free_bytes -= size;
            u
        } else {
            self.remove_free(i);
            if pad > 0 {
                let f = self.new_node(n.addr, pad, n.span);
                self.nodes[f as usize].prev_phys = n.prev_phys;
                self.nodes[f as usize].next_phys = i;
                if n.prev_phys != NIL {
                    self.nodes[n.prev_phys as usize].next_phys = f;
                }
                self.nodes[i as usize].prev_phys = f;
                self.insert_free(f);
            }
            if rest > 0 {
                let t = self.new_node(n.addr + pad + size, rest, n.span);
                self.link_after(i, t, n.next_phys);
                self.insert_free(t);
            }
            let ni = &mut self.nodes[i as usize];
            ni.addr = n.addr + pad;
            ni.size = size;
            i
        };
        let un = &mut self.nodes[u as usize];
        un.requested = requested;
        un.state = State::Used;
        un.gen = un.gen.wrapping_add(1);
        self.used_blocks += 1;
        u
    }

    /// Link new node `t` between `i` and `next` (`i`'s successor, or `NIL` when `i`
    /// ends its span).
    #[inline]
    fn link_after(&mut self, i: u32, t: u32, next: u32) {
        let tn = &mut self.nodes[t as usize];
        tn.prev_phys = i;
        tn.next_phys = next;
        if next != NIL {
            self.nodes[next as usize].prev_phys = t;
        } else {
            let span = tn.span;
            self.span_last[span as usize] = t;
        }
        self.nodes[i as usize].next_phys = t;
    }

    /// Free used block `i` and merge it with free neighbours; returns the merged free
    /// block.
    #[inline]
    pub fn release(&mut self, i: u32) -> u32 {
        debug_assert_eq!(self.nodes[i as usize].state, State::Used);
        self.used_blocks -= 1;
        let size = self.nodes[i as usize].size;
        let p = self.nodes[i as usize].prev_phys;
        let n = self.nodes[i as usize].next_phys;
        let p_free = p != NIL && self.nodes[p as usize].state == State::Free;
        let n_free = n != NIL && self.nodes[n as usize].state == State::Free;
        // One free neighbour that heads its class list and stays in its class once
        // merged: it takes `i` in and keeps its place in the list, which is where
        // unlinking it and pushing the merged block would put it; no list or bitmap
        // changes.
        if p_free != n_free {
            let j = if p_free { p } else { n };
            let nj = self.nodes[j as usize];
            if nj.prev_free == NIL && self.same_class(nj.size + size, nj.size) {
                self.free_bytes += size;
                if p_free {
                    self.absorb_next(p);
                    return p;
                }
                // The free block after `i` takes it in from below and keeps its node.
                let (addr, prev) = (
                    self.nodes[i as usize].addr,
                    self.nodes[i as usize].prev_phys,
                );
                let nn = &mut self.nodes[n as usize];
                nn.addr = addr;
                nn.size += size;
                nn.prev_phys = prev;
                if prev != NIL {
                    self.nodes[prev as usize].next_phys = n;
                }
                self.vacate(i);
                return n;
            }
        }
        let mut m = i;
        if p_free {
            self.remove_free(p);
            self.absorb_next(p);
            m = p;
        }
        if n_free {
            self.remove_free(n);
            self.absorb_next(m);
        }
        self.insert_free(m);
        m
    }

    /// Merge the block after `i` into `i` and drop its node.
    #[inline]
    fn absorb_next(&mut self, i: u32) {
        let j = self.nodes[i as usize].next_phys;
        let nj = self.nodes[j as usize];
        let ni = &mut self.nodes[i as usize];
        ni.size += nj.size;
        ni.next_phys = nj.next_phys;
        if nj.next_phys != NIL {
            self.nodes[nj.next_phys as usize].prev_phys = i;
        } else {
            self.span_last[nj.span as usize] = i;
        }
        self.vacate(j);
    }

    /// The size of the largest free block.
    pub fn largest_free(&self) -> u64 {
        if self.fl_map == 0 {
            return 0;
        }
        let fl = 63 - self.fl_map.leading_zeros() as usize;
        let sl = 31 - self.sl_map[fl].leading_zeros() as usize;
        let mut i = self.heads[fl][sl];
        let mut best = 0;
        while i != NIL {
            best = best.max(self.nodes[i as usize].size);
            i = self.nodes[i as usize].next_free;
        }
        best
    }

    /// Check every link and count (tests and debugging); returns a description of
    /// the first inconsistency.
    pub fn verify(&self) -> Result<(), String> {
        let (mut free, mut bytes, mut used) = (0usize, 0u64, 0usize);
        for (s, &last) in self.span_last.iter().enumerate() {
            let mut i = last;
            let mut next_addr = None;
            let mut prev_free = false;
            while i != NIL {
                let n = &self.nodes[i as usize];
                if n.span as usize != s {
                    return Err(format!("node {i} in span {s} says span {}", n.span));
                }
                if let Some(a) = next_addr {
                    if n.addr + n.size != a {
                        return Err(format!("node {i} does not reach its successor"));
                    }
                }
                match n.state {
                    State::Free => {
                        if prev_free {
                            return Err(format!("free node {i} not merged with its successor"));
                        }
                        free += 1;
                        bytes += n.size;
                        let (fl, sl) = self.class(n.size);
                        if self.sl_map[fl] & (1 << sl) == 0 {
                            return Err(format!("free node {i} in an empty class"));
                        }
                    }
                    State::Used => used += 1,
                    State::Vacant => return Err(format!("vacant node {i} linked")),
                }
                prev_free = n.state == State::Free;
                next_addr = Some(n.addr);
                if n.prev_phys != NIL && self.nodes[n.prev_phys as usize].next_phys != i {
                    return Err(format!("node {i}: broken back link"));
                }
                i = n.prev_phys;
            }
        }
        let mut listed = 0usize;
        for fl in 0..FL {
            for sl in 0..SL {
                let head = self.heads[fl][sl];
                if (head != NIL) != (self.sl_map[fl] & (1 << sl) != 0) {
                    return Err(format!("class ({fl}, {sl}): list and bitmap disagree"));
                }
                let (mut i, mut prev) = (head, NIL);
                while i != NIL {
                    let n = &self.nodes[i as usize];
                    if n.state != State::Free || self.class(n.size) != (fl, sl) {
                        return Err(format!("node {i} in the list of class ({fl}, {sl})"));
                    }
                    if n.prev_free != prev {
                        return Err(format!("node {i}: broken free back link"));
                    }
                    listed += 1;
                    if listed > self.nodes.len() {
                        return Err(format!("class ({fl}, {sl}): the list loops"));
                    }
                    (prev, i) = (i, n.next_free);
                }
            }
            if (self.sl_map[fl] != 0) != (self.fl_map & (1 << fl) != 0) {
                return Err(format!("first level {fl}: bitmaps disagree"));
            }
        }
        if listed != free {
            return Err(format!("{listed} blocks listed, {free} free"));
        }
        if (free, bytes, used) != (self.free_blocks, self.free_bytes, self.used_blocks) {
            return Err(format!(
                "counts {:?} differ from the lists {:?}",
                (self.free_blocks, self.free_bytes, self.used_blocks),
                (free, bytes, used)
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_monotone_and_cover_sizes() {
        let ix = Index::new(512, 4);
        let mut last = (0, 0);
        for u in 1..5000u64 {
            let c = ix.class(u * 512);
            assert!(c >= last, "class of {u} granules went down");
            last = c;
        }
        assert_eq!(ix.class(512 * 15), (0, 15));
        assert_eq!(ix.class(512 * 16), (1, 0));
        assert_eq!(ix.class(512 * 31), (1, 15));
        assert_eq!(ix.class(512 * 32), (2, 0));
    }

    #[test]
    fn same_class_agrees_with_class() {
        let ix = Index::new(512, 4);
        let mut x = 7u64;
        for _ in 0..20000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let a = ((x >> 20) % (1 << ((x >> 8) % 40)) + 1) * 512;
            let b = match x % 3 {
                0 => a + ((x >> 45) % 64) * 512,
                1 => a.saturating_sub(((x >> 45) % 64) * 512).max(512),
                _ => ((x >> 30) % (1 << 20) + 1) * 512,
            };
            assert_eq!(ix.same_class(a, b), ix.class(a) == ix.class(b), "{a} {b}");
        }
    }

    #[test]
    fn carve_release_merges_back() {
        let mut ix = Index::new(512, 4);
        let whole = ix.add_span(0, 1 << 30, 1 << 30);
        let a = ix.find(4096).unwrap();
        assert_eq!(a, whole);
        let a = ix.carve(a, 0, 4096, 4000);
        let b = ix.find(8192).unwrap();
        let b = ix.carve(b, 1024, 8192, 8192);
        ix.verify().unwrap();
        assert_eq!(ix.counts().2, 2);
        assert_eq!(ix.node(b).addr, (1 << 30) + 4096 + 1024);
        let m = ix.release(a);
        ix.verify().unwrap();
        assert_eq!(ix.node(m).size, 4096 + 1024, "merged with the pad after it");
        ix.release(b);
        ix.verify().unwrap();
        assert_eq!(ix.counts(), (1, 1 << 30, 0));
        assert!(ix.whole_free(0).is_some());
    }

    #[test]
    fn random_carves_and_releases_keep_every_list_consistent() {
        // Carving from the front of a list's head and merging into it take the
        // short paths; the others unlink and push. Both must leave the same lists.
        let mut ix = Index::new(512, 8);
        ix.add_span(0, 0, 1 << 30);
        ix.add_span(1, 1 << 31, 3 << 28);
        let mut live: Vec<u32> = Vec::new();
        let mut x = 99u64;
        for _ in 0..4000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            if live.len() < 64 && !(x >> 40).is_multiple_of(3) {
                let size = 512 << ((x >> 20) % 12);
                let pad = if (x >> 50).is_multiple_of(4) { 512 } else { 0 };
                if let Some(i) = ix.find(size + pad) {
                    live.push(ix.carve(i, pad, size, size));
                }
            } else if !live.is_empty() {
                let k = (x >> 33) as usize % live.len();
                ix.release(live.swap_remove(k));
            }
            ix.verify().unwrap();
        }
        for i in live {
            ix.release(i);
        }
        ix.verify().unwrap();
        assert_eq!(ix.counts(), (2, (1 << 30) + (3 << 28), 0));
    }

    #[test]
    fn exact_fit_in_own_class_is_preferred() {
        let mut ix = Index::new(512, 8);
        ix.add_span(0, 0, 1 << 30);
        // Two holes of 70 and 71 KiB between used blocks, then the big tail.
        let mut ids = Vec::new();
        for size in [70u64 << 10, 4096, 71 << 10, 4096] {
            let i = ix.find(size).unwrap();
            ids.push(ix.carve(i, 0, size, size));
        }
        let hole70 = ix.node(ids[0]).addr;
        ix.release(ids[2]);
        ix.release(ids[0]);
        let got = ix.find(70 << 10).unwrap();
        assert_eq!(ix.node(got).addr, hole70);
        let got = ix.find(71 << 10).unwrap();
        assert_eq!(ix.node(got).size, 71 << 10);
    }
}
