//! [`Range`]: one reserved address range and the state of each of its pages.
//!
//! Per page: whether a live block touches it (blocks are packed, so neighbours
//! share the pages at their ends, and blocks smaller than a page share it with
//! others; those shared pages count their blocks), whether it is mapped, whether it starts a physical chunk, and whether it is
//! retiring (chosen for unmapping and waiting for the streams that used it).
//!
//! A chunk is one physical allocation: it starts at a page whose `head` bit is set
//! and runs up to the next head or the first unmapped page. It is mapped and
//! unmapped only whole: a chunk with no used page is free to go.

use crate::bits::Bits;

/// One reserved range.
#[derive(Debug)]
pub(crate) struct Range {
    /// First address.
    pub base: u64,
    /// Bytes of address space.
    pub size: u64,
    /// Live blocks touching each page without covering it whole (a page a block
    /// covers whole is used by that block alone and counts nothing here).
    pub uses: Vec<u32>,
    /// Pages mapped (retiring ones included).
    pub mapped: Bits,
    /// Pages some live block touches.
    pub used: Bits,
    /// First pages of chunks.
    pub head: Bits,
    /// Chunks never cross a multiple of this many pages.
    pub grid: usize,
    /// No page at or above this one is mapped.
    pub top: usize,
    /// Pages waiting to be unmapped.
    pub retiring: Bits,
}

impl Range {
    /// A range of `pages` pages at `base`, nothing mapped, chunks cut at multiples
    /// of `grid` pages.
    pub fn new(base: u64, size: u64, pages: usize, grid: usize) -> Self {
        Range {
            base,
            size,
            uses: vec![0; pages],
            mapped: Bits::new(pages),
            used: Bits::new(pages),
            head: Bits::new(pages),
            grid: grid.max(1),
            top: 0,
            retiring: Bits::new(pages),
        }
    }

    /// Pages in the range.
    pub fn pages(&self) -> usize {
        self.uses.len()
    }

    /// Whether `[lo, hi)` lies in the range.
    pub fn holds(&self, lo: u64, hi: u64) -> bool {
        lo >= self.base && hi >= lo && hi <= self.base + self.size
    }

    /// Pages `[first, end)` that bytes `[lo, hi)` touch (`shift`: log2 of the page).
    #[inline]
    pub fn touched(&self, shift: u32, lo: u64, hi: u64) -> (usize, usize) {
        let page = 1u64 << shift;
        let a = ((lo - self.base) >> shift) as usize;
        let b = ((hi - self.base + page - 1) >> shift) as usize;
        (a, b.max(a))
    }

    /// Pages `[first, end)` wholly inside bytes `[lo, hi)`.
    #[inline]
    pub fn inside(&self, shift: u32, lo: u64, hi: u64) -> (usize, usize) {
        let page = 1u64 << shift;
        let a = ((lo - self.base + page - 1) >> shift) as usize;
        let b = ((hi - self.base) >> shift) as usize;
        (a, b.max(a))
    }

    /// The chunk `[start, end)` holding mapped page `p`: it lies in `p`'s cell of the
    /// grid.
    #[inline]
    pub fn chunk_of(&self, p: usize) -> (usize, usize) {
        if self.grid == 1 {
            // Chunks of one page each.
            return (p, p + 1);
        }
        let cell = p - p % self.grid;
        let cell_end = (cell + self.grid).min(self.pages());
        let start = self.head.prev(cell, p + 1, true).unwrap_or(p);
        let end = self
            .head
            .next(start + 1, cell_end, true)
            .min(self.mapped.next(start + 1, cell_end, false));
        (start, end)
    }
}
