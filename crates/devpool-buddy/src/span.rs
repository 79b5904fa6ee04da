//! Spans: the spans a pool runs the buddy algorithm over, and the pool's state behind
//! its lock.

use crate::rounding::Rounding;
use crate::tree::Tree;
use devpool_core::Tally;
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
