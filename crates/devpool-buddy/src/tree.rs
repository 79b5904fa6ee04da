//! The buddy tree, all on the host: a node for every block (split, free or live), a
//! free list per order, and a short list per order of freed blocks kept unmerged.
//!
//! Nodes are made in pairs, so a node's buddy is the other node of its pair (index
//! `i ^ 1`) and its parent is one link away: finding and merging a buddy is O(1) per
//! order, and an operation is O(orders). Free lists are doubly linked through the
//! nodes, so a buddy leaves its list in O(1).

use crate::rounding::Rounding;

/// No node.
pub(crate) const NIL: u32 = u32::MAX;
/// Orders are below this.
pub(crate) const ORDERS: usize = 64;
/// Generations wrap within the bits a handle has for them.
pub(crate) const GEN_MASK: u32 = (1 << 30) - 1;

/// What a node is now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// Not a block (a spare node, or the unused half of a root's pair).
    Vacant,
    /// A free block in its order's free list.
    Free,
    /// A freed block kept unmerged in its order's quick list.
    Quick,
    /// A block handed out whole.
    Live,
    /// A block handed out trimmed: its first bytes are live, split below it into
    /// [`Piece`](State::Piece)s, and the power-of-two tail went back to the free lists.
    Head,
    /// A live piece of a trimmed block (freed with its head).
    Piece,
    /// A block split into the two children at `child` and `child + 1`.
    Split,
    /// A free block taken out of every list, about to be split or handed out.
    Taken,
}

/// One block.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Node {
    /// Device address of the first byte.
    pub addr: u64,
    /// Bytes the caller asked for (live blocks).
    pub requested: u64,
    /// The parent, or [`NIL`] for an span's root.
    pub parent: u32,
    /// The left child of a split block.
    pub child: u32,
    prev: u32,
    next: u32,
    /// Bumped each time the block is handed out and each time the node is recycled,
    /// so a stale handle does not match.
    pub gen: u32,
    /// Index of the span the block lies in.
    pub span: u32,
    /// Log2 of the block's size.
    pub order: u8,
    /// What the node is now.
    pub state: State,
    /// The largest free block at or below this node (0: none), when the tree tracks
    /// it.
    pub max_free: u8,
}

impl Node {
    const VACANT: Node = Node {
        addr: 0,
        requested: 0,
        parent: NIL,
        child: NIL,
        prev: NIL,
        next: NIL,
        gen: 0,
        span: 0,
        order: 0,
        state: State::Vacant,
        max_free: 0,
    };
}

#[derive(Clone, Copy)]
struct List {
    head: u32,
    tail: u32,
    len: u32,
}

const EMPTY: List = List {
    head: NIL,
    tail: NIL,
    len: 0,
};

/// The buddy tree of every span of one pool.
pub(crate) struct Tree {
    nodes: Vec<Node>,
    spare: Vec<u32>,
    free: [List; ORDERS],
    quick: [List; ORDERS],
    free_mask: u64,
    quick_mask: u64,
    live: [u64; ORDERS],
    quick_depth: u32,
    track: bool,
    /// Bytes blocks grant.
    rounding: Rounding,
    /// The largest free block of each span, by span index (tracking trees).
    span_fit: Vec<u8>,
}

impl Tree {
    /// An empty tree that keeps up to `quick_depth` freed blocks per order unmerged,
    /// and tracks the largest free block below each node when `track` is set (for
    /// [`lowest_fit`](Tree::lowest_fit)).
    pub fn new(quick_depth: u32, track: bool, rounding: Rounding) -> Self {
        Tree {
            nodes: Vec::new(),
            spare: Vec::new(),
            free: [EMPTY; ORDERS],
            quick: [EMPTY; ORDERS],
            free_mask: 0,
            quick_mask: 0,
            live: [0; ORDERS],
            quick_depth,
            track,
            rounding,
            span_fit: Vec::new(),
        }
    }

    /// The bytes a trimmed block of `order` keeps for `size` bytes.
    #[inline]
    pub fn trimmed_len(&self, order: u32, size: u64) -> u64 {
        self.rounding.granted(order, size)
    }

