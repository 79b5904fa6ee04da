//! [`VmConfig`]: how far ahead pages are mapped, how large a physical chunk may be,
//! and the bounds of the cache of mapped pages that no live block touches.

/// Settings of a [`PageLayer`](crate::PageLayer).
///
/// Out-of-range values are brought into range when the layer is made, never
/// refused: the batch, chunk and window are raised to at least 1, the fractions are
/// brought into `0.0..=1.0`.
///
/// ```
/// use devpool_vm::VmConfig;
/// let cfg = VmConfig::default().cache(0, 0.0).chunk_pages(1);
/// assert_eq!((cfg.cache_floor, cfg.chunk_pages), (0, 1));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct VmConfig {
    /// When a block lands on unmapped pages, the last run of missing pages is mapped
    /// rounded up to this many pages where the free room around the block allows
    /// (default 8): the next blocks placed above it find their pages mapped.
    pub map_batch_pages: usize,
    /// The most pages one physical allocation (one chunk) may hold (default 1).
    /// Larger chunks mean fewer and cheaper driver calls (creating one 16 MiB
    /// allocation costs little more than one of 2 MiB); smaller ones let memory go
    /// back in finer pieces, since a chunk is given back only whole. Chunks never
    /// cross a multiple of this many pages from the start of their range.
    pub chunk_pages: usize,
    /// Unused mapped bytes always allowed (default 32 MiB).
    pub cache_floor: usize,
    /// Unused mapped bytes allowed on top of the floor, as a fraction of the recent
    /// peak of allocated bytes (default 0.002).
    pub cache_fraction: f64,
    /// Length, in allocations and frees, of the window over which the recent peak of
    /// allocated bytes is taken (default 16384). Memory freed since the peak stays
    /// mapped for reuse until two windows have passed without reaching it again.
    pub window_ops: u64,
    /// The most the bound widens when unmapped pages keep coming back, as a fraction
    /// of the recent peak (default 0.25).
    pub slack_max: f64,
}

impl Default for VmConfig {
    fn default() -> Self {
        VmConfig {
            map_batch_pages: 8,
            chunk_pages: 1,
            cache_floor: 32 << 20,
            cache_fraction: 0.002,
            window_ops: 16384,
            slack_max: 0.25,
        }
    }
}

impl VmConfig {
    /// Another map batch.
    pub fn map_batch_pages(mut self, pages: usize) -> Self {
        self.map_batch_pages = pages;
        self
    }
    /// Another largest chunk.
    pub fn chunk_pages(mut self, pages: usize) -> Self {
        self.chunk_pages = pages;
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
    /// Another largest widening of the bound.
    pub fn slack_max(mut self, fraction: f64) -> Self {
        self.slack_max = fraction;
        self
    }

    /// The same settings brought into range.
    pub fn normalized(mut self) -> Self {
        self.map_batch_pages = self.map_batch_pages.max(1);
        self.chunk_pages = self.chunk_pages.max(1);
        self.window_ops = self.window_ops.max(1);
        if !self.cache_fraction.is_finite() {
            self.cache_fraction = 0.0;
        }
        self.cache_fraction = self.cache_fraction.clamp(0.0, 1.0);
        if !self.slack_max.is_finite() {
            self.slack_max = 0.0;
        }
        self.slack_max = self.slack_max.clamp(0.0, 1.0);
        self
    }
}
