//! No two live blocks overlap: checked on addresses, then on the device's bytes.

use devpool_core::Rng;
use devpool_core::{Allocator, Backend, Block, Error, Request, Result, StreamId, MIN_ALIGN};

/// Settings of the overlap check; [`OverlapCheck::new`] gives the defaults.
///
/// The check allocates `blocks` blocks over `rounds` rounds on `streams` streams,
/// freeing about one block for every four allocated (a third of those frees on
/// another stream than the block's own) and half of the live blocks between rounds,
/// so freed memory is reused next to live blocks. At the end of each round:
///
/// 1. the live blocks are sorted by address: each must be 256-byte aligned, at least
///    as large as requested, and end before the next one starts;
/// 2. each block is filled (all of its granted bytes) with `cuMemsetD8Async` on its
///    own stream, with a byte that differs from its neighbours' in address order;
/// 3. every stream that holds a block is synchronized, so that all fills have landed;
/// 4. each block is read back and every byte compared. Any overlap of the memory
///    behind two blocks leaves one of them holding the other's byte.
#[derive(Clone, Debug)]
pub struct OverlapCheck {
    /// Blocks to allocate in all.
    pub blocks: usize,
    /// Seed of the random sizes and choices.
    pub seed: u64,
    /// Most sizes are log-uniform in `1..=max_size` (default 8 MiB).
    pub max_size: usize,
    /// One block in `large_one_in` is log-uniform in `max_size..=large_size`
    /// (default 64 MiB); 0 turns large blocks off.
    pub large_size: usize,
    /// How rare large blocks are (default: one in 32).
    pub large_one_in: u64,
    /// Streams to spread the blocks over, the default stream included (default 3).
    pub streams: usize,
    /// Rounds of allocation and checking (default 2).
    pub rounds: usize,
}

/// What an overlap check did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OverlapReport {
    /// Successful allocations.
    pub allocations: usize,
    /// Frees during the rounds (the final frees are not counted).
    pub frees: usize,
    /// Of those, frees on another stream than the block's own.
    pub cross_stream_frees: usize,
    /// Blocks checked, summed over rounds.
    pub blocks_checked: usize,
    /// Bytes written and read back, summed over rounds.
    pub bytes_checked: u64,
}

/// Run [`OverlapCheck::new(blocks, seed)`](OverlapCheck::new) on `alloc`: thousands
/// of blocks of 1 B to 8 MiB (some up to 64 MiB), each filled with its own byte and
/// read back. Every block is freed before it returns.
///
/// Errors: [`Error::Corrupted`] when two blocks overlap or a block does not hold what
/// was written; any allocator or backend error.
pub fn check_no_overlap(alloc: &dyn Allocator, blocks: usize, seed: u64) -> Result<OverlapReport> {
    OverlapCheck::new(blocks, seed).run(alloc)
}

fn corrupted(b: &Block, detail: String) -> Error {
    Error::Corrupted { ptr: b.ptr, detail }
}

/// The byte written into the block of address rank `rank`: never zero, and never
/// the same for two neighbours.
fn pattern(rank: usize) -> u8 {
    (rank % 251) as u8 + 1
}

impl OverlapCheck {
    /// `blocks` blocks from seed `seed`, with the default sizes, streams and rounds.
    pub fn new(blocks: usize, seed: u64) -> Self {
        OverlapCheck {
            blocks,
            seed,
            max_size: 8 << 20,
            large_size: 64 << 20,
            large_one_in: 32,
            streams: 3,
            rounds: 2,
        }
    }

    /// Other size limits: most sizes up to `max_size`, some up to `large_size`.
    pub fn sizes(mut self, max_size: usize, large_size: usize) -> Self {
        self.max_size = max_size.max(1);
        self.large_size = large_size;
        self
    }

    /// Another number of streams (at least one: the default stream).
    pub fn streams(mut self, streams: usize) -> Self {
        self.streams = streams.max(1);
        self
    }

