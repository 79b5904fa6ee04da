//! How many bytes a block of a given order grants for a request, and so whether the
//! rest of its power of two goes back to the free lists (a trimmed tail).

/// A trimmed region block keeps this many leading bits of its size: it is rounded up
/// to a sixteenth of its power of two, so at most 4 pieces stay live and at most 1/16
/// of the block is lost to rounding.
pub(crate) const TRIM_BITS: u32 = 4;

/// The rounding rule of a pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rounding {
    /// A block grants its whole power of two.
    Whole,
    /// A block grants its size rounded up to a sixteenth of its power of two (at least
    /// the smallest block); the tail goes back to the free lists. Region mode.
    Sixteenth {
        /// Log2 of the smallest block.
        min_order: u32,
    },
    /// A block of a page or more grants its size rounded up to a page, and the tail
    /// goes back to the free lists; smaller blocks grant their power of two. Virtual
    /// mode.
    Page {
        /// Log2 of the page size.
        page_order: u32,
    },
    /// As `Page` for the bytes granted, but the tail stays with the block (address
    /// space only). Virtual mode without trimming.
    PageWhole {
        /// Log2 of the page size.
        page_order: u32,
    },
}

impl Rounding {
    /// Bytes a block of `order` grants for a request of `size` bytes (at least 1).
    #[inline]
    pub fn granted(self, order: u32, size: u64) -> u64 {
        let unit_order = match self {
            Rounding::Whole => return 1 << order,
            Rounding::Sixteenth { min_order } => min_order.max(order.saturating_sub(TRIM_BITS)),
            Rounding::Page { page_order } | Rounding::PageWhole { page_order } => {
                if order < page_order {
                    return 1 << order;
                }
                page_order
            }
        };
        let unit = (1u64 << unit_order) - 1;
        (size.max(1) + unit) & !unit
    }

    /// Whether a block granting fewer bytes than its power of two gives its tail back.
    #[inline]
    pub fn trims(self) -> bool {
        matches!(self, Rounding::Sixteenth { .. } | Rounding::Page { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn granted_bytes_by_rule() {
        let s = Rounding::Sixteenth { min_order: 8 };
        assert_eq!(s.granted(12, 3000), 3072);
        assert_eq!(
            s.granted(13, 5000),
            5120,
            "512-byte units in an 8 KiB block"
        );
        assert_eq!(s.granted(8, 0), 256);
        let p = Rounding::Page { page_order: 21 };
        assert_eq!(p.granted(27, 100 << 20), 100 << 20);
        assert_eq!(p.granted(27, (100 << 20) + 1), 102 << 20);
        assert_eq!(
            p.granted(20, 600 << 10),
            1 << 20,
            "below a page: the whole block"
        );
        assert_eq!(Rounding::Whole.granted(20, 1), 1 << 20);
        assert!(p.trims() && s.trims());
        assert!(!Rounding::Whole.trims() && !Rounding::PageWhole { page_order: 21 }.trims());
    }
}