    /// The largest free block in span `span` (tracking trees; 0: none).
    #[inline]
    pub fn span_fit(&self, span: u32) -> u32 {
        self.span_fit
            .get(span as usize)
            .copied()
            .unwrap_or(0)
            .into()
    }

    /// What `max_free` of node `n` should be: its own order when free, the larger
    /// of its children's when split, else zero.
    fn max_free_of(&self, n: &Node) -> u8 {
        match n.state {
            State::Free => n.order,
            State::Split | State::Head => self
                .node(n.child)
                .max_free
                .max(self.node(n.child + 1).max_free),
            _ => 0,
        }
    }

    /// Bring `max_free` up to date from node `i` to the root: every node up to order
    /// `force` is recomputed, and above it the walk stops where nothing changes.
    /// Operations that change many nodes along one path (a split down, a trim) call
    /// it once at the end, from the deepest node they touched.
    pub fn settle(&mut self, mut i: u32, force: u32) {
        if !self.track {
            return;
        }
        loop {
            let n = self.node(i);
            let v = self.max_free_of(n);
            if n.max_free == v && u32::from(n.order) > force {
                return;
            }
            let (parent, span) = (n.parent, n.span as usize);
            self.node_mut(i).max_free = v;
            if parent == NIL {
                if self.span_fit.len() <= span {
                    self.span_fit.resize(span + 1, 0);
                }
                self.span_fit[span] = v;
                return;
            }
            i = parent;
        }
    }

    /// The lowest-addressed free block of at least `order` below `root`, if any (the
    /// tree must track free blocks).
    pub fn lowest_fit(&self, root: u32, order: u32) -> Option<u32> {
        debug_assert!(self.track);
        let mut i = root;
        if u32::from(self.node(i).max_free) < order {
            return None;
        }
        loop {
            let n = self.node(i);
            match n.state {
                State::Free => return Some(i),
                State::Split | State::Head => {
                    i = if u32::from(self.node(n.child).max_free) >= order {
                        n.child
                    } else {
                        n.child + 1
                    };
                }
                _ => return None,
            }
        }
    }