    /// Run the check on `alloc`, through its backend's memset and copies. Every block
    /// still live is freed before returning, also on failure.
    pub fn run(&self, alloc: &dyn Allocator) -> Result<OverlapReport> {
        let backend = alloc.backend().clone();
        let mut streams = vec![StreamId::DEFAULT];
        for _ in 1..self.streams.max(1) {
            streams.push(backend.create_stream()?);
        }
        let mut rng = Rng::new(self.seed);
        let mut live = Vec::new();
        let mut report = OverlapReport::default();
        let outcome = self.rounds(alloc, &*backend, &streams, &mut rng, &mut live, &mut report);
        let mut first_err = outcome.err();
        for s in &streams {
            if let Err(e) = backend.synchronize(*s) {
                first_err.get_or_insert(e.into());
            }
        }
        for b in live.drain(..) {
            if let Err(e) = alloc.free(b) {
                first_err.get_or_insert(e);
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(report),
        }
    }

    fn size(&self, rng: &mut Rng) -> usize {
        if self.large_size > self.max_size
            && self.large_one_in > 0
            && rng.below(self.large_one_in) == 0
        {
            rng.log_uniform(self.max_size, self.large_size)
        } else {
            rng.log_uniform(1, self.max_size)
        }
    }

    fn free_one(
        &self,
        alloc: &dyn Allocator,
        streams: &[StreamId],
        rng: &mut Rng,
        live: &mut Vec<Block>,
        report: &mut OverlapReport,
    ) -> Result<()> {
        let b = live.swap_remove(rng.below(live.len() as u64) as usize);
        let other = streams.len() > 1 && rng.below(3) == 0;
        let stream = if other {
            let s = streams[rng.below(streams.len() as u64) as usize];
            if s == b.stream {
                streams[(streams.iter().position(|x| *x == s).unwrap_or(0) + 1) % streams.len()]
            } else {
                s
            }
        } else {
            b.stream
        };
        if let Err(e) = alloc.deallocate(b, stream) {
            live.push(b);
            return Err(e);
        }
        report.frees += 1;
        if stream != b.stream {
            report.cross_stream_frees += 1;
        }
        Ok(())
    }

    fn rounds(
        &self,
        alloc: &dyn Allocator,
        backend: &dyn Backend,
        streams: &[StreamId],
        rng: &mut Rng,
        live: &mut Vec<Block>,
        report: &mut OverlapReport,
    ) -> Result<()> {
        let rounds = self.rounds.max(1);
        let per_round = self.blocks.div_ceil(rounds);
        for round in 0..rounds {
            let target = (per_round * (round + 1)).min(self.blocks);
            while report.allocations < target {
                let stream = streams[rng.below(streams.len() as u64) as usize];
                let req = Request::new(self.size(rng)).on_stream(stream);
                live.push(alloc.allocate(req)?);
                report.allocations += 1;
                if live.len() > 1 && rng.below(4) == 0 {
                    self.free_one(alloc, streams, rng, live, report)?;
                }
            }
            verify(backend, live, report)?;
            if round + 1 < rounds {
                for _ in 0..live.len() / 2 {
                    self.free_one(alloc, streams, rng, live, report)?;
                }
            }
        }
        Ok(())
    }
}

/// Check addresses, fill every block with its byte, read every block back.
fn verify(backend: &dyn Backend, live: &[Block], report: &mut OverlapReport) -> Result<()> {
    let mut order: Vec<&Block> = live.iter().collect();
    order.sort_by_key(|b| b.ptr);
    for b in &order {
        if !b.ptr.is_aligned(MIN_ALIGN) || b.ptr.is_null() {
            return Err(corrupted(b, format!("{b:?} is not 256-byte aligned")));
        }
        if b.size < b.requested.max(1) {
            return Err(corrupted(b, format!("{b:?} is smaller than requested")));
        }
    }
    for w in order.windows(2) {
        if w[0].ptr.0.saturating_add(w[0].size as u64) > w[1].ptr.0 {
            return Err(corrupted(
                w[1],
                format!("blocks overlap: {:?} and {:?}", w[0], w[1]),
            ));
        }
    }
    for (rank, b) in order.iter().enumerate() {
        backend.memset(b.ptr, pattern(rank), b.size, b.stream)?;
    }
    // Every fill must have landed before any block is read back: a block's own
    // stream orders its own fill before its read, but a fill of an overlapping block
    // on another stream could still be queued and land after the read, hiding the
    // overlap. So every stream involved is synchronized first.
    let mut streams: Vec<StreamId> = order.iter().map(|b| b.stream).collect();
    streams.sort_unstable();
    streams.dedup();
    for s in streams {
        backend.synchronize(s)?;
    }
    let mut buf = Vec::new();
    for (rank, b) in order.iter().enumerate() {
        buf.clear();
        buf.resize(b.size, 0);
        backend.copy_to_host(&mut buf, b.ptr, b.stream)?;
        let want = pattern(rank);
        if let Some(off) = buf.iter().position(|&x| x != want) {
            let got = buf[off];
            // The nearest block in address order that was given this byte.
            let writer = order
                .iter()
                .enumerate()
                .filter(|(r, _)| *r != rank && pattern(*r) == got)
                .min_by_key(|(r, _)| r.abs_diff(rank))
                .map(|(_, o)| format!(" (the byte of the block at {:?}?)", o.ptr))
                .unwrap_or_default();
            return Err(corrupted(
                b,
                format!(
                    "byte {off} of {b:?} reads {got:#04x}{writer} where {want:#04x} was written: \
                     the memory is shared with another block or not really there"
                ),
            ));
        }
        report.blocks_checked += 1;
        report.bytes_checked += b.size as u64;
    }
    Ok(())
}
