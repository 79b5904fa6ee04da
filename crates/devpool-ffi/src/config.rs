//! The configuration string: `key=value` pairs separated by `;`.
//!
//! | key | values | default |
//! |---|---|---|
//! | `strategy` | any name of [`devpool::STRATEGIES`] ([`StrategySpec`]) | `hybrid` |
//! | `backend` | [`BackendKind`]: `cuda` (the device's primary context) or `mock` (CPU stand-in, for tests) | `cuda` |
//! | `small_max` | bytes (`1M`, `512K`...): the hybrid router sends requests up to this size to its slab | the preset's (64 KiB; 1 MiB for `hybrid-buddy`) |
//! | `huge_min` | bytes, or `off`: the hybrid router gives requests from this size their own region | the preset's |
//! | `cache_floor` | bytes: unused mapped memory always kept (strategies with a page layer: the `-virtual` ones and the hybrids) | 32 MiB, at most 1/32 of the recent peak |
//! | `move_margin` | fraction 0..1: how far past the recent peak the pool grows before it moves unused memory instead | 0 |
//! | `move_slack` | fraction 0..1: how far that limit widens when memory keeps moving | 0 |
//! | `move_memory` | `on`, `off`: whether unused memory moves to where a block needs it | `on` |
//! | `map_batch` | count: pages mapped at once where a block lands on unmapped pages, room allowing (at most twice what the block needs) | 16 |
//! | `chunk_pages` | count: the most pages of one physical chunk | 128 (buddy: 8) |
//! | `chunk_divisor` | count: runs are cut into chunks of about this fraction of them | 16 |
//! | `chunk_min_pages` | count: the fewest pages of a chunk cut from a run | 1 |
//! | `burst` | `on`, `off`: whether growth past the most the pool has held, when it comes in bursts and the pool frees little meanwhile (a training step's first pass), maps ahead (twice the last, at most 1/8 of what is held), so that few of those allocations call the driver, for a little more memory at the peak | `off` |
//! | `reserve` | bytes: mapped at the pool's first large allocation and kept while fewer are allocated (as RMM's initial pool size): a job that knows its footprint maps it once instead of in every allocation that grows the pool; given back by a trim | 0 |
//! | `mock_capacity` | bytes: the device memory of each mock device | `141G` |
//! | `log` | `off`, `once` (the first message of each kind of misuse), `all` | `once` |
//!
//! Every chunk is one mapping, and the driver's cost grows with the mappings: fewer,
//! larger chunks (`chunk_divisor=4`, `chunk_min_pages=4`) cost fewer driver calls
//! and hold more memory where freed memory is reused in pieces (docs/BENCHMARKS.md).
//!
//! Sizes are integers with an optional binary suffix (`K`, `M`, `G`, `T`, with or
//! without `iB`), case-insensitive. Spaces around keys and values are ignored.

use devpool::{BackendKind, StrategySpec, UnknownBackend, UnknownStrategy, STRATEGIES};
use std::fmt;

/// How much misuse (bad frees, out of memory) is reported on standard error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogMode {
    /// Nothing; the message is still kept for `devpool_last_error`.
    Off,
    /// The first message of each kind, then silence.
    Once,
    /// Every message.
    All,
}

impl LogMode {
    const ALL: [LogMode; 3] = [LogMode::Off, LogMode::Once, LogMode::All];

    fn name(self) -> &'static str {
        match self {
            LogMode::Off => "off",
            LogMode::Once => "once",
            LogMode::All => "all",
        }
    }
}