    /// Every block handed out (whole or trimmed), with its node.
    pub fn live_nodes(&self) -> impl Iterator<Item = (u32, &Node)> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| matches!(n.state, State::Live | State::Head))
            .map(|(i, n)| (i as u32, n))
    }

    /// The node at `i`, if there is one.
    #[inline]
    pub fn get(&self, i: u32) -> Option<&Node> {
        self.nodes.get(i as usize)
    }

    #[inline]
    pub fn node(&self, i: u32) -> &Node {
        &self.nodes[i as usize]
    }

    #[inline]
    fn node_mut(&mut self, i: u32) -> &mut Node {
        &mut self.nodes[i as usize]
    }

    /// Orders at or above `order` whose free list is not empty, as a bit mask.
    #[inline]
    pub fn free_orders_from(&self, order: u32) -> u64 {
        self.free_mask & (u64::MAX << order)
    }

    /// Whether any block waits in a quick list.
    #[inline]
    pub fn has_quick(&self) -> bool {
        self.quick_mask != 0
    }

    /// The first block of `order`'s free list, or [`NIL`].
    #[inline]
    pub fn free_head(&self, order: u32) -> u32 {
        self.free[order as usize].head
    }

    /// The block after `i` in its list, or [`NIL`].
    #[inline]
    pub fn next_in_list(&self, i: u32) -> u32 {
        self.node(i).next
    }

    /// The first block of `order`'s quick list, or [`NIL`].
    #[inline]
    pub fn quick_head(&self, order: u32) -> u32 {
        self.quick[order as usize].head
    }

    /// Free and quick blocks of `order`.
    pub fn list_lens(&self, order: u32) -> (u64, u64) {
        (
            self.free[order as usize].len as u64,
            self.quick[order as usize].len as u64,
        )
    }

    /// Live blocks of `order`.
    pub fn live_count(&self, order: u32) -> u64 {
        self.live[order as usize]
    }

    /// A fresh pair of vacant nodes; returns the first.
    fn new_pair(&mut self) -> u32 {
        if let Some(p) = self.spare.pop() {
            return p;
        }
        let i = self.nodes.len() as u32;
        self.nodes.push(Node::VACANT);
        self.nodes.push(Node::VACANT);
        i
    }

    /// Give a pair back; its generations move on so stale handles do not match.
    fn drop_pair(&mut self, first: u32) {
        for i in [first, first + 1] {
            let n = self.node_mut(i);
            let gen = (n.gen + 1) & GEN_MASK;
            *n = Node {
                gen,
                ..Node::VACANT
            };
        }
        self.spare.push(first);
    }

    fn link(&mut self, i: u32, quick: bool) {
        self.link_at(i, quick, false);
    }

    /// Put `i` in its free or quick list, at the front or at the back.
    fn link_at(&mut self, i: u32, quick: bool, back: bool) {
        let order = self.node(i).order as usize;
        let list = if quick {
            &mut self.quick[order]
        } else {
            &mut self.free[order]
        };
        let (prev, next) = if back {
            (list.tail, NIL)
        } else {
            (NIL, list.head)
        };
        if prev == NIL {
            list.head = i;
        }
        if next == NIL {
            list.tail = i;
        }
        list.len += 1;
        if quick {
            self.quick_mask |= 1 << order;
        } else {
            self.free_mask |= 1 << order;
        }
        let n = self.node_mut(i);
        n.prev = prev;
        n.next = next;
        n.state = if quick { State::Quick } else { State::Free };
        if !quick {
            // A free leaf's own value; its ancestors are settled by the operation.
            n.max_free = n.order;
        }
        if prev != NIL {
            self.node_mut(prev).next = i;
        }
        if next != NIL {
            self.node_mut(next).prev = i;
        }
    }

    /// Take `i` out of its free or quick list; it becomes [`State::Taken`].
    pub fn unlink(&mut self, i: u32) {
        let n = *self.node(i);
        debug_assert!(matches!(n.state, State::Free | State::Quick));
        let quick = n.state != State::Free;
        let order = n.order as usize;
        if n.prev != NIL {
            self.node_mut(n.prev).next = n.next;
        }
        if n.next != NIL {
            self.node_mut(n.next).prev = n.prev;
        }
        let (list, mask) = if quick {
            (&mut self.quick[order], &mut self.quick_mask)
        } else {
            (&mut self.free[order], &mut self.free_mask)
        };
        if list.head == i {
            list.head = n.next;
        }
        if list.tail == i {
            list.tail = n.prev;
        }
        list.len -= 1;
        if list.len == 0 {
            *mask &= !(1 << order);
        }
        let m = self.node_mut(i);
        m.prev = NIL;
        m.next = NIL;
        m.state = State::Taken;
        m.max_free = 0;
    }

    /// Add an span's root block: `2^order` bytes at `addr`, free. Returns its node.
    pub fn add_root(&mut self, addr: u64, order: u32, span: u32) -> u32 {
        let i = self.new_pair();
        let n = self.node_mut(i);
        n.addr = addr;
        n.order = order as u8;
        n.span = span;
        n.parent = NIL;
        self.link(i, false);
        self.settle(i, order);
        i
    }

    /// Remove a free root (its span goes back to the backend).
    pub fn remove_root(&mut self, i: u32) {
        debug_assert_eq!(self.node(i).parent, NIL);
        let span = self.node(i).span as usize;
        if let Some(f) = self.span_fit.get_mut(span) {
            *f = 0;
        }
        self.unlink(i);
        self.drop_pair(i);
    }

    /// Split a taken block into two taken halves; returns the left one (the right one
    /// is the next index).
    pub fn split(&mut self, i: u32) -> u32 {
        let n = *self.node(i);
        debug_assert_eq!(n.state, State::Taken);
        debug_assert!(n.order > 0);
        let l = self.new_pair();
        let half = 1u64 << (n.order - 1);
        for (c, addr) in [(l, n.addr), (l + 1, n.addr + half)] {
            let m = self.node_mut(c);
            m.addr = addr;
            m.order = n.order - 1;
            m.span = n.span;
            m.parent = i;
            m.state = State::Taken;
        }
        let p = self.node_mut(i);
        p.state = State::Split;
        p.child = l;
        l
    }

    /// Split taken block `i` and put one half in its free list (the back of it when
    /// `back`): returns the other half, taken. `i`'s largest free block is then that
    /// free half (the taken one holds none yet), so it is set here; the caller
    /// settles the path above once it is done.
    pub fn split_off(&mut self, i: u32, keep_right: bool, back: bool) -> u32 {
        let l = self.split(i);
        let (keep, other) = if keep_right { (l + 1, l) } else { (l, l + 1) };
        self.link_at(other, false, back);
        if self.track {
            let order = self.node(other).order;
            self.node_mut(i).max_free = order;
        }
        keep
    }

    /// Put a taken block into its free list without merging (the other half of a
    /// split, whose buddy is taken).
    #[inline]
    pub fn put_free(&mut self, i: u32) {
        self.link(i, false);
    }

    /// The same, at the back of the list: the last to be looked at.
    #[inline]
    pub fn put_free_back(&mut self, i: u32) {
        self.link_at(i, false, true);
    }

    /// Hand out a taken block: it becomes live. Returns its new generation.
    #[inline]
    pub fn make_live(&mut self, i: u32, requested: u64) -> u32 {
        let n = self.node_mut(i);
        debug_assert_eq!(n.state, State::Taken);
        n.state = State::Live;
        n.requested = requested;
        n.gen = (n.gen + 1) & GEN_MASK;
        let (order, gen) = (n.order as usize, n.gen);
        self.live[order] += 1;
        gen
    }

    /// Take a block out of `order`'s quick list.
    #[inline]
    pub fn pop_quick(&mut self, order: u32) -> Option<u32> {
        let i = self.quick[order as usize].head;
        if i == NIL {
            return None;
        }
        self.unlink(i);
        Some(i)
    }

    /// Free a live block: a whole block into its quick list while there is room,
    /// anything else merged with its buddies. (Trimmed blocks are not kept: held
    /// unmerged with their pieces, they keep others from merging, which on the bundled
    /// traces costs far more memory than the splits they save.)
    pub fn free_live(&mut self, i: u32) {
        let n = *self.node(i);
        let order = n.order as usize;
        self.live[order] -= 1;
        if n.state == State::Head {
            let len = self.trimmed_len(order as u32, n.requested);
            self.free_trimmed(i, len);
            return;
        }
        debug_assert_eq!(n.state, State::Live);
        self.node_mut(i).state = State::Taken;
        if self.quick[order].len < self.quick_depth {
            self.link(i, true);
        } else {
            self.merge(i);
        }
    }

    /// Hand out only the first `len` bytes of live block `top` (a multiple of the
    /// smallest block, less than its size): split it so that those bytes are covered
    /// by pieces and put the rest in the free lists, as blocks of their own.
    pub fn trim(&mut self, top: u32, len: u64) {
        debug_assert_eq!(self.node(top).state, State::Live);
        let mut i = top;
        let mut rest = len;
        loop {
            let order = self.node(i).order;
            if rest == 1 << order {
                self.node_mut(i).state = State::Piece;
                break;
            }
            self.node_mut(i).state = State::Taken;
            let l = self.split(i);
            if i == top {
                self.node_mut(i).state = State::Head;
            }
            let half = 1u64 << (order - 1);
            if rest <= half {
                self.put_free(l + 1);
                i = l;
            } else {
                self.node_mut(l).state = State::Piece;
                rest -= half;
                i = l + 1;
            }
        }
        let top_order = self.node(top).order;
        self.settle(i, top_order.into());
    }

    /// Free trimmed block `top`, whose first `len` bytes were live: free its pieces,
    /// deepest first, each merged with free buddies upward.
    fn free_trimmed(&mut self, top: u32, len: u64) {
        let mut pieces = [NIL; ORDERS];
        let mut count = 0;
        let (mut i, mut rest) = (top, len);
        loop {
            let n = self.node(i);
            if rest == 1 << n.order || n.state == State::Piece {
                pieces[count] = i;
                count += 1;
                break;
            }
            let half = 1u64 << (n.order - 1);
            let l = n.child;
            if rest <= half {
                i = l;
            } else {
                pieces[count] = l;
                count += 1;
                rest -= half;
                i = l + 1;
            }
        }
        self.node_mut(top).state = State::Split;
        for &p in pieces[..count].iter().rev() {
            self.node_mut(p).state = State::Taken;
            self.merge(p);
        }
    }

    /// Give a taken block back: merge it with free buddies upward and put the result
    /// in its free list.
    pub fn merge(&mut self, mut i: u32) {
        loop {
            let n = *self.node(i);
            if n.parent == NIL {
                break;
            }
            let buddy = i ^ 1;
            if self.node(buddy).state != State::Free {
                break;
            }
            self.unlink(buddy);
            self.drop_pair(i & !1);
            i = n.parent;
            self.node_mut(i).state = State::Taken;
        }
        self.link(i, false);
        let order = self.node(i).order;
        self.settle(i, order.into());
    }

    /// Merge every block of the quick lists with its buddies.
    pub fn flush_quick(&mut self) {
        while self.quick_mask != 0 {
            let order = self.quick_mask.trailing_zeros();
            while let Some(i) = self.pop_quick(order) {
                self.merge(i);
            }
        }
    }

    /// Check the tree's structure below `roots`: children match their parents, no
    /// two free buddies are left unmerged, and every list holds what it should.
    pub fn verify(&self, roots: &[u32]) -> Result<(), String> {
        let mut seen_free = [0u32; ORDERS];
        let mut seen_quick = [0u32; ORDERS];
        let mut seen_live = [0u64; ORDERS];
        let mut stack: Vec<u32> = roots.to_vec();
        for &r in roots {
            let n = self.node(r);
            if n.parent != NIL {
                return Err(format!("root {r} has a parent"));
            }
            if self.track && self.span_fit(n.span) != u32::from(n.max_free) {
                return Err(format!("span {} has a stale largest free block", n.span));
            }
        }
        while let Some(i) = stack.pop() {
            let n = self.node(i);
            let o = n.order as usize;
            if self.track {
                let want = self.max_free_of(n);
                if n.max_free != want {
                    return Err(format!("node {i}: largest free {} not {want}", n.max_free));
                }
            }
            match n.state {
                State::Free => seen_free[o] += 1,
                State::Quick => seen_quick[o] += 1,
                State::Live => seen_live[o] += 1,
                State::Piece => {
                    let mut up = n.parent;
                    while up != NIL && self.node(up).state != State::Head {
                        up = self.node(up).parent;
                    }
                    if up == NIL {
                        return Err(format!("piece {i} lies under no trimmed block"));
                    }
                }
                State::Split | State::Head => {
                    if n.state == State::Head {
                        seen_live[o] += 1;
                    }
                    let (l, r) = (self.node(n.child), self.node(n.child + 1));
                    let half = 1u64 << (n.order - 1);
                    for (c, want) in [(l, n.addr), (r, n.addr + half)] {
                        if c.parent != i || c.addr != want || c.order + 1 != n.order {
                            return Err(format!("node {i}: child {c:?} does not match"));
                        }
                    }
                    if l.state == State::Free && r.state == State::Free {
                        return Err(format!("node {i}: both halves free but not merged"));
                    }
                    stack.extend([n.child, n.child + 1]);
                }
                State::Vacant | State::Taken => {
                    return Err(format!("node {i} in the tree is {:?}", n.state))
                }
            }
        }
        for o in 0..ORDERS {
            let (f, q) = (self.free[o], self.quick[o]);
            if f.len != seen_free[o] || q.len != seen_quick[o] || self.live[o] != seen_live[o] {
                return Err(format!(
                    "order {o}: lists say {} free, {} quick, {} live; the tree has {}, {}, {}",
                    f.len, q.len, self.live[o], seen_free[o], seen_quick[o], seen_live[o]
                ));
            }
            for (list, state, mask) in [
                (f, State::Free, self.free_mask),
                (q, State::Quick, self.quick_mask),
            ] {
                if (list.len > 0) != (mask >> o & 1 == 1) {
                    return Err(format!("order {o}: {state:?} mask is wrong"));
                }
                let (mut at, mut count, mut prev) = (list.head, 0, NIL);
                while at != NIL {
                    let n = self.node(at);
                    let same = n.state == state;
                    if !same || n.order as usize != o || n.prev != prev {
                        return Err(format!("order {o}: {state:?} list holds {n:?}"));
                    }
                    count += 1;
                    prev = at;
                    at = n.next;
                }
                if count != list.len || prev != list.tail {
                    return Err(format!("order {o}: {state:?} list length or tail is wrong"));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIXTEENTH: Rounding = Rounding::Sixteenth { min_order: 8 };

    fn take_leaf(t: &mut Tree, order: u32) -> Option<u32> {
        let mask = t.free_orders_from(order);
        if mask == 0 {
            return None;
        }
        let top = mask.trailing_zeros();
        let mut i = t.free_head(top);
        t.unlink(i);
        while u32::from(t.node(i).order) > order {
            let l = t.split(i);
            t.put_free(l + 1);
            i = l;
        }
        t.settle(i, top);
        Some(i)
    }

    #[test]
    fn split_and_merge_back_to_one_block() {
        let mut t = Tree::new(0, true, SIXTEENTH);
        let root = t.add_root(1 << 20, 20, 0);
        let a = take_leaf(&mut t, 8).unwrap();
        t.make_live(a, 100);
        let b = take_leaf(&mut t, 8).unwrap();
        t.make_live(b, 100);
        assert_eq!(t.node(a).addr, 1 << 20);
        assert_eq!(t.node(b).addr, (1 << 20) + 256, "the buddy is used next");
        t.verify(&[root]).unwrap();
        assert_eq!(t.list_lens(8), (0, 0));
        assert_eq!(t.list_lens(19), (1, 0));
        t.free_live(a);
        t.free_live(b);
        t.verify(&[root]).unwrap();
        assert_eq!(
            t.free_orders_from(0),
            1 << 20,
            "one free block of the top order"
        );
        t.remove_root(root);
        assert_eq!(t.free_orders_from(0), 0);
    }

    #[test]
    fn quick_lists_hold_blocks_until_flushed() {
        let mut t = Tree::new(2, true, SIXTEENTH);
        let root = t.add_root(0, 12, 0);
        let blocks: Vec<u32> = (0..4).map(|_| take_leaf(&mut t, 10).unwrap()).collect();
        for &b in &blocks {
            t.make_live(b, 1);
        }
        for &b in &blocks {
            t.free_live(b);
        }
        assert_eq!(t.list_lens(10).1, 2, "two kept unmerged, the rest merged");
        t.verify(&[root]).unwrap();
        let q = t.pop_quick(10).unwrap();
        assert_eq!(q, blocks[1], "the last one kept comes back first");
        t.merge(q);
        t.flush_quick();
        t.verify(&[root]).unwrap();
        assert_eq!(t.free_orders_from(0), 1 << 12);
    }

    #[test]
    fn trimmed_tails_serve_others_and_merge_back() {
        let mut t = Tree::new(0, true, SIXTEENTH);
        let root = t.add_root(0, 20, 0);
        let a = take_leaf(&mut t, 20).unwrap();
        let len = (1 << 19) + (1 << 17) + (1 << 16);
        assert_eq!(
            t.trimmed_len(20, len - 1000),
            len,
            "a sixteenth of the block"
        );
        t.make_live(a, len);
        t.trim(a, len);
        t.verify(&[root]).unwrap();
        // The tail: 2^18 and 2^16 are free; 2^19, 2^17 and 2^16 are live pieces.
        for o in 8..20 {
            let want = u64::from(o == 18 || o == 16);
            assert_eq!(t.list_lens(o), (want, 0), "order {o}");
        }
        let b = take_leaf(&mut t, 18).unwrap();
        assert_eq!(t.node(b).addr, 3 << 18, "the tail serves another block");
        t.make_live(b, 1 << 18);
        t.free_live(a);
        t.verify(&[root]).unwrap();
        assert_eq!(t.list_lens(18), (1, 0), "a's half merged back");
        t.free_live(b);
        t.verify(&[root]).unwrap();
        assert_eq!(t.free_orders_from(0), 1 << 20, "one free block again");
    }

    #[test]
    fn generations_change_on_reuse() {
        let mut t = Tree::new(0, true, SIXTEENTH);
        t.add_root(0, 10, 0);
        let a = take_leaf(&mut t, 9).unwrap();
        let g1 = t.make_live(a, 1);
        t.free_live(a);
        let b = take_leaf(&mut t, 9).unwrap();
        let g2 = t.make_live(b, 1);
        assert_eq!(t.node(a).addr, t.node(b).addr);
        assert!(a != b || g1 != g2, "a reused node has a new generation");
    }
}
