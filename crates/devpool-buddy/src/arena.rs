//! Arenas: the spans a pool runs the buddy algorithm over, and the pool's state behind
//! its lock.

use crate::pages::Pages;
use crate::tree::Tree;

/// One arena: a backend region, or a reserved virtual range with its page state.
pub(crate) struct Arena {
    /// First address.
    pub base: u64,
    /// Log2 of its size: its root block's order.
    pub order: u32,
    /// The root block's node.
    pub root: u32,
    /// Page state (virtual ranges only).
    pub pages: Option<Pages>,
}

impl Arena {
    /// Bytes spanned.
    pub fn size(&self) -> u64 {
        1 << self.order
    }
}

/// Page counts of a virtual pool, kept in step with the arenas' bitmaps.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PageCounts {
    /// Pages mapped.
    pub mapped: usize,
    /// Pages in use (touched by a live block).
    pub used: usize,
    /// Pages mapped and not in use.
    pub unused: usize,
    /// The most pages in use at once since the last trim.
    pub high_water: usize,
}

/// Everything a pool changes under its lock.
pub(crate) struct Inner {
    pub tree: Tree,
    /// Arenas by index; `None` for slots given back.
    pub arenas: Vec<Option<Arena>>,
    pub pages: PageCounts,
    /// Requested bytes of live blocks.
    pub live_bytes: u64,
    /// Granted bytes of live blocks.
    pub granted_bytes: u64,
    /// Bytes of the buddy blocks under live blocks (powers of two).
    pub block_bytes: u64,
}

impl Inner {
    pub fn new(quick_depth: u32, track: bool) -> Self {
        Inner {
            tree: Tree::new(quick_depth, track),
            arenas: Vec::new(),
            pages: PageCounts::default(),
            live_bytes: 0,
            granted_bytes: 0,
            block_bytes: 0,
        }
    }

    /// The arena at `i`. Every node names a live arena, so this holds for any node's.
    #[inline]
    pub fn arena(&self, i: u32) -> &Arena {
        self.arenas[i as usize]
            .as_ref()
            .expect("nodes only name arenas that exist")
    }

    /// The arena at `i`, to change.
    #[inline]
    pub fn arena_mut(&mut self, i: u32) -> &mut Arena {
        self.arenas[i as usize]
            .as_mut()
            .expect("nodes only name arenas that exist")
    }

    /// Put `arena` in a free slot; returns its index.
    pub fn add_arena(&mut self, arena: Arena) -> u32 {
        match self.arenas.iter().position(Option::is_none) {
            Some(i) => {
                self.arenas[i] = Some(arena);
                i as u32
            }
            None => {
                self.arenas.push(Some(arena));
                (self.arenas.len() - 1) as u32
            }
        }
    }

    /// Index of the arena holding `addr`, if any.
    pub fn arena_of(&self, addr: u64) -> Option<u32> {
        self.arenas.iter().enumerate().find_map(|(i, a)| {
            a.as_ref()
                .filter(|a| addr >= a.base && addr - a.base < a.size())
                .map(|_| i as u32)
        })
    }

    /// The arena, page index and page count of `node`'s first `n` pages.
    #[inline]
    pub fn page_of(&self, node: u32, page_order: u32) -> (u32, usize) {
        let n = self.tree.node(node);
        let a = self.arena(n.arena);
        (n.arena, ((n.addr - a.base) >> page_order) as usize)
    }
}
