//! Bit layouts of the atomic words and of the block handle.
//!
//! - The cursor: `[epoch: 20 | slot: 8 | offset in 256-byte granules: 36]`. One
//!   compare-and-swap bumps it; a stale value (older epoch, other chunk) never matches.
//! - Counted words (the live-block ledger, the next record index):
//!   `[epoch: 20 | count: 44]`, so a count taken in one epoch cannot be mistaken for
//!   one of the next.
//! - The handle of a block: `[epoch: 22 | record index: 40]`, 62 bits.
//!
//! Epochs are counted in full (`u64`) under the pool's lock; the words carry only their
//! low bits, and [`full_epoch`] recovers a full epoch from its low bits.

use devpool_core::MIN_ALIGN;

const GRANULE_SHIFT: u32 = MIN_ALIGN.trailing_zeros();
const OFF_BITS: u32 = 36;
const SLOT_BITS: u32 = 8;
/// Bits of the epoch kept in the cursor and the counted words.
pub const EPOCH_BITS: u32 = 20;
const EPOCH_MASK: u64 = (1 << EPOCH_BITS) - 1;
const COUNT_BITS: u32 = 64 - EPOCH_BITS;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
const HANDLE_INDEX_BITS: u32 = 40;
const HANDLE_EPOCH_BITS: u32 = 22;

/// The slot value of a cursor that points at no chunk.
pub const NO_SLOT: usize = (1 << SLOT_BITS) - 1;
/// The most chunks one pool can hold.
pub const MAX_SLOTS: usize = NO_SLOT;
/// The largest chunk (and so the largest block) a cursor can address: 16 TiB.
pub const MAX_CHUNK_BYTES: u64 = 1 << (OFF_BITS + GRANULE_SHIFT);
/// The most records (blocks) one epoch can index through a handle.
pub const MAX_INDEX: u64 = (1 << HANDLE_INDEX_BITS) - 1;

/// The low epoch bits kept in the words.
#[inline]
pub fn short(epoch: u64) -> u64 {
    epoch & EPOCH_MASK
}

/// A cursor word: `offset` bytes (a multiple of 256) into the chunk in `slot`.
#[inline]
pub fn cursor(epoch: u64, slot: usize, offset: u64) -> u64 {
    debug_assert!(slot <= NO_SLOT && offset <= MAX_CHUNK_BYTES);
    debug_assert!(offset.is_multiple_of(MIN_ALIGN as u64));
    (short(epoch) << (SLOT_BITS + OFF_BITS))
        | ((slot as u64) << OFF_BITS)
        | (offset >> GRANULE_SHIFT)
}

/// The parts of a cursor word: (short epoch, slot, offset in bytes).
#[inline]
pub fn split_cursor(w: u64) -> (u64, usize, u64) {
    (
        w >> (SLOT_BITS + OFF_BITS),
        ((w >> OFF_BITS) & ((1 << SLOT_BITS) - 1)) as usize,
        (w & ((1 << OFF_BITS) - 1)) << GRANULE_SHIFT,
    )
}

/// A counted word.
#[inline]
pub fn counted(epoch: u64, count: u64) -> u64 {
    (short(epoch) << COUNT_BITS) | (count & COUNT_MASK)
}

/// The short epoch of a counted word.
#[inline]
pub fn count_epoch(w: u64) -> u64 {
    w >> COUNT_BITS
}

/// The count of a counted word.
#[inline]
pub fn count(w: u64) -> u64 {
    w & COUNT_MASK
}

/// The full epoch whose low bits are `short`, at most `now` (the current full epoch).
#[inline]
pub fn full_epoch(now: u64, short: u64) -> u64 {
    now.wrapping_sub(now.wrapping_sub(short) & EPOCH_MASK)
}

/// The handle of record `index` in `epoch`.
#[inline]
pub fn handle(epoch: u64, index: u64) -> u64 {
    debug_assert!(index <= MAX_INDEX);
    ((epoch & ((1 << HANDLE_EPOCH_BITS) - 1)) << HANDLE_INDEX_BITS) | index
}

/// The parts of a handle: (epoch bits, record index), or `None` when it uses the top
/// two bits, which no handle of this crate does.
#[inline]
pub fn split_handle(h: u64) -> Option<(u64, u64)> {
    (h >> (HANDLE_EPOCH_BITS + HANDLE_INDEX_BITS) == 0)
        .then_some((h >> HANDLE_INDEX_BITS, h & MAX_INDEX))
}

/// Whether `h` was made in the full epoch `epoch`.
#[inline]
pub fn handle_epoch_matches(h_epoch: u64, epoch: u64) -> bool {
    h_epoch == epoch & ((1 << HANDLE_EPOCH_BITS) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_round_trips() {
        for (e, slot, off) in [
            (0u64, 0usize, 0u64),
            (1, 3, 256),
            (EPOCH_MASK + 7, NO_SLOT, MAX_CHUNK_BYTES - 256),
            (u64::MAX, 17, 1 << 30),
        ] {
            let (se, ss, so) = split_cursor(cursor(e, slot, off));
            assert_eq!((se, ss, so), (short(e), slot, off));
        }
    }

    #[test]
    fn counted_words_keep_epoch_and_count() {
        let w = counted(0xABCDE, 41);
        assert_eq!((count_epoch(w), count(w)), (0xABCDE, 41));
        let w = counted(EPOCH_MASK + 2, COUNT_MASK);
        assert_eq!((count_epoch(w), count(w)), (1, COUNT_MASK));
    }

    #[test]
    fn full_epoch_recovers_recent_epochs() {
        for now in [5u64, EPOCH_MASK, EPOCH_MASK + 3, 1 << 40] {
            for back in [0u64, 1, 4, EPOCH_MASK] {
                if let Some(e) = now.checked_sub(back) {
                    assert_eq!(full_epoch(now, short(e)), e, "now {now} back {back}");
                }
            }
        }
    }

    #[test]
    fn handles_fit_62_bits_and_round_trip() {
        let h = handle(u64::MAX, MAX_INDEX);
        assert_eq!(h >> 62, 0);
        let (e, i) = split_handle(handle(0x12_3456, 99)).unwrap();
        assert!(handle_epoch_matches(e, 0x12_3456));
        assert!(!handle_epoch_matches(e, 0x12_3457));
        assert_eq!(i, 99);
        assert!(split_handle(1 << 62).is_none());
    }
}
