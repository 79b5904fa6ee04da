//! [`TlsfConfig`]: granule, backing mode, range and chunk sizes, and the knobs of the
//! page cache.

/// Where a [`TlsfPool`](crate::TlsfPool) gets its memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// One large reserved virtual range (more when it is exhausted), blocks packed
    /// contiguously, physical pages mapped on demand.
    Virtual,
    /// Contiguous regions taken from the backend in chunks.
    Region,
    /// [`Virtual`](Mode::Virtual) where the backend supports it, else
    /// [`Region`](Mode::Region).
    Auto,
}

/// Settings of a [`TlsfPool`](crate::TlsfPool).
///
/// Out-of-range values are brought into range when the pool is made, never refused:
/// the granule is raised to a power of two in `256..=page size`, the batch and
/// window to at least 1, the fraction to `0.0..=1.0`.
///
/// ```
/// use devpool_tlsf::{Mode, TlsfConfig};
/// let cfg = TlsfConfig::default().mode(Mode::Region).region_chunk(128 << 20);
/// assert_eq!(cfg.granule, 512);
/// assert_eq!(cfg.region_chunk, 128 << 20);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct TlsfConfig {
    /// Block sizes are multiples of this many bytes (default 512).
    pub granule: usize,
    /// Virtual ranges or regions (default [`Mode::Auto`]).
    pub mode: Mode,
    /// Bytes of address space reserved per range in virtual mode (`None`, the
    /// default: the device's total memory rounded up to the page size). A request
    /// larger than the free room gets a range of its own size.
    pub range_size: Option<usize>,
    /// Smallest region taken from the backend in region mode (default 64 MiB); a
    /// larger request gets a region of its own size, rounded up to the page size.
    pub region_chunk: usize,
    /// When a block lands on unmapped pages, the run of missing pages is mapped
    /// rounded up to this many pages where the free room allows (default 8).
    pub map_batch_pages: usize,
    /// Unused mapped bytes always allowed (default 32 MiB).
    pub cache_floor: usize,
    /// Unused mapped bytes allowed on top of the floor, as a fraction of the recent
    /// peak of allocated bytes (default 0.002).
    pub cache_fraction: f64,
    /// Length, in allocations and frees, of the window over which the recent peak of
    /// allocated bytes is taken (default 16384). Memory freed since the peak stays
    /// mapped for reuse until two windows have passed without reaching it again.
    pub window_ops: u64,
}

impl Default for TlsfConfig {
    fn default() -> Self {
        TlsfConfig {
            granule: 512,
            mode: Mode::Auto,
            range_size: None,
            region_chunk: 64 << 20,
            map_batch_pages: 8,
            cache_floor: 32 << 20,
            cache_fraction: 0.002,
            window_ops: 16384,
        }
    }
}

impl TlsfConfig {
    /// Another granule.
    pub fn granule(mut self, bytes: usize) -> Self {
        self.granule = bytes;
        self
    }
    /// Another mode.
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }
    /// Another size of the reserved ranges.
    pub fn range_size(mut self, bytes: usize) -> Self {
        self.range_size = Some(bytes);
        self
    }
    /// Another smallest region size.
    pub fn region_chunk(mut self, bytes: usize) -> Self {
        self.region_chunk = bytes;
        self
    }
    /// Another map batch.
    pub fn map_batch_pages(mut self, pages: usize) -> Self {
        self.map_batch_pages = pages;
        self
    }
    /// Another floor and fraction of the unused mapped bytes kept.
    pub fn cache(mut self, floor: usize, fraction: f64) -> Self {
        self.cache_floor = floor;
        self.cache_fraction = fraction;
        self
    }
    /// Another window length.
    pub fn window_ops(mut self, ops: u64) -> Self {
        self.window_ops = ops;
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
        self.map_batch_pages = self.map_batch_pages.max(1);
        self.window_ops = self.window_ops.max(1);
        if !self.cache_fraction.is_finite() {
            self.cache_fraction = 0.0;
        }
        self.cache_fraction = self.cache_fraction.clamp(0.0, 1.0);
        self
    }
}
