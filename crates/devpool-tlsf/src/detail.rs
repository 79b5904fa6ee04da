//! [`TlsfDetail`]: what a pool holds, block by block and page by page.

use crate::config::Mode;
use crate::pool::TlsfPool;
use devpool_core::human_bytes;
use std::fmt;

/// A snapshot of a pool's blocks, pages and backend calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TlsfDetail {
    /// [`Mode::Virtual`] or [`Mode::Region`].
    pub mode: Mode,
    /// Reserved ranges (virtual mode) or regions (region mode) held.
    pub spans: usize,
    /// Bytes of those spans (address space in virtual mode).
    pub span_bytes: u64,
    /// Live blocks.
    pub live_blocks: usize,
    /// Free blocks (mapped or not).
    pub free_blocks: usize,
    /// Bytes of the free blocks.
    pub free_bytes: u64,
    /// Size of the largest free block.
    pub largest_free_block: u64,
    /// Page size of the mappings.
    pub page_size: u64,
    /// Pages mapped.
    pub mapped_pages: u64,
    /// Mapped pages that no live block touches (the page cache).
    pub unused_mapped_pages: u64,
    /// Calls to the backend's `map`.
    pub map_calls: u64,
    /// Calls to the backend's `unmap`.
    pub unmap_calls: u64,
    /// Host bytes of the pool's own bookkeeping (nodes, class table, page bitmaps).
    pub metadata_bytes: usize,
}

impl fmt::Display for TlsfDetail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.mode {
            Mode::Region => write!(
                f,
                "{} free in {} blocks (largest {}) over {} regions of {} in all",
                human_bytes(self.free_bytes),
                self.free_blocks,
                human_bytes(self.largest_free_block),
                self.spans,
                human_bytes(self.span_bytes)
            ),
            _ => write!(
                f,
                "{} mapped unused in {} pages of {}; {} mapped in all; largest free block {}; {} map and {} unmap calls",
                human_bytes(self.unused_mapped_pages * self.page_size),
                self.unused_mapped_pages,
                human_bytes(self.page_size),
                human_bytes(self.mapped_pages * self.page_size),
                human_bytes(self.largest_free_block),
                self.map_calls,
                self.unmap_calls
            ),
        }
    }
}

impl TlsfPool {
    /// A snapshot of the pool's blocks, pages and backend calls.
    ///
    /// ```
    /// use devpool_core::{MockBackend, Pool, Request};
    /// use devpool_tlsf::{TlsfConfig, TlsfPool};
    /// let pool = TlsfPool::new(MockBackend::shared(), TlsfConfig::default().map_batch_pages(1));
    /// let b = pool.allocate(&Request::new(5 << 20)).unwrap();
    /// pool.deallocate(&b).unwrap();
    /// let d = pool.detail();
    /// assert_eq!((d.mapped_pages, d.unused_mapped_pages, d.map_calls), (3, 3, 1));
    /// assert_eq!(d.free_blocks, 1);
    /// ```
    pub fn detail(&self) -> TlsfDetail {
        let g = self.inner.lock();
        let (free_blocks, free_bytes, live_blocks) = g.index.counts();
        let spans = g.spans.iter().flatten();
        let bitmap_bytes: usize = spans
            .clone()
            .filter_map(|s| s.pages.as_ref())
            .map(|p| p.len().div_ceil(64) * 8)
            .sum();
        TlsfDetail {
            mode: self.mode(),
            spans: spans.clone().count(),
            span_bytes: spans.map(|s| s.size).sum(),
            live_blocks,
            free_blocks,
            free_bytes,
            largest_free_block: g.index.largest_free(),
            page_size: self.page,
            mapped_pages: g.mapped_pages,
            unused_mapped_pages: g.unused_pages,
            map_calls: g.map_calls,
            unmap_calls: g.unmap_calls,
            metadata_bytes: g.index.metadata_bytes() + bitmap_bytes,
        }
    }
}