/// Why a configuration string was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// An item without `=`.
    #[error("`{0}` is not a key=value pair")]
    NotAPair(String),
    /// A key of no setting.
    #[error("unknown key `{0}` (strategy, backend, small_max, huge_min, cache_floor, move_margin, move_slack, move_memory, map_batch, chunk_pages, chunk_divisor, chunk_min_pages, burst, reserve, mock_capacity, log)")]
    UnknownKey(String),
    /// A strategy name not in [`devpool::STRATEGIES`].
    #[error(transparent)]
    Strategy(#[from] UnknownStrategy),
    /// A backend other than `cuda` and `mock`.
    #[error(transparent)]
    Backend(#[from] UnknownBackend),
    /// A log mode other than `off`, `once` and `all`.
    #[error("unknown log mode `{0}` (off, once, all)")]
    LogMode(String),
    /// A value that is not a byte count.
    #[error("{key}: `{value}` is not a byte count (e.g. 1048576, 512K, 1M, 2GiB)")]
    NotASize {
        /// The key.
        key: String,
        /// The value, cut to 64 bytes.
        value: String,
    },
    /// `small_max` or `huge_min` with a strategy that is not a hybrid.
    #[error("small_max and huge_min apply to the hybrid strategies ({hybrids}), not `{strategy}`", hybrids = hybrid_names())]
    NotHybrid {
        /// The strategy named.
        strategy: &'static str,
    },
    /// `small_max` out of range.
    #[error("small_max {0} must lie in 256 B ..= 4 GiB")]
    SmallMax(usize),
    /// `huge_min` at or below `small_max`.
    #[error("huge_min {huge_min} must be above small_max {small_max}")]
    HugeBelowSmall {
        /// The huge route's threshold.
        huge_min: usize,
        /// The small route's threshold.
        small_max: usize,
    },
    /// A value that is not a fraction from 0 to 1.
    #[error("{key}: `{value}` is not a fraction from 0 to 1 (e.g. 0.02)")]
    NotAFraction {
        /// The key.
        key: String,
        /// The value, cut to 64 bytes.
        value: String,
    },
    /// A value that is not a whole number from 1 to 2^20.
    #[error("{key}: `{value}` is not a count from 1 to 1048576")]
    NotACount {
        /// The key.
        key: String,
        /// The value, cut to 64 bytes.
        value: String,
    },
    /// A value that is not `on` or `off`.
    #[error("{key}: `{value}` is not on or off")]
    NotAFlag {
        /// The key.
        key: String,
        /// The value, cut to 64 bytes.
        value: String,
    },
    /// A page-layer setting with a strategy that maps no pages.
    #[error("cache_floor, move_margin, move_slack, move_memory, reserve and the chunk keys apply to the strategies with a page layer ({paged}), not `{strategy}`", paged = paged_names())]
    NoPageLayer {
        /// The strategy named.
        strategy: &'static str,
    },
    /// A mock device of no memory.
    #[error("mock_capacity must be above zero")]
    NoCapacity,
}

/// The names of the strategies whose spec passes `test`, for messages.
fn names_where(test: impl Fn(&mut StrategySpec) -> bool) -> String {
    let names: Vec<&str> = STRATEGIES
        .iter()
        .filter(|s| test(&mut s.spec()))
        .map(|s| s.name)
        .collect();
    names.join(", ")
}

/// The names of the hybrid strategies, for messages.
fn hybrid_names() -> String {
    names_where(|s| s.hybrid().is_some())
}

/// The names of the strategies with a page layer, for messages.
fn paged_names() -> String {
    names_where(|s| s.pages_mut().is_some())
}

/// At most 64 bytes of a value echoed back in a message.
fn cut(value: &str) -> String {
    devpool_core::excerpt(value, 64).into_owned()
}

/// The settings every device's allocator is built from.
///
/// ```
/// use devpool_ffi::{BackendKind, Config};
/// let mut cfg = Config::default();
/// cfg.apply("strategy=slab; backend=mock").unwrap();
/// assert_eq!((cfg.strategy.name(), cfg.backend), ("slab", BackendKind::Mock));
/// assert!(cfg.apply("strategy=nonsense").is_err());
/// assert_eq!(cfg.strategy.name(), "slab"); // a rejected string changes nothing
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The strategy a name of [`devpool::STRATEGIES`] denotes; the thresholds below
    /// apply over it ([`Config::spec`]).
    pub strategy: StrategySpec,
    /// Where the memory comes from.
    pub backend: BackendKind,
    /// Hybrid strategies: the largest request sent to the slab.
    pub small_max: Option<usize>,
    /// Hybrid strategies: the smallest request given its own region (`usize::MAX`:
    /// never).
    pub huge_min: Option<usize>,
    /// Strategies with a page layer: unused mapped bytes always kept
    /// ([`VmConfig::cache_floor`](devpool::tlsf::VmConfig::cache_floor)).
    pub cache_floor: Option<usize>,
    /// Strategies with a page layer: how far past the recent peak of allocated
    /// bytes the pool may grow before it moves unused memory instead, as a fraction
    /// of that peak ([`VmConfig::move_margin`](devpool::tlsf::VmConfig::move_margin)):
    /// more memory for fewer driver calls.
    pub move_margin: Option<f64>,
    /// Strategies with a page layer: how far the limit widens when memory keeps
    /// moving, as a fraction of the recent peak
    /// ([`VmConfig::move_slack_max`](devpool::tlsf::VmConfig::move_slack_max)).
    pub move_slack: Option<f64>,
    /// Strategies with a page layer: whether unused memory moves to where a block
    /// needs it ([`VmConfig::move_memory`](devpool::tlsf::VmConfig::move_memory)).
    pub move_memory: Option<bool>,
    /// Strategies with a page layer: pages mapped at once where a block lands on
    /// unmapped pages, room allowing
    /// ([`VmConfig::map_batch_pages`](devpool::tlsf::VmConfig::map_batch_pages)).
    pub map_batch: Option<usize>,
    /// Strategies with a page layer: the most pages of one physical chunk
    /// ([`VmConfig::chunk_pages`](devpool::tlsf::VmConfig::chunk_pages)).
    pub chunk_pages: Option<usize>,
    /// Strategies with a page layer: a run is cut into chunks of about this
    /// fraction of it ([`VmConfig::chunk_divisor`](devpool::tlsf::VmConfig::chunk_divisor)):
    /// lower, fewer driver calls for less memory moved in fine pieces.
    pub chunk_divisor: Option<usize>,
    /// Strategies with a page layer: the fewest pages of a chunk cut from a run
    /// ([`VmConfig::chunk_min_pages`](devpool::tlsf::VmConfig::chunk_min_pages)).
    pub chunk_min_pages: Option<usize>,
    /// Strategies with a page layer: whether growth in bursts maps ahead
    /// ([`VmConfig::burst_ops`](devpool::tlsf::VmConfig::burst_ops); off sets it to 0,
    /// on to [`BURST_ON`](devpool::tlsf::BURST_ON)).
    pub burst: Option<bool>,
    /// Strategies with a page layer: bytes mapped ahead at the first large
    /// allocation and kept ([`VmConfig::reserve`](devpool::tlsf::VmConfig::reserve)).
    pub reserve: Option<usize>,
    /// Mock backend: bytes of memory per device.
    pub mock_capacity: u64,
    /// How much misuse is reported on standard error.
    pub log: LogMode,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            strategy: StrategySpec::default(),
            backend: BackendKind::Cuda,
            small_max: None,
            huge_min: None,
            cache_floor: None,
            move_margin: None,
            move_slack: None,
            move_memory: None,
            map_batch: None,
            chunk_pages: None,
            chunk_divisor: None,
            chunk_min_pages: None,
            burst: None,
            reserve: None,
            mock_capacity: 141 * devpool_core::GIB,
            log: LogMode::Once,
        }
    }
}

