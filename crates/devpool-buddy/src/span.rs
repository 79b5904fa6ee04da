//! Spans: the spans a pool runs the buddy algorithm over, and the pool's state behind
//! its lock.

use crate::rounding::Rounding;
use crate::tree::Tree;
use devpool_core::{Gauge, Stats};
use devpool_vm::{PageLayer, RangeId};

/// One span: a backend region, or a reserved range of the page layer.
pub(crate) struct Span {
    /// First address.
    pub base: u64,
    /// Log2 of its size: its root block's order.
    pub order: u32,
    /// The root block's node.
    pub root: u32,
    /// The page layer's range (virtual mode only).
    pub range: Option<RangeId>,
}

impl Span {
    /// Bytes spanned.
    pub fn size(&self) -> u64 {
        1 << self.order
    }
}

/// Counts of live blocks and bytes, kept under the pool's lock (plain adds: cheaper
/// than atomics, and the lock is held anyway).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Tally {
    /// Requested bytes of live blocks.
    pub live: Gauge,
    /// Granted bytes of live blocks.
    pub granted: Gauge,
    /// Live blocks.
    pub blocks: Gauge,
    /// Successful allocations.
    pub allocations: u64,
    /// Successful frees.
    pub frees: u64,
}

#[inline]
fn raise(g: &mut Gauge, v: u64) {
    g.current += v;
    g.peak = g.peak.max(g.current);
}

impl Tally {
    /// A block of `requested` bytes was handed out with `granted` bytes.
    #[inline]
    pub fn on_alloc(&mut self, requested: u64, granted: u64) {
        raise(&mut self.live, requested);
        raise(&mut self.granted, granted);
        raise(&mut self.blocks, 1);
        self.allocations += 1;
    }

    /// A block came back.
    #[inline]
    pub fn on_free(&mut self, requested: u64, granted: u64) {
        self.live.current -= requested;
        self.granted.current -= granted;
        self.blocks.current -= 1;
        self.frees += 1;
    }

    /// Put these counts into `s`.
    pub fn fill(&self, s: &mut Stats) {
        s.live_bytes = self.live;
        s.allocated_bytes = self.granted;
        s.live_blocks = self.blocks;
        s.allocations = self.allocations;
        s.frees = self.frees;
    }
}

/// Everything a pool changes under its lock.
pub(crate) struct Inner {
    pub tree: Tree,
    /// Spans by index; `None` for slots given back.
    pub spans: Vec<Option<Span>>,
    /// Indices of the spans, by base address.
    pub by_base: Vec<u32>,
    /// Ranges, pages and the unmapping policy (virtual mode).
    pub vm: PageLayer,
    /// Live blocks and bytes, counted under the lock.
    pub tally: Tally,
    /// Bytes of the buddy blocks under live blocks (powers of two).
    pub block_bytes: u64,
}

impl Inner {
    pub fn new(quick_depth: u32, track: bool, rounding: Rounding, vm: PageLayer) -> Self {
        Inner {
            tree: Tree::new(quick_depth, track, rounding),
            spans: Vec::new(),
            by_base: Vec::new(),
            vm,
            tally: Tally::default(),
            block_bytes: 0,
        }
    }

    /// The span at `i`. Every node names a live span, so this holds for any node's.
    #[inline]
    pub fn span(&self, i: u32) -> &Span {
        self.spans[i as usize]
            .as_ref()
            .expect("nodes only name spans that exist")
    }

    /// The span at `i`, to change.
    #[inline]
    pub fn span_mut(&mut self, i: u32) -> &mut Span {
        self.spans[i as usize]
            .as_mut()
            .expect("nodes only name spans that exist")
    }

    /// Put `span` in a free slot; returns its index.
    pub fn add_span(&mut self, span: Span) -> u32 {
        let base = span.base;
        let i = match self.spans.iter().position(Option::is_none) {
            Some(i) => {
                self.spans[i] = Some(span);
                i
            }
            None => {
                self.spans.push(Some(span));
                self.spans.len() - 1
            }
        };
        let at = self.by_base.partition_point(|&j| self.span(j).base < base);
        self.by_base.insert(at, i as u32);
        i as u32
    }

    /// Forget span `i` (its memory went back to the backend).
    pub fn remove_span(&mut self, i: u32) {
        self.spans[i as usize] = None;
        self.by_base.retain(|&j| j != i);
        while matches!(self.spans.last(), Some(None)) {
            self.spans.pop();
        }
    }

    /// Index of the span holding `addr`, if any.
    pub fn span_of(&self, addr: u64) -> Option<u32> {
        self.spans.iter().enumerate().find_map(|(i, a)| {
            a.as_ref()
                .filter(|a| addr >= a.base && addr - a.base < a.size())
                .map(|_| i as u32)
        })
    }
}
