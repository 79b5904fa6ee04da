//! [`BuddyConfig`]: block sizes, span sizes, the mode, and the page layer's settings.

use crate::rounding::Rounding;
use devpool_vm::VmConfig;

/// Where a buddy pool's spans come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BuddyMode {
    /// Each span is a contiguous backend region (`alloc_region`). Rounding a request
    /// up to a power of two costs real device memory.
    Region,
    /// Each span is a reserved virtual range; only the bytes blocks need are backed
    /// by mapped pages. Rounding costs address space, not memory.
    Virtual,
    /// [`Virtual`](BuddyMode::Virtual) where the backend supports virtual ranges,
    /// [`Region`](BuddyMode::Region) otherwise.
    Auto,
}

/// Settings of a buddy pool.
///
/// Out-of-range values are brought into range rather than refused: sizes are rounded
/// up to powers of two and orders clamped (see each field).
///
/// ```
/// use devpool_buddy::{BuddyConfig, BuddyMode};
/// let cfg = BuddyConfig::default().mode(BuddyMode::Region).span_size(1 << 30);
/// assert_eq!(cfg.min_block, 256);
/// assert_eq!(cfg.span_size, Some(1 << 30));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct BuddyConfig {
    /// The smallest block, a power of two of at least 256 bytes (default 256: the
    /// alignment every allocator guarantees, so no request is rounded for nothing).
    pub min_block: usize,
    /// Log2 of the largest block; larger requests get [`TooLarge`](devpool_core::Error::TooLarge)
    /// (default 40: 1 TiB; at most 62).
    pub max_order: u32,
    /// Bytes of a new span, a power of two; a request larger than this gets an span
    /// of its own size rounded up to a power of two. `None` (the default) picks 512
    /// MiB for regions and 128 GiB of address space for virtual ranges.
    pub span_size: Option<usize>,
    /// Regions, virtual ranges, or whichever the backend offers (default `Auto`).
    pub mode: BuddyMode,
    /// Whole blocks (not trimmed) kept per order after their free without merging
    /// them with their buddies, so that a size freed and asked for again costs no split
    /// and no merge (default 8). They are merged before an span is added, by `trim`,
    /// and in virtual mode when no fully mapped block is found.
    pub quick_depth: usize,
    /// Give the unused tail of a block's power of two back to the free lists, as
    /// smaller blocks of their own (default true):
    /// - in region mode a block then grants its size rounded up to a sixteenth of its
    ///   power of two (at least the smallest block), so rounding costs at most 1/16 of
    ///   the block instead of up to half, for a few more splits and merges;
    /// - in virtual mode a block of a page or more grants its size rounded up to a
    ///   page either way (only those pages are mapped); trimming gives the address
    ///   space past them to other blocks, which keeps mapped pages closer together
    ///   and on the bundled traces maps less.
    ///
    /// When false, a block keeps its whole power of two.
    pub trim_tail: bool,
    /// The page layer's settings in virtual mode: physical chunk size and the bound
    /// of the cache of unused mapped pages, the same policy as TLSF's (a block maps
    /// only its own pages, so the map batch does not apply), but with chunks of at
    /// most 8 pages: buddy's power-of-two positions reuse parts of large freed
    /// blocks more than TLSF does, and larger chunks held more (gpt2_train_varlen,
    /// mock: 1.085 of the live peak with 128-page chunks against 1.039 with 8).
    pub pages: VmConfig,
}

impl Default for BuddyConfig {
    fn default() -> Self {
        BuddyConfig {
            min_block: devpool_core::MIN_ALIGN,
            max_order: 40,
            span_size: None,
            mode: BuddyMode::Auto,
            quick_depth: 8,
            trim_tail: true,
            pages: VmConfig::default().chunk_pages(8),
        }
    }
}

impl BuddyConfig {
    /// Default settings in region mode.
    pub fn region() -> Self {
        Self::default().mode(BuddyMode::Region)
    }