impl Config {
    /// Apply a configuration string over these settings: keys it names change, the
    /// others keep their value. On error nothing changes and the error says which
    /// pair is wrong.
    pub fn apply(&mut self, text: &str) -> Result<(), ConfigError> {
        let mut next = self.clone();
        for item in text.split(';') {
            let item = item.trim();
            if item.is_empty() {
                continue;
            }
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| ConfigError::NotAPair(cut(item)))?;
            next.set(key.trim(), value.trim())?;
        }
        next.validate()?;
        *self = next;
        Ok(())
    }

    /// The strategy to build: [`strategy`](Config::strategy) with the thresholds
    /// applied.
    pub fn spec(&self) -> StrategySpec {
        let mut spec = self.strategy.clone();
        if let Some(h) = spec.hybrid_mut() {
            if let Some(s) = self.small_max {
                *h = h.clone().small_max(s);
            }
            if let Some(m) = self.huge_min {
                *h = h.clone().huge_min(m);
            }
        }
        if let Some(p) = spec.pages_mut() {
            if let Some(f) = self.cache_floor {
                p.cache_floor = f;
            }
            if let Some(m) = self.move_margin {
                p.move_margin = m;
            }
            if let Some(m) = self.move_slack {
                p.move_slack_max = m;
            }
            if let Some(m) = self.move_memory {
                p.move_memory = m;
            }
            if let Some(n) = self.map_batch {
                p.map_batch_pages = n;
            }
            if let Some(n) = self.chunk_pages {
                p.chunk_pages = n;
            }
            if let Some(n) = self.chunk_divisor {
                p.chunk_divisor = n;
            }
            if let Some(n) = self.chunk_min_pages {
                p.chunk_min_pages = n;
            }
            if let Some(on) = self.burst {
                p.burst_ops = if on { devpool::tlsf::BURST_ON } else { 0 };
            }
            if let Some(n) = self.reserve {
                p.reserve = n;
            }
        }
        spec
    }

    fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        match key {
            "strategy" => self.strategy = value.parse::<StrategySpec>()?,
            "backend" => self.backend = value.parse::<BackendKind>()?,
            "small_max" => self.small_max = Some(parse_size(key, value)?),
            "huge_min" => {
                self.huge_min = Some(if value.eq_ignore_ascii_case("off") {
                    usize::MAX
                } else {
                    parse_size(key, value)?
                })
            }
            "cache_floor" => self.cache_floor = Some(parse_size(key, value)?),
            "move_margin" => self.move_margin = Some(parse_fraction(key, value)?),
            "move_slack" => self.move_slack = Some(parse_fraction(key, value)?),
            "move_memory" => self.move_memory = Some(parse_flag(key, value)?),
            "map_batch" => self.map_batch = Some(parse_count(key, value)?),
            "chunk_pages" => self.chunk_pages = Some(parse_count(key, value)?),
            "chunk_divisor" => self.chunk_divisor = Some(parse_count(key, value)?),
            "chunk_min_pages" => self.chunk_min_pages = Some(parse_count(key, value)?),
            "burst" => self.burst = Some(parse_flag(key, value)?),
            "reserve" => self.reserve = Some(parse_size(key, value)?),
            "mock_capacity" => self.mock_capacity = parse_size(key, value)? as u64,
            "log" => {
                self.log = LogMode::ALL
                    .into_iter()
                    .find(|m| m.name() == value)
                    .ok_or_else(|| ConfigError::LogMode(cut(value)))?
            }
            _ => return Err(ConfigError::UnknownKey(cut(key))),
        }
        Ok(())
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let hybrid = self.strategy.hybrid().is_some();
        if !hybrid && (self.small_max.is_some() || self.huge_min.is_some()) {
            return Err(ConfigError::NotHybrid {
                strategy: self.strategy.name(),
            });
        }
        let pages = self.cache_floor.is_some()
            || self.move_margin.is_some()
            || self.move_slack.is_some()
            || self.move_memory.is_some()
            || self.map_batch.is_some()
            || self.chunk_pages.is_some()
            || self.chunk_divisor.is_some()
            || self.chunk_min_pages.is_some()
            || self.burst.is_some()
            || self.reserve.is_some();
        if pages && self.strategy.clone().pages_mut().is_none() {
            return Err(ConfigError::NoPageLayer {
                strategy: self.strategy.name(),
            });
        }
        if let Some(s) = self.small_max {
            if !(256..=1 << 32).contains(&s) {
                return Err(ConfigError::SmallMax(s));
            }
            if let Some(h) = self.huge_min {
                if h <= s {
                    return Err(ConfigError::HugeBelowSmall {
                        huge_min: h,
                        small_max: s,
                    });
                }
            }
        }
        if self.mock_capacity == 0 {
            return Err(ConfigError::NoCapacity);
        }
        Ok(())
    }
}

