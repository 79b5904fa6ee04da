//! Thresholds and named presets.

use devpool_buddy::{BuddyConfig, BuddyMode};
use devpool_slab::SlabConfig;
use devpool_tlsf::{TlsfConfig, TlsfMode};

/// The strategy of the large route.
#[derive(Clone, Debug, PartialEq)]
pub enum LargeStrategy {
    /// TLSF best fit, blocks packed in one virtual range (or regions without
    /// virtual memory).
    Tlsf(TlsfConfig),
    /// Buddy: power-of-two blocks; in virtual mode only the bytes in use are mapped.
    Buddy(BuddyConfig),
}

/// Where the router draws its lines.
#[derive(Clone, Debug, PartialEq)]
pub struct HybridConfig {
    /// Requests up to this many bytes go to the slab.
    pub small_max: usize,
    /// Requests of at least this many bytes get their own backend region
    /// (`usize::MAX`: never).
    pub huge_min: usize,
    /// The slab's classes; its largest class must cover `small_max`.
    pub slab: SlabConfig,
    /// The large route.
    pub large: LargeStrategy,
    /// Whether the slab route takes its slabs from the large route (so slabs and
    /// large blocks share pages, and an empty slab's memory goes back to the page
    /// layer), rather than as regions of their own from the backend.
    pub slabs_from_large: bool,
}

/// The slab route of the presets: 4 classes per power of two up to `max`, slabs of
/// 64 KiB and more carved from the large route, one kept empty per class (so a
/// block allocated and freed again and again does not take and return a slab each
/// time); further empty slabs go back to the large route at once, where their
/// memory joins the page layer's cache.
fn slabs(max: usize) -> SlabConfig {
    SlabConfig::geometric(4, max)
        .min_slab_bytes(64 << 10)
        .keep_empty(1)
}

impl HybridConfig {
    /// Training: slab up to 64 KiB, TLSF over a virtual range above. On the bundled
    /// training traces the large blocks decide the memory held: packing everything
    /// above 64 KiB in one virtual range wastes least, while the slab keeps the many
    /// tiny requests (a third to a half of all calls) on its O(1) path. Its slabs
    /// are blocks of the large route, so the small route holds no page of its own:
    /// slabs as regions of their own held 18 to 56 MiB on the bundled traces, 7% of
    /// the peak on an encoder serving trace (`cargo run --release -p devpool-hybrid
    /// --example page_policy`, docs/DESIGN.md).
    pub fn training() -> Self {
        HybridConfig {
            small_max: 64 << 10,
            huge_min: usize::MAX,
            slab: slabs(64 << 10),
            large: LargeStrategy::Tlsf(TlsfConfig {
                mode: TlsfMode::Auto,
                ..TlsfConfig::default()
            }),
            slabs_from_large: true,
        }
    }

    /// Coarse: as training, but each block's pages are mapped as whole pieces (cut
    /// only at the block's ends) and unused memory never moves: the pool maps new
    /// memory and gives back what its bound says. Every piece is one mapping, and
    /// the driver's cost grows with the mappings, so this costs a fraction of the
    /// driver time and holds more where freed memory is reused in pieces. On an
    /// H200 (docs/BENCHMARKS.md) the bundled training traces took 46 and 16 ms of
    /// allocator time (the driver pool 62 and 16, training 199 and 78) for 1.018 and
    /// 1.013 times the live peak (training 1.003 and 1.008); an encoder serving
    /// trace held 1.316 (training 1.058).
    pub fn coarse() -> Self {
        let mut c = Self::training();
        if let LargeStrategy::Tlsf(t) = &mut c.large {
            t.pages = t.pages.clone().chunk_divisor(1).move_memory(false);
        }
        c
    }

    /// Whether the large route is TLSF with the page settings of [`coarse`](Self::coarse).
    pub fn is_coarse(&self) -> bool {
        matches!(&self.large, LargeStrategy::Tlsf(t)
            if t.pages.chunk_divisor == 1 && !t.pages.move_memory)
    }

    /// Inference: as training, but weights and KV caches of 1 GiB and more get their
    /// own regions: they live for the whole run and need no pool around them.
    pub fn inference() -> Self {
        HybridConfig {
            huge_min: 1 << 30,
            ..Self::training()
        }
    }

    /// Slab for small blocks, buddy in virtual mode for the rest.
    pub fn with_buddy() -> Self {
        HybridConfig {
            large: LargeStrategy::Buddy(BuddyConfig {
                mode: BuddyMode::Auto,
                ..BuddyConfig::default()
            }),
            small_max: 1 << 20,
            slab: slabs(1 << 20),
            huge_min: usize::MAX,
            slabs_from_large: true,
        }
    }

    /// Another threshold of the small route: requests up to `bytes` go to the slab,
    /// whose largest class is raised or lowered to cover them (its other settings
    /// stay).
    ///
    /// ```
    /// use devpool_hybrid::HybridConfig;
    /// let h = HybridConfig::training().small_max(256 << 10);
    /// assert_eq!(h.small_max, 256 << 10);
    /// assert_eq!(*h.slab.class_sizes().last().unwrap(), 256 << 10);
    /// ```
    pub fn small_max(mut self, bytes: usize) -> Self {
        self.small_max = bytes;
        self.slab = self.slab.up_to(bytes);
        self
    }

    /// Another threshold of the huge route: requests of at least `bytes` get their
    /// own backend region (`usize::MAX`: never).
    pub fn huge_min(mut self, bytes: usize) -> Self {
        self.huge_min = bytes;
        self
    }
}

impl Default for HybridConfig {
    fn default() -> Self {
        Self::training()
    }
}
