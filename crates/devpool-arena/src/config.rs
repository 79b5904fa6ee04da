//! [`ArenaConfig`]: chunk sizes, growth, and what is kept across resets.

use crate::word::{MAX_CHUNK_BYTES, MAX_SLOTS};
use devpool_core::{Error, Result, MIN_ALIGN};

/// 1 MiB.
pub const MIB: usize = 1 << 20;

/// Settings of an arena.
///
/// A new chunk is `chunk_size * growth^n` bytes, `n` being the number of chunks the
/// pool holds, capped at `max_chunk_size`; a request too large for that gets a chunk
/// of its own size. [`reset`](crate::ArenaPool::reset) keeps the `keep_chunks` largest
/// chunks for the next frame and gives the rest back.
///
/// ```
/// use devpool_arena::ArenaConfig;
/// let cfg = ArenaConfig::default().chunk_size(8 << 20).growth(1).keep_chunks(2);
/// assert!(cfg.validate().is_ok());
/// assert!(ArenaConfig::default().growth(0).validate().is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArenaConfig {
    /// Bytes of the first chunk (default 64 MiB), rounded up to 256 bytes.
    pub chunk_size: usize,
    /// Growth cap: no regular chunk is larger (default 1 GiB). A larger request still
    /// gets a chunk of its own size.
    pub max_chunk_size: usize,
    /// Each chunk is this many times the size of the one before (default 2; 1 keeps
    /// every chunk at `chunk_size`).
    pub growth: usize,
    /// Chunks kept across [`reset`](crate::ArenaPool::reset), the largest first
    /// (default 4; `usize::MAX` keeps all).
    pub keep_chunks: usize,
    /// The most chunks one pool holds at once (default 64, at most 255).
    pub max_chunks: usize,
    /// Whether the arena rewinds to its first chunk by itself once every block has
    /// been freed (default true). Off, memory comes back only at reset and trim.
    pub rewind_when_empty: bool,
    /// Whether freeing the block bumped last in the current chunk gives its room back
    /// at once, so that blocks freed in stack order are reused within the frame
    /// (default true).
    pub reuse_last: bool,
}

impl Default for ArenaConfig {
    fn default() -> Self {
        ArenaConfig {
            chunk_size: 64 * MIB,
            max_chunk_size: 1024 * MIB,
            growth: 2,
            keep_chunks: 4,
            max_chunks: 64,
            rewind_when_empty: true,
            reuse_last: true,
        }
    }
}

impl ArenaConfig {
    devpool_core::setters! {
        /// Another first chunk size.
        chunk_size: usize,
        /// Another growth cap.
        max_chunk_size: usize,
        /// Another growth factor.
        growth: usize,
        /// Keep this many chunks across resets.
        keep_chunks: usize,
        /// Hold at most this many chunks.
        max_chunks: usize,
        /// Rewind by itself when every block is freed, or not.
        rewind_when_empty: bool,
        /// Give the room of the last block back when it is freed, or not. With both this
        /// and [`rewind_when_empty`](ArenaConfig::rewind_when_empty) off, no address is
        /// handed out twice within a frame, which helps to catch a use after free.
        reuse_last: bool,
    }

    /// Check the settings; [`ArenaPool::new`](crate::ArenaPool::new) clamps bad ones
    /// into range instead.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: &str| Err(Error::Limit(format!("arena config: {what}")));
        if self.chunk_size == 0 || self.chunk_size as u64 > MAX_CHUNK_BYTES {
            return bad("chunk_size must be between 1 B and 16 TiB");
        }
        if self.max_chunk_size < self.chunk_size || self.max_chunk_size as u64 > MAX_CHUNK_BYTES {
            return bad("max_chunk_size must be between chunk_size and 16 TiB");
        }
        if self.growth == 0 {
            return bad("growth must be at least 1");
        }
        if self.max_chunks == 0 || self.max_chunks > MAX_SLOTS {
            return bad("max_chunks must be between 1 and 255");
        }
        Ok(())
    }

    /// The settings brought into range: sizes rounded up to 256 bytes and clamped.
    pub fn normalized(&self) -> Self {
        let max = MAX_CHUNK_BYTES as usize;
        let chunk = self
            .chunk_size
            .clamp(MIN_ALIGN, max)
            .next_multiple_of(MIN_ALIGN);
        ArenaConfig {
            chunk_size: chunk,
            max_chunk_size: self
                .max_chunk_size
                .clamp(chunk, max)
                .next_multiple_of(MIN_ALIGN),
            growth: self.growth.max(1),
            keep_chunks: self.keep_chunks,
            max_chunks: self.max_chunks.clamp(1, MAX_SLOTS),
            rewind_when_empty: self.rewind_when_empty,
            reuse_last: self.reuse_last,
        }
    }

    /// Bytes of a regular new chunk when the pool already holds `held` chunks.
    pub fn chunk_for(&self, held: usize) -> usize {
        let mut size = self.chunk_size;
        for _ in 0..held {
            if size >= self.max_chunk_size {
                break;
            }
            size = size.saturating_mul(self.growth);
        }
        size.min(self.max_chunk_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_grow_to_the_cap() {
        let c = ArenaConfig::default()
            .chunk_size(MIB)
            .max_chunk_size(5 * MIB);
        let sizes: Vec<usize> = (0..5).map(|n| c.chunk_for(n)).collect();
        assert_eq!(sizes, vec![MIB, 2 * MIB, 4 * MIB, 5 * MIB, 5 * MIB]);
        let fixed = c.clone().growth(1);
        assert!((0..5).all(|n| fixed.chunk_for(n) == MIB));
        let huge = c.growth(usize::MAX);
        assert_eq!(huge.chunk_for(60), 5 * MIB);
    }

    #[test]
    fn normalizing_clamps_into_range() {
        let n = ArenaConfig::default()
            .chunk_size(1000)
            .max_chunk_size(0)
            .growth(0)
            .max_chunks(10_000)
            .normalized();
        assert!(n.validate().is_ok());
        assert_eq!(n.chunk_size % MIN_ALIGN, 0);
        assert!(n.chunk_size >= 1000 && n.max_chunk_size >= n.chunk_size);
        assert!(ArenaConfig::default().max_chunks(0).validate().is_err());
        assert!(ArenaConfig::default()
            .chunk_size(8 * MIB)
            .max_chunk_size(MIB)
            .validate()
            .is_err());
    }
}