impl fmt::Display for Config {
    /// The settings as a configuration string that [`Config::apply`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "strategy={};backend={}", self.strategy, self.backend)?;
        if let Some(s) = self.small_max {
            write!(f, ";small_max={s}")?;
        }
        match self.huge_min {
            Some(usize::MAX) => write!(f, ";huge_min=off")?,
            Some(h) => write!(f, ";huge_min={h}")?,
            None => {}
        }
        if let Some(c) = self.cache_floor {
            write!(f, ";cache_floor={c}")?;
        }
        if let Some(m) = self.move_margin {
            write!(f, ";move_margin={m}")?;
        }
        if let Some(m) = self.move_slack {
            write!(f, ";move_slack={m}")?;
        }
        if let Some(m) = self.move_memory {
            write!(f, ";move_memory={}", if m { "on" } else { "off" })?;
        }
        if let Some(on) = self.burst {
            write!(f, ";burst={}", if on { "on" } else { "off" })?;
        }
        for (key, v) in [
            ("map_batch", self.map_batch),
            ("chunk_pages", self.chunk_pages),
            ("chunk_divisor", self.chunk_divisor),
            ("chunk_min_pages", self.chunk_min_pages),
            ("reserve", self.reserve),
        ] {
            if let Some(n) = v {
                write!(f, ";{key}={n}")?;
            }
        }
        if self.backend == BackendKind::Mock {
            write!(f, ";mock_capacity={}", self.mock_capacity)?;
        }
        write!(f, ";log={}", self.log.name())
    }
}

