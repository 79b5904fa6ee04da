//! [`BuddyConfig`]: block sizes, arena sizes, the mode, and the unmap policy.

use crate::rounding::Rounding;

/// Where a buddy pool's arenas come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BuddyMode {
    /// Each arena is a contiguous backend region (`alloc_region`). Rounding a request
    /// up to a power of two costs real device memory.
    Region,
    /// Each arena is a reserved virtual range; only the bytes blocks need are backed
    /// by mapped pages. Rounding costs address space, not memory.
    Virtual,
    /// [`Virtual`](BuddyMode::Virtual) where the backend supports virtual ranges,
    /// [`Region`](BuddyMode::Region) otherwise.
    Auto,
}

/// When unused mapped pages are given back in virtual mode.
///
/// A page is *in use* while a live block's bytes touch it, and *unused* while it is
/// mapped but no live block touches it: freed blocks keep their pages mapped, so a
/// later block placed there maps nothing. Unused pages are unmapped:
///
/// - by [`trim`](devpool_core::Pool::trim): every unused page;
/// - under memory pressure: when a `map` fails for lack of memory, every unused page,
///   then the `map` is tried once more;
/// - to keep the mapped total bounded: before mapping new pages and after each free,
///   while the mapped pages would exceed a limit. The limit is a base plus a slack:
///   the base is the high-water mark of pages in use since the last trim (with
///   `keep_high_water`; otherwise the pages in use now), the slack is
///   `slack_fraction` of the base, at least `slack_min` bytes. Unused pages go in
///   batches, the longest contiguous runs first, one `unmap` call per run.
///
/// So the device bytes held never exceed the peak of bytes in use plus the slack,
/// while work that repeats (a training loop) finds its pages still mapped and maps
/// little once warm. Without `keep_high_water`, unused pages never exceed the slack
/// over the pages in use now, at the cost of mapping again whatever use climbs back.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UnmapPolicy {
    /// Keep up to the high-water mark of in-use pages mapped (default true).
    pub keep_high_water: bool,
    /// Slack over the base, as a fraction of it (default 1/32).
    pub slack_fraction: f64,
    /// The least slack, in bytes (default 64 MiB).
    pub slack_min: usize,
}

impl Default for UnmapPolicy {
    fn default() -> Self {
        UnmapPolicy {
            keep_high_water: true,
            slack_fraction: 1.0 / 32.0,
            slack_min: 64 << 20,
        }
    }
}

/// Settings of a buddy pool.
///
/// Out-of-range values are brought into range rather than refused: sizes are rounded
/// up to powers of two and orders clamped (see each field).
///
/// ```
/// use devpool_buddy::{BuddyConfig, BuddyMode};
/// let cfg = BuddyConfig::default().mode(BuddyMode::Region).arena_size(1 << 30);
/// assert_eq!(cfg.min_block, 256);
/// assert_eq!(cfg.arena_size, Some(1 << 30));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BuddyConfig {
    /// The smallest block, a power of two of at least 256 bytes (default 256: the
    /// alignment every allocator guarantees, so no request is rounded for nothing).
    pub min_block: usize,
    /// Log2 of the largest block; larger requests get [`TooLarge`](devpool_core::Error::TooLarge)
    /// (default 40: 1 TiB; at most 62).
    pub max_order: u32,
    /// Bytes of a new arena, a power of two; a request larger than this gets an arena
    /// of its own size rounded up to a power of two. `None` (the default) picks 512
    /// MiB for regions and 128 GiB of address space for virtual ranges.
    pub arena_size: Option<usize>,
    /// Regions, virtual ranges, or whichever the backend offers (default `Auto`).
    pub mode: BuddyMode,
    /// Whole blocks (not trimmed) kept per order after their free without merging
    /// them with their buddies, so that a size freed and asked for again costs no split
    /// and no merge (default 8). They are merged before an arena is added, by `trim`,
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
    /// When unused pages are unmapped in virtual mode.
    pub unmap: UnmapPolicy,
}

impl Default for BuddyConfig {
    fn default() -> Self {
        BuddyConfig {
            min_block: devpool_core::MIN_ALIGN,
            max_order: 40,
            arena_size: None,
            mode: BuddyMode::Auto,
            quick_depth: 8,
            trim_tail: true,
            unmap: UnmapPolicy::default(),
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

    /// Another mode.
    pub fn mode(mut self, mode: BuddyMode) -> Self {
        self.mode = mode;
        self
    }

    /// Another smallest block.
    pub fn min_block(mut self, bytes: usize) -> Self {
        self.min_block = bytes;
        self
    }

    /// Another largest order.
    pub fn max_order(mut self, order: u32) -> Self {
        self.max_order = order;
        self
    }

    /// Another arena size.
    pub fn arena_size(mut self, bytes: usize) -> Self {
        self.arena_size = Some(bytes);
        self
    }

    /// Another number of freed blocks kept unmerged per order (0: merge at once).
    pub fn quick_depth(mut self, blocks: usize) -> Self {
        self.quick_depth = blocks;
        self
    }

    /// Trim blocks' power-of-two tails (or not).
    pub fn trim_tail(mut self, on: bool) -> Self {
        self.trim_tail = on;
        self
    }

    /// Another unmap policy.
    pub fn unmap_policy(mut self, policy: UnmapPolicy) -> Self {
        self.unmap = policy;
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
    pub arena_order: u32,
    pub page_order: u32,
    pub quick_depth: u32,
    pub rounding: Rounding,
    pub keep_high_water: bool,
    /// The slack fraction in 1/65536ths.
    pub slack_per_64k: u64,
    /// The least slack, in pages.
    pub slack_min_pages: usize,
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
        let default_arena = if virt { 1usize << 37 } else { 512 << 20 };
        let arena_order = ceil_log2(cfg.arena_size.unwrap_or(default_arena).min(1 << 62))
            .min(max_order)
            .max(page_order);
        let u = cfg.unmap;
        let fraction = if u.slack_fraction.is_finite() {
            u.slack_fraction.clamp(0.0, 1024.0)
        } else {
            0.0
        };
        Resolved {
            virt,
            min_order,
            max_order,
            arena_order,
            page_order,
            quick_depth: cfg.quick_depth.min(u32::MAX as usize) as u32,
            rounding: match (virt, cfg.trim_tail) {
                (false, true) => Rounding::Sixteenth { min_order },
                (false, false) => Rounding::Whole,
                (true, true) => Rounding::Page { page_order },
                (true, false) => Rounding::PageWhole { page_order },
            },
            keep_high_water: u.keep_high_water,
            slack_per_64k: (fraction * 65536.0).round() as u64,
            slack_min_pages: u.slack_min >> page_order,
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
            .arena_size(3 << 20);
        let r = Resolved::new(&cfg, true, 2 << 20);
        assert!(!r.virt);
        assert_eq!(r.min_order, 8);
        assert_eq!(r.max_order, 62);
        assert_eq!(r.arena_order, 22, "3 MiB rounds up to 4 MiB");
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
