//! [`StrategySpec`]: a strategy and its settings, the one table of strategy names,
//! and the one place that builds an allocator from either.

use devpool_arena::ArenaConfig;
use devpool_buddy::{BuddyConfig, BuddyMode};
use devpool_core::{direct, Allocator, IntoBackend};
use devpool_hybrid::{HybridConfig, LargeStrategy};
use devpool_ring::RingConfig;
use devpool_slab::SlabConfig;
use devpool_tlsf::{TlsfConfig, TlsfMode};
use std::fmt;
use std::str::FromStr;

/// A strategy and its settings: what [`build`](StrategySpec::build) makes.
///
/// A name of [`STRATEGIES`] parses into its spec, and a spec prints as the name of
/// the first entry that takes it, so every listed name reads back as itself. The
/// settings a name does not say (a hybrid's thresholds, a fixed pool's block size)
/// are changed on the spec, not in the name.
///
/// ```
/// use devpool::{Allocator, MockBackend, StrategySpec};
/// let spec: StrategySpec = "tlsf-virtual".parse().unwrap();
/// assert_eq!(spec.to_string(), "tlsf-virtual");
/// let alloc = spec.build(MockBackend::shared());
/// let b = alloc.alloc(4096).unwrap();
/// alloc.free(b).unwrap();
/// assert!("best-fit-please".parse::<StrategySpec>().is_err());
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum StrategySpec {
    /// Every request straight to the backend ([`devpool_core::direct`]).
    Direct,
    /// Size classes ([`devpool_slab::slab`]).
    Slab(SlabConfig),
    /// One class of one block size ([`devpool_slab::fixed`]).
    Fixed {
        /// Bytes of every block; larger requests are refused.
        block_size: usize,
    },
    /// Power-of-two buddy blocks ([`devpool_buddy::buddy`]); the mode picks the name.
    Buddy(BuddyConfig),
    /// TLSF best fit ([`devpool_tlsf::tlsf`]); the mode picks the name.
    Tlsf(TlsfConfig),
    /// The bump arena ([`devpool_arena::arena`]).
    Arena(ArenaConfig),
    /// The ring buffer ([`devpool_ring::ring`]).
    Ring(RingConfig),
    /// The router ([`devpool_hybrid::hybrid`]); the preset picks the name.
    Hybrid(HybridConfig),
}

/// A name of the table: what it denotes and whether tables show it by default.
#[derive(Clone, Copy)]
pub struct Strategy {
    /// The name.
    pub name: &'static str,
    /// What it is, in a line.
    pub about: &'static str,
    /// Whether `devpool compare` and `devpool bench` run it when no strategy is named
    /// (a fixed-size pool refuses most requests of a trace, so it is not).
    pub listed: bool,
    spec: fn() -> StrategySpec,
    takes: fn(&StrategySpec) -> bool,
}

impl Strategy {
    /// The spec this name denotes.
    pub fn spec(&self) -> StrategySpec {
        (self.spec)()
    }
}

impl fmt::Debug for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Strategy")
            .field("name", &self.name)
            .field("listed", &self.listed)
            .finish()
    }
}

/// The block size of the fixed-size pool the name `fixed` denotes (1 MiB).
pub const FIXED_BLOCK_SIZE: usize = 1 << 20;

fn buddy_mode(s: &StrategySpec, mode: BuddyMode) -> bool {
    matches!(s, StrategySpec::Buddy(c) if c.mode == mode)
}

fn tlsf_mode(s: &StrategySpec, mode: TlsfMode) -> bool {
    matches!(s, StrategySpec::Tlsf(c) if c.mode == mode)
}