    /// Default settings in virtual mode.
    pub fn virtual_ranges() -> Self {
        Self::default().mode(BuddyMode::Virtual)
    }

    devpool_core::setters! {
        /// Another mode.
        mode: BuddyMode,
        /// Another smallest block.
        min_block: usize,
        /// Another largest order.
        max_order: u32,
        /// Another number of freed blocks kept unmerged per order (0: merge at once).
        quick_depth: usize,
        /// Trim blocks' power-of-two tails (or not).
        trim_tail: bool,
        /// Other page-layer settings.
        pages: VmConfig,
    }

    /// Another span size.
    pub fn span_size(mut self, bytes: usize) -> Self {
        self.span_size = Some(bytes);
        self
    }
}

/// Log2 of `x` rounded up (`x >= 1`).
#[inline]
pub(crate) fn ceil_log2(x: usize) -> u32 {
    usize::BITS - (x.max(1) - 1).leading_zeros()
}

/// The settings after bringing every value into range, for one backend.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Resolved {
    pub virt: bool,
    pub min_order: u32,
    pub max_order: u32,
    pub span_order: u32,
    pub page_order: u32,
    pub quick_depth: u32,
    pub rounding: Rounding,
}

impl Resolved {
    pub fn new(cfg: &BuddyConfig, supports_virtual: bool, granularity: usize) -> Self {
        let virt = match cfg.mode {
            BuddyMode::Region => false,
            BuddyMode::Virtual => true,
            BuddyMode::Auto => supports_virtual,
        };
        let page_order = ceil_log2(granularity.max(devpool_core::MIN_ALIGN));
        let min_order = ceil_log2(cfg.min_block.max(devpool_core::MIN_ALIGN)).min(page_order);
        let max_order = cfg.max_order.min(62).max(min_order.max(page_order));
        let default_span = if virt { 1usize << 37 } else { 512 << 20 };
        let span_order = ceil_log2(cfg.span_size.unwrap_or(default_span).min(1 << 62))
            .min(max_order)
            .max(page_order);
        Resolved {
            virt,
            min_order,
            max_order,
            span_order,
            page_order,
            quick_depth: cfg.quick_depth.min(u32::MAX as usize) as u32,
            rounding: match (virt, cfg.trim_tail) {
                (false, true) => Rounding::Sixteenth { min_order },
                (false, false) => Rounding::Whole,
                (true, true) => Rounding::Page { page_order },
                (true, false) => Rounding::PageWhole { page_order },
            },
        }
    }

    /// The mode after resolving `Auto`.
    pub fn mode(&self) -> BuddyMode {
        if self.virt {
            BuddyMode::Virtual
        } else {
            BuddyMode::Region
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_range_values_are_brought_into_range() {
        let cfg = BuddyConfig::region()
            .min_block(100)
            .max_order(99)
            .span_size(3 << 20);
        let r = Resolved::new(&cfg, true, 2 << 20);
        assert!(!r.virt);
        assert_eq!(r.min_order, 8);
        assert_eq!(r.max_order, 62);
        assert_eq!(r.span_order, 22, "3 MiB rounds up to 4 MiB");
        let r = Resolved::new(&BuddyConfig::default().min_block(1 << 30), true, 2 << 20);
        assert!(r.virt, "auto picks virtual when offered");
        assert_eq!(r.min_order, r.page_order, "min block at most a page");
        let r = Resolved::new(&BuddyConfig::default(), false, 2 << 20);
        assert!(!r.virt, "auto picks regions when virtual is not offered");
    }

    #[test]
    fn ceil_log2_rounds_up() {
        assert_eq!(ceil_log2(1), 0);
        assert_eq!(ceil_log2(2), 1);
        assert_eq!(ceil_log2(3), 2);
        assert_eq!(ceil_log2(1 << 20), 20);
        assert_eq!(ceil_log2((1 << 20) + 1), 21);
    }
}