/// Parse a fraction from 0 to 1.
fn parse_fraction(key: &str, value: &str) -> Result<f64, ConfigError> {
    match value.parse::<f64>() {
        Ok(x) if (0.0..=1.0).contains(&x) => Ok(x),
        _ => Err(ConfigError::NotAFraction {
            key: key.into(),
            value: cut(value),
        }),
    }
}

/// Parse a count from 1 to 2^20.
fn parse_count(key: &str, value: &str) -> Result<usize, ConfigError> {
    match value.parse::<usize>() {
        Ok(n) if (1..=1 << 20).contains(&n) => Ok(n),
        _ => Err(ConfigError::NotACount {
            key: key.into(),
            value: cut(value),
        }),
    }
}

/// Parse `on` or `off`.
fn parse_flag(key: &str, value: &str) -> Result<bool, ConfigError> {
    match value.to_ascii_lowercase().as_str() {
        "on" | "true" | "1" => Ok(true),
        "off" | "false" | "0" => Ok(false),
        _ => Err(ConfigError::NotAFlag {
            key: key.into(),
            value: cut(value),
        }),
    }
}

/// Parse a byte count: digits and an optional binary suffix.
fn parse_size(key: &str, value: &str) -> Result<usize, ConfigError> {
    let lower = value.to_ascii_lowercase();
    let body = lower
        .strip_suffix("ib")
        .or_else(|| lower.strip_suffix('b'))
        .unwrap_or(&lower);
    let (digits, shift) = match body.chars().last() {
        Some('k') => (&body[..body.len() - 1], 10),
        Some('m') => (&body[..body.len() - 1], 20),
        Some('g') => (&body[..body.len() - 1], 30),
        Some('t') => (&body[..body.len() - 1], 40),
        _ => (body, 0),
    };
    let bad = || ConfigError::NotASize {
        key: key.to_string(),
        value: cut(value),
    };
    let n: usize = digits.trim().parse().map_err(|_| bad())?;
    n.checked_mul(1usize << shift).ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_suffixes() {
        assert_eq!(parse_size("k", "4096"), Ok(4096));
        assert_eq!(parse_size("k", "512K"), Ok(512 << 10));
        assert_eq!(parse_size("k", "1m"), Ok(1 << 20));
        assert_eq!(parse_size("k", "2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("k", "3MB"), Ok(3 << 20));
        assert_eq!(parse_size("k", "1T"), Ok(1 << 40));
        for bad in [
            "",
            "M",
            "x",
            "-1",
            "1.5M",
            "99999999999999999999",
            "16777216T",
        ] {
            assert!(parse_size("k", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn apply_sets_named_keys_and_keeps_the_rest() {
        let mut c = Config::default();
        c.apply(" backend = mock ;; log=off ").unwrap();
        assert_eq!(c.backend, BackendKind::Mock);
        assert_eq!(c.log, LogMode::Off);
        assert_eq!(c.strategy, StrategySpec::default());
        c.apply("small_max=256K;huge_min=off").unwrap();
        assert_eq!(
            (c.small_max, c.huge_min),
            (Some(256 << 10), Some(usize::MAX))
        );
        c.apply("").unwrap();
        assert_eq!(c.small_max, Some(256 << 10));
    }

    #[test]
    fn rejected_strings_change_nothing() {
        let mut c = Config::default();
        let before = c.clone();
        for bad in [
            "strategy",
            "strategy=best",
            "backend=opencl",
            "colour=blue",
            "log=loud",
            "strategy=slab;small_max=1M",
            "small_max=1",
            "small_max=8G",
            "small_max=1M;huge_min=512K",
            "mock_capacity=0",
            "backend=mock;strategy=nope",
            "strategy=slab;move_margin=0.1",
            "strategy=arena;cache_floor=1M",
            "move_margin=2",
            "move_margin=-0.1",
            "move_margin=NaN",
            "move_memory=maybe",
            "burst=sometimes",
            "strategy=slab;burst=off",
            "cache_floor=lots",
            "chunk_pages=0",
            "chunk_divisor=-1",
            "chunk_min_pages=1.5",
            "strategy=slab;chunk_pages=4",
            "reserve=plenty",
            "strategy=slab;reserve=1G",
        ] {
            assert!(c.apply(bad).is_err(), "{bad}");
            assert_eq!(c, before, "{bad}");
        }
    }

    #[test]
    fn display_reads_back() {
        for text in [
            "",
            "backend=mock;mock_capacity=1G",
            "strategy=hybrid-inference;small_max=64K;huge_min=256M;log=all",
            "strategy=hybrid;huge_min=off",
            "strategy=tlsf-virtual;backend=mock",
            "strategy=buddy-virtual;cache_floor=64M;move_margin=0.125;move_memory=off",
            "chunk_pages=32;chunk_divisor=4;chunk_min_pages=2;map_batch=8",
            "strategy=tlsf-virtual;reserve=40GiB",
            "strategy=hybrid;burst=on",
        ] {
            let mut c = Config::default();
            c.apply(text).unwrap();
            let mut d = Config::default();
            d.apply(&c.to_string()).unwrap();
            assert_eq!(c, d, "{text}");
        }
    }

    #[test]
    fn page_settings_reach_the_page_layer() {
        let mut c = Config::default();
        c.apply("cache_floor=8M;move_margin=0.03;move_slack=0.01;move_memory=off")
            .unwrap();
        let mut spec = c.spec();
        let p = spec.pages_mut().expect("the hybrid has a page layer");
        assert_eq!(
            (
                p.cache_floor,
                p.move_margin,
                p.move_slack_max,
                p.move_memory
            ),
            (8 << 20, 0.03, 0.01, false)
        );
        c.apply("chunk_pages=32;chunk_divisor=4;chunk_min_pages=2")
            .unwrap();
        let mut spec = c.spec();
        let p = spec.pages_mut().unwrap();
        assert_eq!(
            (p.chunk_pages, p.chunk_divisor, p.chunk_min_pages),
            (32, 4, 2)
        );
        c.apply("reserve=3G").unwrap();
        assert_eq!(c.spec().pages_mut().unwrap().reserve, 3 << 30);
        // Bursts: off unless asked for, on on request, off again on request.
        assert_eq!(c.spec().pages_mut().unwrap().burst_ops, 0);
        c.apply("burst=on").unwrap();
        assert_eq!(
            c.spec().pages_mut().unwrap().burst_ops,
            devpool::tlsf::BURST_ON
        );
        c.apply("burst=off").unwrap();
        assert_eq!(c.spec().pages_mut().unwrap().burst_ops, 0);
        // Without the keys, the strategy's own settings stay.
        let mut plain = Config::default().spec();
        let q = plain.pages_mut().unwrap();
        assert_eq!(
            q.move_memory,
            devpool::tlsf::VmConfig::default().move_memory
        );
    }

    #[test]
    fn every_strategy_is_accepted() {
        for s in devpool::STRATEGIES {
            let mut c = Config::default();
            c.apply(&format!("strategy={}", s.name)).unwrap();
            assert_eq!(c.strategy.name(), s.name);
        }
    }
}
