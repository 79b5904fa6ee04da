//! [`TlsfConfig`]: granule, backing mode, range and region sizes, and the page
//! layer's settings.

use devpool_vm::VmConfig;

/// Where a [`TlsfPool`](crate::TlsfPool) gets its memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsfMode {
    /// One large reserved virtual range (more when it is exhausted), blocks packed
    /// contiguously, physical pages mapped on demand.
    Virtual,
    /// Contiguous regions taken from the backend in chunks.
    Region,
    /// [`Virtual`](TlsfMode::Virtual) where the backend supports it, else
    /// [`Region`](TlsfMode::Region).
    Auto,
}

/// Settings of a [`TlsfPool`](crate::TlsfPool).
///
/// Out-of-range values are brought into range when the pool is made, never refused:
/// the granule is raised to a power of two in `256..=page size`, and the page
/// layer's settings as [`VmConfig`] says.
///
/// ```
/// use devpool_tlsf::{TlsfMode, TlsfConfig};
/// let cfg = TlsfConfig::default().mode(TlsfMode::Region).region_chunk(128 << 20);
/// assert_eq!(cfg.granule, 512);
/// assert_eq!(cfg.region_chunk, 128 << 20);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct TlsfConfig {
    /// Block sizes are multiples of this many bytes (default 512).
    pub granule: usize,
    /// Virtual ranges or regions (default [`TlsfMode::Auto`]).
    pub mode: TlsfMode,
    /// Bytes of address space reserved per range in virtual mode (`None`, the
    /// default: the device's total memory rounded up to the page size). A request
    /// larger than the free room gets a range of its own size.
    pub range_size: Option<usize>,
    /// Smallest region taken from the backend in region mode (default 64 MiB); a
    /// larger request gets a region of its own size, rounded up to the page size.
    pub region_chunk: usize,
    /// The page layer's settings in virtual mode: map batch, physical chunk size
    /// and the cache bound. In region mode the same cache bound applies to wholly
    /// free regions.
    pub pages: VmConfig,
}

impl Default for TlsfConfig {
    fn default() -> Self {
        TlsfConfig {
            granule: 512,
            mode: TlsfMode::Auto,
            range_size: None,
            region_chunk: 64 << 20,
            pages: VmConfig::default(),
        }
    }
}

impl TlsfConfig {
    devpool_core::setters! {
        /// Another granule.
        granule: usize,
        /// Another mode.
        mode: TlsfMode,
        /// Another smallest region size.
        region_chunk: usize,
        /// Other page-layer settings.
        pages: VmConfig,
    }
    /// Another size of the reserved ranges.
    pub fn range_size(mut self, bytes: usize) -> Self {
        self.range_size = Some(bytes);
        self
    }
    /// Another map batch.
    pub fn map_batch_pages(mut self, pages: usize) -> Self {
        self.pages.map_batch_pages = pages;
        self
    }
    /// Another largest physical chunk, in pages.
    pub fn chunk_pages(mut self, pages: usize) -> Self {
        self.pages.chunk_pages = pages;
        self
    }
    /// Another floor and fraction of the unused mapped bytes kept.
    pub fn cache(mut self, floor: usize, fraction: f64) -> Self {
        self.pages.cache_floor = floor;
        self.pages.cache_fraction = fraction;
        self
    }
    /// Another window length.
    pub fn window_ops(mut self, ops: u64) -> Self {
        self.pages.window_ops = ops;
        self
    }

    /// The same settings brought into range for pages of `page` bytes.
    pub(crate) fn normalized(mut self, page: usize) -> Self {
        let page = page.max(devpool_core::MIN_ALIGN);
        self.granule = self
            .granule
            .max(devpool_core::MIN_ALIGN)
            .checked_next_power_of_two()
            .unwrap_or(page)
            .min(page);
        self.pages = self.pages.normalized();
        self
    }
}