/// Every strategy name, in the order tables show them. The first entry whose test
/// takes a spec names it.
pub const STRATEGIES: &[Strategy] = &[
    Strategy {
        name: "direct",
        about: "every request straight to the backend (what cudaMalloc does): the yardstick",
        listed: true,
        spec: || StrategySpec::Direct,
        takes: |s| matches!(s, StrategySpec::Direct),
    },
    Strategy {
        name: "slab",
        about: "size classes (4 per power of two) up to 4 GiB, one class per slab",
        listed: true,
        spec: || StrategySpec::Slab(SlabConfig::geometric(4, 1 << 32)),
        takes: |s| matches!(s, StrategySpec::Slab(_)),
    },
    Strategy {
        name: "buddy-region",
        about: "power-of-two buddy blocks in contiguous regions",
        listed: true,
        spec: || StrategySpec::Buddy(BuddyConfig::region()),
        takes: |s| buddy_mode(s, BuddyMode::Region),
    },
    Strategy {
        name: "buddy-virtual",
        about: "buddy over a virtual range, pages mapped only for bytes in use",
        listed: true,
        spec: || StrategySpec::Buddy(BuddyConfig::virtual_ranges()),
        takes: |s| buddy_mode(s, BuddyMode::Virtual),
    },
    Strategy {
        name: "tlsf-region",
        about: "TLSF best fit in contiguous regions",
        listed: true,
        spec: || StrategySpec::Tlsf(TlsfConfig::default().mode(TlsfMode::Region)),
        takes: |s| tlsf_mode(s, TlsfMode::Region),
    },
    Strategy {
        name: "tlsf-virtual",
        about: "TLSF best fit packed in a virtual range, pages mapped on demand",
        listed: true,
        spec: || StrategySpec::Tlsf(TlsfConfig::default().mode(TlsfMode::Virtual)),
        takes: |s| tlsf_mode(s, TlsfMode::Virtual),
    },
    Strategy {
        name: "arena",
        about: "linear bump arena: frees reuse memory only once everything is freed",
        listed: true,
        spec: || StrategySpec::Arena(ArenaConfig::default()),
        takes: |s| matches!(s, StrategySpec::Arena(_)),
    },
    Strategy {
        name: "ring",
        about: "ring buffer for streaming work: frees in about allocation order, virtual pages mapped as it grows",
        listed: true,
        spec: || StrategySpec::Ring(RingConfig::default()),
        takes: |s| matches!(s, StrategySpec::Ring(_)),
    },
    Strategy {
        name: "hybrid",
        about: "slab up to 64 KiB, TLSF over virtual memory above (training preset)",
        listed: true,
        spec: || StrategySpec::Hybrid(HybridConfig::training()),
        takes: |s| {
            matches!(s, StrategySpec::Hybrid(c)
                if c.huge_min == usize::MAX
                    && matches!(c.large, LargeStrategy::Tlsf(_))
                    && !c.is_coarse())
        },
    },
    Strategy {
        name: "hybrid-coarse",
        about: "hybrid, each block's pages one mapping and no moving: a fraction of the driver calls, more memory where freed memory is reused in pieces",
        listed: true,
        spec: || StrategySpec::Hybrid(HybridConfig::coarse()),
        takes: |s| {
            matches!(s, StrategySpec::Hybrid(c)
                if c.huge_min == usize::MAX && c.is_coarse())
        },
    },
    Strategy {
        name: "hybrid-inference",
        about: "hybrid, with blocks of 1 GiB and more in their own regions",
        listed: true,
        spec: || StrategySpec::Hybrid(HybridConfig::inference()),
        takes: |s| {
            matches!(s, StrategySpec::Hybrid(c) if matches!(c.large, LargeStrategy::Tlsf(_)))
        },
    },
    Strategy {
        name: "hybrid-buddy",
        about: "slab up to 1 MiB, buddy over virtual memory above",
        listed: true,
        spec: || StrategySpec::Hybrid(HybridConfig::with_buddy()),
        takes: |s| matches!(s, StrategySpec::Hybrid(_)),
    },
    Strategy {
        name: "fixed",
        about: "one class of 1 MiB blocks: O(1), larger requests refused",
        listed: false,
        spec: || StrategySpec::Fixed {
            block_size: FIXED_BLOCK_SIZE,
        },
        takes: |s| matches!(s, StrategySpec::Fixed { .. }),
    },
    Strategy {
        name: "buddy",
        about: "buddy in virtual mode where the backend has virtual memory, else in regions",
        listed: false,
        spec: || StrategySpec::Buddy(BuddyConfig::default().mode(BuddyMode::Auto)),
        takes: |s| matches!(s, StrategySpec::Buddy(_)),
    },
    Strategy {
        name: "tlsf",
        about: "TLSF in a virtual range where the backend has virtual memory, else in regions",
        listed: false,
        spec: || StrategySpec::Tlsf(TlsfConfig::default().mode(TlsfMode::Auto)),
        takes: |s| matches!(s, StrategySpec::Tlsf(_)),
    },
];

/// A name that is not in [`STRATEGIES`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown strategy `{name}` (known: {})", known_names())]
pub struct UnknownStrategy {
    /// The name asked for, cut to 64 bytes.
    pub name: String,
}

fn known_names() -> String {
    let names: Vec<&str> = STRATEGIES.iter().map(|s| s.name).collect();
    names.join(", ")
}

