//! [`VmConfig`]: how far ahead pages are mapped, how large the physical chunks are,
//! whether unused memory moves, and the bounds of the cache of mapped pages that no
//! live block touches.

/// The reach of growth in bursts, in operations, when it is asked for
/// ([`VmConfig::burst_ops`]; `burst=on` in the configuration string): chosen on
/// the bundled traces, where 48 to 128 gave the same memory and calls.
pub const BURST_ON: u64 = 64;

/// Settings of a [`PageLayer`](crate::PageLayer).
///
/// Out-of-range values are brought into range when the layer is made, never
/// refused: the batch, chunk, divisor and window are raised to at least 1 (the
/// smallest chunk brought between 1 and the largest), the
/// fractions brought into `0.0..=1.0` (a fraction that is not a number counts as 0,
/// `floor_max` as 1).
///
/// The defaults come from replaying the bundled traces
/// (`cargo run --release -p devpool-hybrid --example page_policy`; docs/DESIGN.md).
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
    /// (default 16): the next blocks placed above it find their pages mapped. In a
    /// pool that moves memory (`move_memory`) and whose floor (`cache_floor`, at
    /// most `floor_max` of the recent peak) is under half a batch, what a batch maps
    /// ahead is at most that floor or an eighth of a batch, whichever is more: a
    /// small pool's batch would otherwise sit unused at its peak.
    pub map_batch_pages: usize,
    /// Pages mapped ahead are at most this many times the run the block needs
    /// (default 2; 0: no cap): a small block does not map a whole batch ahead.
    pub batch_cap: usize,
    /// The most pages one physical allocation (one chunk) may hold (default 128:
    /// 256 MiB on a GPU). Larger chunks mean fewer driver calls (each chunk is one
    /// mapping, and on an H200 creating, mapping and granting access to one costs
    /// about 36 µs whatever its size up to 256 MiB); smaller ones let memory go
    /// back, or move, in finer pieces, since a chunk goes only whole. With the
    /// divisor, only runs above `chunk_divisor × chunk_pages` pages reach the cap.
    pub chunk_pages: usize,
    /// The fewest pages a chunk cut from a run holds where the piece is that long
    /// (default 1). Every chunk is one mapping, and the driver's cost of mapping
    /// and unmapping grows with the mappings, not the bytes (on an H200, about 36 µs
    /// to create, map and grant access to one, whatever its size up to 256 MiB), so
    /// a floor bounds the calls a mid-sized block costs.
    pub chunk_min_pages: usize,
    /// A run is cut into chunks of about a this-many-th of it, at least a page and
    /// at most `chunk_pages` (default 16): small blocks get page-sized chunks, large
    /// ones large chunks. The pages at a block's ends and the pages mapped ahead of
    /// it are chunks of their own.
    pub chunk_divisor: usize,
    /// Unused mapped bytes always allowed (default 32 MiB), at most `floor_max` of
    /// the recent peak.
    pub cache_floor: usize,
    /// The floor is at most this fraction of the recent peak of allocated bytes
    /// (default 1/32), so that a small pool is not held to a large floor.
    pub floor_max: f64,
    /// Unused mapped bytes allowed on top of the floor, as a fraction of the recent
    /// peak of allocated bytes (default 0.002).
    pub cache_fraction: f64,
    /// Length, in allocations and frees, of the window over which the recent peaks
    /// are taken (default 16384). Memory freed since the peak stays mapped for reuse
    /// until two windows have passed without reaching it again.
    pub window_ops: u64,
    /// Whether unused memory moves to where a block needs pages (default true), on
    /// backends that can map memory at a second address
    /// ([`Backend::alias`](devpool_core::Backend::alias)): once the pool holds its
    /// limit, a growing block takes the memory of unused pages elsewhere instead of
    /// new memory. Without it, the pool maps new memory and keeps its cache within
    /// the bound by unmapping.
    pub move_memory: bool,
    /// Memory the pool may take past the recent peak of allocated bytes (and the
    /// floor and fraction) before it moves unused memory instead, as a fraction of
    /// that peak (default 0).
    pub move_margin: f64,
    /// The most the bound widens when unmapped pages keep coming back, as a fraction
    /// of the recent peak (default 0.25); only without moving memory, where it stops
    /// a working set wider than the bound from being unmapped and mapped again.
    pub slack_max: f64,
    /// The most the limit (and the bound) widens when memory keeps moving, as a
    /// fraction of the recent peak (default 0: off); only with moving memory. A
    /// workload whose blocks land on other pages every step (a training step whose
    /// placement differs a little from the last) would otherwise move memory in every
    /// step, one driver call each; once moves recur across windows, each moved byte
    /// widens the limit by as much, up to this cap, so the pool holds a little more
    /// and stops moving. The widening decays by a quarter in every window without a
    /// move.
    ///
    /// Off by default: on the bundled traces 1/128 raised the hybrid's peak held
    /// from 1.011 to 1.018 of the live peak (llama_generate) and 1.058 to 1.061
    /// (bert_serve), and on the H200 it halved the moves of ViT-B training (117 to
    /// 64 over 40 steps) for 33 MiB more held, with no step-time difference that
    /// stood out of the run-to-run noise (docs/BENCHMARKS.md).
    pub move_slack_max: f64,
    /// Bytes the layer maps when it reserves its first range, before any block needs
    /// them, and keeps mapped while fewer bytes are allocated (default 0: none), as
    /// RMM's pool takes its initial size: a job that knows its footprint pays for
    /// mapping it once, at its first allocation, instead of in every allocation that
    /// grows the pool. Given back only by a trim (or when the backend runs out of
    /// memory), never by the cache policy; at most the first range's size is mapped,
    /// and a backend that cannot map it all maps none of it and the pool goes on
    /// without. The reserve counts as memory held. In a stream-ordered allocator
    /// (one pool per stream) only the first pool made, the first stream's to
    /// allocate, takes it ([`ReserveOnce`](crate::ReserveOnce)).
    pub reserve: usize,
    /// Growth in bursts maps ahead (default 0: never; [`BURST_ON`] turns it on). A
    /// growth past the most the pool has held, within this many operations of the
    /// previous one, while the pool grows one way (see `burst_free_ratio`), maps
    /// ahead twice what the previous one did (at least a map batch), at most
    /// `1 / burst_divisor` of what the pool holds: a training step's first pass,
    /// which grows block by block, then calls the driver in a few of its
    /// allocations instead of one in every few dozen. What is mapped ahead when the
    /// growth stops is held at the peak: on the H200, GPT-2 training held 0.6% more
    /// at its peak with it (docs/BENCHMARKS.md, "Growth in bursts"), so it is off
    /// unless asked for.
    pub burst_ops: u64,
    /// What a burst maps ahead is at most this fraction's inverse of what the pool
    /// holds (default 8).
    pub burst_divisor: usize,
    /// A growth counts as a burst only while the bytes freed since the previous
    /// growth are at most this fraction of those allocated since (default 0.7): a
    /// pool that grows while it frees nearly as much as it allocates (a decoder
    /// whose cache creeps up from step to step) maps nothing ahead.
    pub burst_free_ratio: f64,
}

