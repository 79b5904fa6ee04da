//! [`SlabConfig`]: which size classes a slab pool serves and how it sizes its slabs.

/// The largest slot a configuration may ask for (1 TiB); larger values are clamped.
pub const MAX_CLASS_BYTES: usize = 1 << 40;

/// The largest slab that holds more than one slot (512 MiB).
pub const MAX_SLAB_BYTES: usize = 512 << 20;

/// How the class sizes are chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ClassSpec {
    /// `1 << per_pow2_log` classes per power of two, from 256 B up to `max`.
    Geometric { per_pow2_log: u32, max: usize },
    /// An explicit list of slot sizes.
    List(Vec<usize>),
}

/// The settings of a slab pool.
///
/// Size classes are computed, not searched: by default 4 classes per power of two
/// from 256 B to 1 MiB, so a request above 1 KiB wastes at most 25% of its slot to
/// rounding (below 1 KiB classes are 256 B apart, since every slot is 256-byte
/// aligned). Each slab is one backend region serving one class.
///
/// ```
/// use devpool_slab::SlabConfig;
/// let cfg = SlabConfig::default();
/// let sizes = cfg.class_sizes();
/// assert_eq!(sizes[..6], [256, 512, 768, 1024, 1280, 1536]);
/// assert_eq!(*sizes.last().unwrap(), 1 << 20);
///
/// let fine = SlabConfig::geometric(8, 16 << 20); // 12.5% worst rounding, up to 16 MiB
/// assert!(fine.class_sizes().len() > sizes.len());
///
/// let fixed = SlabConfig::fixed(1000); // one class: 1024-byte blocks
/// assert_eq!(fixed.class_sizes(), vec![1024]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlabConfig {
    pub(crate) spec: ClassSpec,
    pub(crate) min_slab_bytes: usize,
    pub(crate) min_slots: usize,
    pub(crate) max_slab_bytes: usize,
    pub(crate) keep_empty: usize,
}

impl Default for SlabConfig {
    /// 4 classes per power of two from 256 B to 1 MiB; slabs of at least 2 MiB and 8
    /// slots, at most 128 MiB; 2 empty slabs kept per class.
    fn default() -> Self {
        SlabConfig::geometric(4, 1 << 20)
    }
}

impl SlabConfig {
    /// Geometric classes: `per_power_of_two` classes per power of two (rounded up to
    /// a power of two, 1 to 16) from 256 B up to the first class of at least
    /// `max_size` bytes (at most [`MAX_CLASS_BYTES`]).
    pub fn geometric(per_power_of_two: usize, max_size: usize) -> Self {
        let per = per_power_of_two.clamp(1, 16).next_power_of_two();
        SlabConfig {
            spec: ClassSpec::Geometric {
                per_pow2_log: per.trailing_zeros(),
                max: max_size.clamp(crate::MIN_SLOT, MAX_CLASS_BYTES),
            },
            min_slab_bytes: 2 << 20,
            min_slots: 8,
            max_slab_bytes: 128 << 20,
            keep_empty: 2,
        }
    }

    /// An explicit list of slot sizes. Each is rounded up to a multiple of 256 B
    /// (and at most [`MAX_CLASS_BYTES`]); the list is sorted and duplicates dropped.
    /// An empty list means one class of 256 B.
    pub fn custom(sizes: impl IntoIterator<Item = usize>) -> Self {
        let mut v: Vec<usize> = sizes.into_iter().map(crate::classes::round_slot).collect();
        v.sort_unstable();
        v.dedup();
        if v.is_empty() {
            v.push(crate::MIN_SLOT);
        }
        SlabConfig {
            spec: ClassSpec::List(v),
            ..SlabConfig::default()
        }
    }

    /// The fixed-size pool: one class of `block_size` bytes (rounded up to 256 B).
    /// Every request up to that size gets one block of it; O(1), with no external
    /// fragmentation.
    pub fn fixed(block_size: usize) -> Self {
        SlabConfig::custom([block_size])
    }

    /// The same settings with classes up to the first of at least `max_size` bytes:
    /// geometric classes keep their spacing; an explicit list becomes 4 geometric
    /// classes per power of two.
    ///
    /// ```
    /// use devpool_slab::SlabConfig;
    /// let cfg = SlabConfig::geometric(8, 1 << 20).keep_empty(1).up_to(64 << 10);
    /// assert_eq!(cfg, SlabConfig::geometric(8, 64 << 10).keep_empty(1));
    /// ```
    pub fn up_to(self, max_size: usize) -> Self {
        let per = match self.spec {
            ClassSpec::Geometric { per_pow2_log, .. } => 1 << per_pow2_log,
            ClassSpec::List(_) => 4,
        };
        SlabConfig {
            spec: SlabConfig::geometric(per, max_size).spec,
            ..self
        }
    }

    devpool_core::setters! {
        /// Slabs are at least this many bytes, and their sizes a multiple of it (rounded
        /// up to a power of two, 4 KiB to 512 MiB; default 2 MiB).
        min_slab_bytes: usize,
        /// Slabs hold at least this many slots (1 to 4096; default 8), unless that would
        /// pass [`max_slab_bytes`](SlabConfig::max_slab_bytes).
        min_slots: usize,
        /// The huge-class policy: a slab of `min_slots` slots may not pass this many bytes
        /// (at most [`MAX_SLAB_BYTES`]; default 128 MiB). Classes too large for that get as
        /// many slots as fit, and classes above it one slot per slab.
        max_slab_bytes: usize,
        /// How many empty slabs per class the pool keeps for reuse once their thread
        /// cache has given them up (default 2); see [`SlabPool`](crate::SlabPool) for
        /// the whole policy.
        keep_empty: usize,
    }

    /// The slot sizes of every class, smallest first.
    pub fn class_sizes(&self) -> Vec<usize> {
        crate::classes::class_sizes(&self.spec)
    }

    /// The largest request served.
    pub fn max_size(&self) -> usize {
        self.class_sizes()
            .last()
            .copied()
            .unwrap_or(crate::MIN_SLOT)
    }
}
