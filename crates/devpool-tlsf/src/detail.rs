//! [`TlsfDetail`]: what a pool holds, block by block and page by page.

use crate::config::TlsfMode;
use crate::pool::TlsfPool;
use devpool_core::human_bytes;
use devpool_vm::VmDetail;
use std::fmt;

/// A snapshot of a pool's blocks, and of its page layer in virtual mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TlsfDetail {
    /// [`TlsfMode::Virtual`] or [`TlsfMode::Region`].
    pub mode: TlsfMode,
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
    /// The page layer: pages mapped, used, cached and retiring, chunks, backend
    /// calls (all zero in region mode).
    pub pages: VmDetail,
    /// Host bytes of the pool's own bookkeeping (nodes, class table, page layer).
    pub metadata_bytes: usize,
}

impl fmt::Display for TlsfDetail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.mode {
            TlsfMode::Region => write!(
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
                "{}; largest free block {}",
                self.pages,
                human_bytes(self.largest_free_block)
            ),
        }
    }
}

impl TlsfPool {
    /// A snapshot of the pool's blocks, pages and backend calls.
    ///
    /// ```
    /// use devpool_core::{Pool, Request};
    /// use devpool_testing::MockBackend;
    /// use devpool_tlsf::{TlsfConfig, TlsfPool};
    /// let pool = TlsfPool::new(MockBackend::shared(), TlsfConfig::default().map_batch_pages(1));
    /// let b = pool.allocate(&Request::new(5 << 20)).unwrap();
    /// pool.deallocate(&b).unwrap();
    /// let d = pool.detail();
    /// assert_eq!((d.pages.mapped_pages, d.pages.unused_pages, d.pages.map_calls), (3, 3, 1));
    /// assert_eq!(d.free_blocks, 1);
    /// ```
    pub fn detail(&self) -> TlsfDetail {
        let mut g = self.inner.lock();
        Self::settle(&mut g);
        g.vm.finish_deferred();
        let (free_blocks, free_bytes, live_blocks) = g.index.counts();
        let spans = g.spans.iter().flatten();
        let pages = g.vm.detail();
        TlsfDetail {
            mode: self.mode(),
            spans: spans.clone().count(),
            span_bytes: spans.map(|s| s.size).sum(),
            live_blocks,
            free_blocks,
            free_bytes,
            largest_free_block: g.index.largest_free(),
            pages,
            metadata_bytes: g.index.metadata_bytes()
                + g.memo.metadata_bytes()
                + pages.metadata_bytes,
        }
    }
}
