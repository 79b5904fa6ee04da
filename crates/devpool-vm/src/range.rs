//! [`Range`]: one reserved address range and the state of each of its pages.
//!
//! Per page: how many live blocks touch it (blocks are packed, so neighbours share
//! the pages at their ends, and blocks smaller than a page share it with others),
//! whether it is mapped, whether it starts a physical chunk, and whether it is
//! retiring (chosen for unmapping and waiting for the streams that used it).
//!
//! A chunk is one physical allocation: it starts at a page whose `head` bit is set
//! and runs for its length. It is mapped and unmapped only whole: a chunk with no
//! used page is free to go, or to move.

use crate::bits::Bits;
use crate::summed::SummedBits;

/// One reserved range.
#[derive(Debug)]
pub(crate) struct Range {
    /// First address.
    pub base: u64,
    /// Bytes of address space.
    pub size: u64,
    /// Live blocks touching each page in part (a page a block covers whole is used
    /// by it alone, and keeps no count).
    pub uses: Vec<u32>,
    /// Pages mapped (retiring ones included), with a summary of the words that hold
    /// any: the search for mapped pages skips the unmapped stretches of a range.
    pub mapped: SummedBits,
    /// Pages some live block touches.
    pub used: Bits,
    /// First pages of chunks.
    pub head: Bits,
    /// Pages of each chunk, at the chunk's first page.
    pub chunk_len: Vec<u32>,
    /// No chunk is longer than this many pages.
    pub max_chunk: usize,
    /// No page at or above this one is mapped.
    pub top: usize,
    /// Pages waiting to be unmapped.
    pub retiring: Bits,
    /// Retiring pages whose physical memory was moved to another address (it is
    /// mapped there too): they hold no memory of their own.
    pub moved: Bits,
}

impl Range {
    /// A range of `pages` pages at `base`, nothing mapped, chunks of at most
    /// `max_chunk` pages.
    pub fn new(base: u64, size: u64, pages: usize, max_chunk: usize) -> Self {
        Range {
            base,
            size,
            uses: vec![0; pages],
            mapped: SummedBits::new(pages),
            used: Bits::new(pages),
            head: Bits::new(pages),
            chunk_len: vec![0; pages],
            max_chunk: max_chunk.max(1),
            top: 0,
            retiring: Bits::new(pages),
            moved: Bits::new(pages),
        }
    }

    /// Pages in the range.
    pub fn pages(&self) -> usize {
        self.uses.len()
    }

    /// Whether `[lo, hi)` lies in the range.
    #[inline]
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

    /// The chunk `[start, end)` holding mapped page `p` (chunks are at most
    /// `max_chunk` pages long, which bounds the search for its start).
    #[inline]
    pub fn chunk_of(&self, p: usize) -> (usize, usize) {
        let lo = (p + 1).saturating_sub(self.max_chunk);
        let start = self.head.prev(lo, p + 1, true).unwrap_or(p);
        (start, start + self.chunk_len[start] as usize)
    }

    /// A chunk of `len` pages starts at page `p`.
    #[inline]
    pub fn set_chunk(&mut self, p: usize, len: usize) {
        self.head.set(p, p + 1, true);
        self.chunk_len[p] = len as u32;
    }

    /// Whether the chunk `[c, e)` is free: mapped, no page used, not retiring.
    #[inline]
    pub fn chunk_free(&self, c: usize, e: usize) -> bool {
        self.used.count(c, e) == 0 && !self.retiring.get(c)
    }
}
