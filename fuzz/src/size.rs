//! [`Size`]: request sizes drawn from fuzz input, weighted towards the sizes where
//! allocators change behaviour (zero, powers of two and their neighbours, huge).

use arbitrary::Arbitrary;

/// A request size decoded from fuzz input.
///
/// ```
/// use devpool_fuzz::size::Size;
/// assert_eq!(Size::Pow { shift: 20, delta: -1 }.bytes(), (1 << 20) - 1);
/// assert_eq!(Size::Tiny(0).bytes(), 0);
/// ```
#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    /// 0 to 255 bytes.
    Tiny(u8),
    /// Up to 64 KiB.
    Small(u16),
    /// A power of two (the shift taken modulo 64) plus or minus a little, wrapping.
    Pow {
        /// The power.
        shift: u8,
        /// Added to it.
        delta: i16,
    },
    /// Any size at all.
    Raw(u64),
}

impl Size {
    /// The size in bytes.
    pub fn bytes(self) -> usize {
        match self {
            Size::Tiny(b) => b as usize,
            Size::Small(b) => b as usize,
            Size::Pow { shift, delta } => {
                (1usize << (shift % usize::BITS as u8)).wrapping_add_signed(delta as isize)
            }
            Size::Raw(b) => b as usize,
        }
    }
}
