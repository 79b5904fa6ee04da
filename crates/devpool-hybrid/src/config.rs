//! Thresholds and named presets.

use devpool_buddy::{BuddyConfig, BuddyMode};
use devpool_slab::SlabConfig;
use devpool_tlsf::{Mode as TlsfMode, TlsfConfig};

/// The strategy of the large route.
#[derive(Clone, Debug)]
pub enum LargeStrategy {
    /// TLSF best fit, blocks packed in one virtual range (or regions without
    /// virtual memory).
    Tlsf(TlsfConfig),
    /// Buddy: power-of-two blocks; in virtual mode only the bytes in use are mapped.
    Buddy(BuddyConfig),
}

/// Where the router draws its lines.
#[derive(Clone, Debug)]
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
}

/// The named presets: `(name, what it is for)`.
pub const PRESETS: &[(&str, &str)] = &[
    (
        "training",
        "slab up to 1 MiB, TLSF over virtual memory above: least memory held on training traces",
    ),
    (
        "inference",
        "slab up to 1 MiB, TLSF above, blocks of 1 GiB and more in their own regions",
    ),
    ("buddy", "slab up to 1 MiB, buddy in virtual mode above"),
];

impl HybridConfig {
    /// Training: slab up to 64 KiB, TLSF over a virtual range above. On the bundled
    /// training traces the large blocks decide the memory held: packing everything
    /// above 64 KiB in one virtual range wastes least, while the slab keeps the many
    /// tiny requests (a third to a half of all calls) on its O(1) path. Sending up to
    /// 1 MiB to the slab costs 0.3 to 0.5 points of fragmentation on those traces
    /// (`cargo run --release -p devpool-hybrid --example thresholds`, docs/DESIGN.md).
    pub fn training() -> Self {
        HybridConfig {
            small_max: 64 << 10,
            huge_min: usize::MAX,
            slab: SlabConfig::geometric(4, 64 << 10),
            large: LargeStrategy::Tlsf(TlsfConfig {
                mode: TlsfMode::Auto,
                ..TlsfConfig::default()
            }),
        }
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
            slab: SlabConfig::default(),
            huge_min: usize::MAX,
        }
    }

    /// A preset by name (see [`PRESETS`]).
    pub fn preset(name: &str) -> Option<Self> {
        match name {
            "training" => Some(Self::training()),
            "inference" => Some(Self::inference()),
            "buddy" => Some(Self::with_buddy()),
            _ => None,
        }
    }
}

impl Default for HybridConfig {
    fn default() -> Self {
        Self::training()
    }
}