impl StrategySpec {
    /// The entry of [`STRATEGIES`] that names this spec.
    pub fn strategy(&self) -> &'static Strategy {
        STRATEGIES
            .iter()
            .find(|s| (s.takes)(self))
            .expect("every spec has a name: the table ends with one entry per variant")
    }

    /// The name of this spec (see [`STRATEGIES`]).
    pub fn name(&self) -> &'static str {
        self.strategy().name
    }

    /// The specs that tables run when no strategy is named, in table order.
    pub fn listed() -> impl Iterator<Item = StrategySpec> {
        STRATEGIES.iter().filter(|s| s.listed).map(Strategy::spec)
    }

    /// The hybrid router's settings, when this is a hybrid.
    pub fn hybrid(&self) -> Option<&HybridConfig> {
        match self {
            StrategySpec::Hybrid(h) => Some(h),
            _ => None,
        }
    }

    /// The hybrid router's settings to change, when this is a hybrid.
    pub fn hybrid_mut(&mut self) -> Option<&mut HybridConfig> {
        match self {
            StrategySpec::Hybrid(h) => Some(h),
            _ => None,
        }
    }

    /// The page layer's settings (what stays mapped, when memory moves) to change,
    /// when this strategy has one: TLSF, buddy, and the hybrid's large route (whose
    /// slabs are carved from it).
    ///
    /// ```
    /// use devpool::StrategySpec;
    /// let mut s: StrategySpec = "hybrid".parse().unwrap();
    /// s.pages_mut().unwrap().move_margin = 0.02;
    /// assert!("slab".parse::<StrategySpec>().unwrap().pages_mut().is_none());
    /// ```
    pub fn pages_mut(&mut self) -> Option<&mut devpool_tlsf::VmConfig> {
        match self {
            StrategySpec::Tlsf(c) => Some(&mut c.pages),
            StrategySpec::Buddy(c) => Some(&mut c.pages),
            StrategySpec::Hybrid(h) => match &mut h.large {
                LargeStrategy::Tlsf(c) => Some(&mut c.pages),
                LargeStrategy::Buddy(c) => Some(&mut c.pages),
            },
            _ => None,
        }
    }

    /// Build the allocator over `backend`.
    pub fn build(&self, backend: impl IntoBackend) -> Box<dyn Allocator> {
        let backend = backend.into_backend();
        match self {
            StrategySpec::Direct => Box::new(direct(backend)),
            StrategySpec::Slab(c) => Box::new(devpool_slab::slab(backend, c.clone())),
            StrategySpec::Fixed { block_size } => {
                Box::new(devpool_slab::fixed(backend, *block_size))
            }
            // Not `*c`: buddy settings are `Copy` today but need not stay so.
            StrategySpec::Buddy(c) => {
                Box::new(devpool_buddy::buddy(backend, BuddyConfig::clone(c)))
            }
            StrategySpec::Tlsf(c) => Box::new(devpool_tlsf::tlsf(backend, c.clone())),
            StrategySpec::Arena(c) => Box::new(devpool_arena::arena(backend, c.clone())),
            StrategySpec::Ring(c) => Box::new(devpool_ring::ring(backend, c.clone())),
            StrategySpec::Hybrid(c) => Box::new(devpool_hybrid::hybrid(backend, c.clone())),
        }
    }
}

impl Default for StrategySpec {
    /// The hybrid's training preset: what the C ABI and `devpool replay` use unless
    /// told otherwise.
    fn default() -> Self {
        StrategySpec::Hybrid(HybridConfig::training())
    }
}

impl FromStr for StrategySpec {
    type Err = UnknownStrategy;

    fn from_str(name: &str) -> Result<Self, UnknownStrategy> {
        STRATEGIES
            .iter()
            .find(|s| s.name == name)
            .map(Strategy::spec)
            .ok_or_else(|| UnknownStrategy {
                name: devpool_core::excerpt(name, 64).into_owned(),
            })
    }
}

impl fmt::Display for StrategySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_reads_back_as_itself() {
        for s in STRATEGIES {
            let spec: StrategySpec = s.name.parse().unwrap();
            assert_eq!(spec, s.spec());
            assert_eq!(spec.to_string(), s.name);
        }
        let mut names: Vec<&str> = STRATEGIES.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), STRATEGIES.len(), "names are unique");
    }

    #[test]
    fn settings_a_name_does_not_say_keep_the_name() {
        let mut spec: StrategySpec = "hybrid-inference".parse().unwrap();
        let h = spec.hybrid_mut().unwrap();
        h.small_max = 256 << 10;
        assert_eq!(spec.to_string(), "hybrid-inference");
        let fixed = StrategySpec::Fixed { block_size: 4096 };
        assert_eq!(fixed.to_string(), "fixed");
        assert!(StrategySpec::Direct.hybrid_mut().is_none());
    }

    #[test]
    fn unknown_names_say_which_exist() {
        let e = "nope".parse::<StrategySpec>().unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("unknown strategy `nope`"), "{msg}");
        assert!(
            msg.contains("hybrid-buddy") && msg.contains("fixed"),
            "{msg}"
        );
        let long = "x".repeat(10_000);
        assert!(long.parse::<StrategySpec>().unwrap_err().to_string().len() < 1000);
    }
}
