//! Bit layouts of the atomic words and of the block handle.
//!
//! - The cursor: `[epoch: 20 | slot: 8 | offset in 256-byte granules: 36]`. One
//!   compare-and-swap bumps it; a value of another epoch or chunk never matches.
//! - The ledger: `[epoch: 20 | handed out: 22 | freed: 22]`. "Handed out" is also the
//!   index of the next block record, and handed out minus freed the live blocks, so
//!   one compare-and-swap both counts a block and gives it its record, and a new epoch
//!   can begin only from a ledger with nothing live in it.
//! - The handle of a block: `[epoch: 20 | generation: 20 | record index: 22]`, 62
//!   bits. The generation tells apart two blocks that used the same record in one
//!   epoch (a record is reused when the last block is freed in stack order).
//!
//! Epochs are counted in full (`u64`) under the pool's lock and in one atomic word
//! that an allocation reads before and after it counts itself, so a word's few epoch
//! bits are never trusted alone.

use devpool_core::MIN_ALIGN;

const GRANULE_SHIFT: u32 = MIN_ALIGN.trailing_zeros();
const OFF_BITS: u32 = 36;
const SLOT_BITS: u32 = 8;
/// Bits of the epoch kept in the cursor and the ledger.
pub const EPOCH_BITS: u32 = 20;
const EPOCH_MASK: u64 = (1 << EPOCH_BITS) - 1;
const LEDGER_COUNT_BITS: u32 = 22;
const LEDGER_EPOCH_MASK: u64 = EPOCH_MASK;
const HANDLE_INDEX_BITS: u32 = LEDGER_COUNT_BITS;
const HANDLE_GEN_BITS: u32 = 20;
const HANDLE_EPOCH_BITS: u32 = 20;
// A handle fills the pool's bits of the core contract and leaves the router's clear.
const _: () = assert!(
    HANDLE_EPOCH_BITS + HANDLE_GEN_BITS + HANDLE_INDEX_BITS == devpool_core::POOL_HANDLE_BITS
);

/// The slot value of a cursor that points at no chunk.
pub const NO_SLOT: usize = (1 << SLOT_BITS) - 1;
/// The most chunks one pool can hold.
pub const MAX_SLOTS: usize = NO_SLOT;
/// The largest chunk (and so the largest block) a cursor can address: 16 TiB.
pub const MAX_CHUNK_BYTES: u64 = 1 << (OFF_BITS + GRANULE_SHIFT);
/// The most blocks one epoch hands out (4 Mi), and the largest record index.
pub const MAX_HANDED: u64 = (1 << LEDGER_COUNT_BITS) - 1;
/// Generations of one record in one epoch, before they repeat.
pub const GEN_MASK: u64 = (1 << HANDLE_GEN_BITS) - 1;

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

/// A ledger word.
#[inline]
pub fn ledger(epoch: u64, handed: u64, freed: u64) -> u64 {
    debug_assert!(handed <= MAX_HANDED && freed <= handed);
    ((epoch & LEDGER_EPOCH_MASK) << (2 * LEDGER_COUNT_BITS)) | (handed << LEDGER_COUNT_BITS) | freed
}

/// The parts of a ledger word: (epoch bits, handed out, freed).
#[inline]
pub fn split_ledger(w: u64) -> (u64, u64, u64) {
    (
        w >> (2 * LEDGER_COUNT_BITS),
        (w >> LEDGER_COUNT_BITS) & MAX_HANDED,
        w & MAX_HANDED,
    )
}

/// Whether the ledger word `w` belongs to the full epoch `epoch`.
#[inline]
pub fn ledger_in(w: u64, epoch: u64) -> bool {
    w >> (2 * LEDGER_COUNT_BITS) == epoch & LEDGER_EPOCH_MASK
}

/// Live blocks of a ledger word.
#[inline]
pub fn live(w: u64) -> u64 {
    let (_, handed, freed) = split_ledger(w);
    handed - freed
}

/// The handle of record `index`, generation `gen`, in `epoch`.
#[inline]
pub fn handle(epoch: u64, gen: u64, index: u64) -> u64 {
    debug_assert!(index <= MAX_HANDED && gen <= GEN_MASK);
    ((epoch & ((1 << HANDLE_EPOCH_BITS) - 1)) << (HANDLE_GEN_BITS + HANDLE_INDEX_BITS))
        | (gen << HANDLE_INDEX_BITS)
        | index
}

/// The parts of a handle: (epoch bits, generation, record index), or `None` when it
/// uses the top two bits, which no handle of this crate does.
#[inline]
pub fn split_handle(h: u64) -> Option<(u64, u64, u64)> {
    const BITS: u32 = HANDLE_EPOCH_BITS + HANDLE_GEN_BITS + HANDLE_INDEX_BITS;
    (h >> BITS == 0).then_some((
        h >> (HANDLE_GEN_BITS + HANDLE_INDEX_BITS),
        (h >> HANDLE_INDEX_BITS) & GEN_MASK,
        h & MAX_HANDED,
    ))
}

/// Whether the epoch bits of a handle are those of the full epoch `epoch`.
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
    fn ledger_words_keep_their_parts() {
        let w = ledger(0x1ABCDE, 41, 40);
        assert_eq!(split_ledger(w), (0xABCDE, 41, 40));
        assert!(ledger_in(w, 0x1ABCDE) && ledger_in(w, 0xABCDE) && !ledger_in(w, 0xABCDF));
        assert_eq!(live(w), 1);
        let full = ledger(u64::MAX, MAX_HANDED, MAX_HANDED);
        assert_eq!(split_ledger(full), (EPOCH_MASK, MAX_HANDED, MAX_HANDED));
        assert_eq!(live(full), 0);
    }

    #[test]
    fn handles_fit_62_bits_and_round_trip() {
        let h = handle(u64::MAX, GEN_MASK, MAX_HANDED);
        assert_eq!(h >> 62, 0);
        assert!(split_handle(h).is_some());
        let (e, g, i) = split_handle(handle(0x12_3456, 7, 99)).unwrap();
        assert!(handle_epoch_matches(e, 0x12_3456));
        assert!(!handle_epoch_matches(e, 0x12_3457));
        assert_eq!((g, i), (7, 99));
        assert!(split_handle(1 << 62).is_none());
    }
}