impl Default for VmConfig {
    fn default() -> Self {
        VmConfig {
            map_batch_pages: 16,
            batch_cap: 2,
            chunk_pages: 128,
            chunk_min_pages: 1,
            chunk_divisor: 16,
            cache_floor: 32 << 20,
            floor_max: 1.0 / 32.0,
            cache_fraction: 0.002,
            window_ops: 16384,
            move_memory: true,
            move_margin: 0.0,
            slack_max: 0.25,
            move_slack_max: 0.0,
            reserve: 0,
            burst_ops: 0,
            burst_divisor: 8,
            burst_free_ratio: 0.7,
        }
    }
}

impl VmConfig {
    devpool_core::setters! {
        /// Another map batch.
        map_batch_pages: usize,
        /// Another cap of what is mapped ahead, in times the run a block needs (0: none).
        batch_cap: usize,
        /// Another largest chunk.
        chunk_pages: usize,
        /// Another chunk divisor.
        chunk_divisor: usize,
        /// Another smallest chunk cut from a run.
        chunk_min_pages: usize,
        /// Another cap of the floor, as a fraction of the recent peak.
        floor_max: f64,
        /// Another window length.
        window_ops: u64,
        /// Move unused memory (or not).
        move_memory: bool,
        /// Another margin before memory moves.
        move_margin: f64,
        /// Another largest widening of the bound.
        slack_max: f64,
        /// Another largest widening of the limit when memory keeps moving.
        move_slack_max: f64,
        /// Another reserve mapped ahead and kept.
        reserve: usize,
        /// Another reach of growth in bursts, in operations (0: off).
        burst_ops: u64,
        /// Another cap of what a burst maps ahead, as a divisor of what is held.
        burst_divisor: usize,
        /// Another share of freed bytes under which growth counts as a burst.
        burst_free_ratio: f64,
    }
    /// Another floor and fraction of the unused mapped bytes kept.
    pub fn cache(mut self, floor: usize, fraction: f64) -> Self {
        self.cache_floor = floor;
        self.cache_fraction = fraction;
        self
    }

    /// The same settings brought into range.
    pub fn normalized(mut self) -> Self {
        self.map_batch_pages = self.map_batch_pages.max(1);
        self.chunk_pages = self.chunk_pages.max(1);
        self.chunk_divisor = self.chunk_divisor.max(1);
        self.chunk_min_pages = self.chunk_min_pages.clamp(1, self.chunk_pages);
        self.window_ops = self.window_ops.max(1);
        let unit = |x: f64, nan: f64| {
            if x.is_finite() {
                x.clamp(0.0, 1.0)
            } else {
                nan
            }
        };
        self.cache_fraction = unit(self.cache_fraction, 0.0);
        self.floor_max = unit(self.floor_max, 1.0);
        self.move_margin = unit(self.move_margin, 0.0);
        self.slack_max = unit(self.slack_max, 0.0);
        self.move_slack_max = unit(self.move_slack_max, 0.0);
        self.burst_divisor = self.burst_divisor.max(1);
        self.burst_free_ratio = unit(self.burst_free_ratio, 0.0);
        self
    }
}
