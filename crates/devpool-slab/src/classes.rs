//! Size classes: the class of a request in a few bit operations, and the slab
//! layout of each class.
//!
//! Sizes are counted in 256-byte units. Geometric classes with `2^s` classes per
//! power of two are the units `1, 2, ..., 2^s`, then for each higher power of two
//! `2^e < u <= 2^(e+1)` the `2^s` sizes `(m + 1) << (e - s)`, `m` in `2^s..2^(s+1)`:
//! the class index of `u` is `((e - s) << s) + ((u - 1) >> (e - s))`, as in TLSF.

use crate::config::{ClassSpec, SlabConfig, MAX_CLASS_BYTES, MAX_SLAB_BYTES};
use crate::isolated::Isolated;
use crate::MIN_SLOT;
use devpool_core::{Error, Request, Result};

const UNIT_SHIFT: u32 = MIN_SLOT.trailing_zeros();
/// Mantissa bits of the geometric buckets that index a custom list's table.
const TABLE_SUB: u32 = 3;

/// Round a requested slot size up to a multiple of 256 B, within the class limits.
pub(crate) fn round_slot(size: usize) -> usize {
    let s = size.clamp(MIN_SLOT, MAX_CLASS_BYTES);
    (s + MIN_SLOT - 1) & !(MIN_SLOT - 1)
}

/// The geometric bucket of `u` units (`u >= 1`) with `2^sub` buckets per power of two.
#[inline]
fn geo_index(u: usize, sub: u32) -> usize {
    if u <= 1 << sub {
        return u - 1;
    }
    let v = u - 1;
    let e = usize::BITS - 1 - v.leading_zeros();
    let shift = e - sub;
    ((shift as usize) << sub) + (v >> shift)
}

/// The largest unit count in geometric bucket `i`.
fn geo_units(i: usize, sub: u32) -> usize {
    let lin = 1usize << sub;
    if i < lin {
        return i + 1;
    }
    let shift = i / lin - 1;
    let m = i - shift * lin;
    (m + 1) << shift
}

/// The slot sizes a class specification makes.
pub(crate) fn class_sizes(spec: &ClassSpec) -> Vec<usize> {
    match spec {
        ClassSpec::Geometric { per_pow2_log, max } => {
            let last = geo_index(max.div_ceil(MIN_SLOT), *per_pow2_log);
            (0..=last)
                .map(|i| geo_units(i, *per_pow2_log) << UNIT_SHIFT)
                .collect()
        }
        ClassSpec::List(v) => v.clone(),
    }
}

/// How a request size becomes a class index.
#[derive(Debug)]
enum Lookup {
    /// The class index is the geometric bucket.
    Geometric { sub: u32 },
    /// A custom list: the first class at or above each geometric bucket's smallest
    /// size, then a forward step while the class is too small.
    Table { table: Isolated<u32> },
}

/// One class: its slot size and slab layout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ClassInfo {
    /// Bytes per slot.
    pub size: usize,
    /// The alignment every slot of the class has.
    pub align: usize,
    /// Bytes per slab (one backend region).
    pub slab_bytes: usize,
    /// Slots per slab, when the region is aligned as expected.
    pub slots: u32,
}

/// Requests up to this many bytes find their class in one table read.
const DIRECT_MAX: usize = 64 << 10;

/// Every class of a pool and the lookup from request to class.
#[derive(Debug)]
pub(crate) struct Classes {
    /// The class of each unit count `0..=direct_max / 256` (0 for a zero-byte request).
    direct: Isolated<u8>,
    /// The largest request `direct` covers.
    direct_max: usize,
    lookup: Lookup,
    /// The classes, smallest first.
    pub info: Isolated<ClassInfo>,
    /// The largest request served.
    pub max_size: usize,
    /// Empty slabs per class kept by the depot.
    pub keep_empty: usize,
}

impl Classes {
    /// The classes of `cfg` over a backend whose regions are aligned to `region_align`.
    pub fn new(cfg: &SlabConfig, region_align: usize) -> Self {
        let sizes = class_sizes(&cfg.spec);
        let unit = cfg
            .min_slab_bytes
            .clamp(4096, MAX_SLAB_BYTES)
            .next_power_of_two();
        let max_slab = cfg.max_slab_bytes.clamp(unit, MAX_SLAB_BYTES);
        let min_slots = cfg.min_slots.clamp(1, 4096);
        let region_align = region_align.max(MIN_SLOT);
        let region_align = if region_align.is_power_of_two() {
            region_align
        } else {
            MIN_SLOT
        };
        let info: Vec<ClassInfo> = sizes
            .iter()
            .map(|&size| {
                let mut want = unit.max(size.saturating_mul(min_slots));
                if want > max_slab {
                    want = (max_slab / size).max(1) * size;
                }
                let slab_bytes = want.div_ceil(unit) * unit;
                ClassInfo {
                    size,
                    align: (1usize << size.trailing_zeros()).min(region_align),
                    slab_bytes,
                    slots: (slab_bytes / size) as u32,
                }
            })
            .collect();
        let max_size = info.last().map_or(MIN_SLOT, |c| c.size);
        let lookup = match cfg.spec {
            ClassSpec::Geometric { per_pow2_log, .. } => Lookup::Geometric { sub: per_pow2_log },
            ClassSpec::List(_) => {
                let buckets = geo_index(max_size >> UNIT_SHIFT, TABLE_SUB) + 1;
                let mut c = 0usize;
                let table = (0..buckets)
                    .map(|b| {
                        let lowest = if b == 0 {
                            1
                        } else {
                            geo_units(b - 1, TABLE_SUB) + 1
                        };
                        while info[c].size >> UNIT_SHIFT < lowest {
                            c += 1;
                        }
                        c as u32
                    })
                    .collect();
                Lookup::Table {
                    table: Isolated::new(table),
                }
            }
        };
        let mut classes = Classes {
            direct: Isolated::new(Vec::new()),
            direct_max: 0,
            lookup,
            info: Isolated::new(info),
            max_size,
            keep_empty: cfg.keep_empty,
        };
        // At most 256 units: at most 256 classes of distinct multiples of 256 B below.
        let direct_max = max_size.min(DIRECT_MAX);
        classes.direct = Isolated::new(
            (0..=direct_max >> UNIT_SHIFT)
                .map(|u| classes.index((u << UNIT_SHIFT).max(1)) as u8)
                .collect(),
        );
        classes.direct_max = direct_max;
        classes
    }

    /// The class of `size` bytes (`1 <= size <= max_size`).
    #[inline]
    fn index(&self, size: usize) -> usize {
        let u = (size + MIN_SLOT - 1) >> UNIT_SHIFT;
        match &self.lookup {
            Lookup::Geometric { sub } => geo_index(u, *sub),
            Lookup::Table { table } => {
                let mut c = table[geo_index(u, TABLE_SUB)] as usize;
                while self.info[c].size < size {
                    c += 1;
                }
                c
            }
        }
    }

    /// The class of a request the fast path serves: at most the largest class, at
    /// the default alignment. `None` for anything else ([`class_for`](Self::class_for)
    /// then says why, or finds an aligned class).
    #[inline]
    pub fn class_fast(&self, req: &Request) -> Option<usize> {
        if req.align > MIN_SLOT || !req.align.is_power_of_two() {
            return None;
        }
        if req.size <= self.direct_max {
            let u = (req.size + MIN_SLOT - 1) >> UNIT_SHIFT;
            return self.direct.get(u).map(|&c| c as usize);
        }
        let size = req.size;
        (size <= self.max_size).then(|| self.index(size))
    }

    /// The class that serves `req`: the smallest one large enough whose slots are
    /// aligned as asked.
    #[inline]
    pub fn class_for(&self, req: &Request) -> Result<usize> {
        let size = req.effective_size();
        if size > self.max_size {
            return Err(Error::TooLarge {
                size: req.size,
                max: self.max_size,
            });
        }
        if req.align.is_power_of_two() && req.align <= MIN_SLOT {
            return Ok(self.index(size));
        }
        self.class_aligned(size, req)
    }

    #[cold]
    fn class_aligned(&self, size: usize, req: &Request) -> Result<usize> {
        let align = req.effective_align()?;
        let refused = Error::InvalidAlignment { align: req.align };
        // A slot aligned to `align` has a size that is a multiple of it.
        let rounded = devpool_core::align_up(size, align).ok_or(refused.clone())?;
        if rounded > self.max_size {
            return Err(refused);
        }
        (self.index(rounded)..self.info.len())
            .find(|&c| self.info[c].align >= align)
            .ok_or(refused)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brute(classes: &Classes, size: usize, align: usize) -> Option<usize> {
        (0..classes.info.len())
            .find(|&c| classes.info[c].size >= size.max(1) && classes.info[c].align >= align)
    }

    #[test]
    fn lookup_matches_a_search_of_the_class_list() {
        let g = 2 << 20;
        for cfg in [
            SlabConfig::default(),
            SlabConfig::geometric(8, 16 << 20),
            SlabConfig::geometric(1, 1 << 30),
            SlabConfig::custom([300, 5000, 5001, 70_000, 3 << 20]),
            SlabConfig::fixed(1000),
        ] {
            let classes = Classes::new(&cfg, g);
            let max = classes.max_size;
            let mut sizes: Vec<usize> = (0..4096).collect();
            for c in classes.info.iter() {
                sizes.extend([c.size - 1, c.size, c.size + 1]);
            }
            sizes.extend((0..2000).map(|i| (max as u64 * i / 2000) as usize));
            for size in sizes.into_iter().filter(|&s| s <= max) {
                for align in [256usize, 512, 4096, 1 << 16, 1 << 21] {
                    let req = Request::new(size).with_align(align);
                    let got = classes.class_for(&req).ok();
                    assert_eq!(got, brute(&classes, size, align), "{cfg:?} {size} {align}");
                    if align <= MIN_SLOT {
                        assert_eq!(classes.class_fast(&req), got, "fast: {cfg:?} {size}");
                    }
                }
            }
            assert_eq!(classes.class_fast(&Request::new(max + 1)), None);
            assert_eq!(classes.class_fast(&Request::new(100).with_align(3)), None);
            let too_big = Request::new(max + 1);
            assert!(matches!(
                classes.class_for(&too_big),
                Err(Error::TooLarge { .. })
            ));
        }
    }

    #[test]
    fn geometric_rounding_stays_within_a_step() {
        for per in [4usize, 8] {
            let classes = Classes::new(&SlabConfig::geometric(per, 64 << 20), 2 << 20);
            let sizes: Vec<usize> = classes.info.iter().map(|c| c.size).collect();
            for w in sizes.windows(2) {
                assert!(w[0] < w[1]);
                // Consecutive classes differ by at most 1/per of the larger power of two.
                let step = (w[0].next_power_of_two() / per).max(MIN_SLOT);
                assert!(w[1] - w[0] <= step, "{w:?}");
            }
        }
    }

    #[test]
    fn slab_layout_follows_the_policy() {
        let cfg = SlabConfig::geometric(4, 1 << 30).max_slab_bytes(64 << 20);
        let classes = Classes::new(&cfg, 2 << 20);
        for c in classes.info.iter() {
            assert!(c.slab_bytes.is_multiple_of(2 << 20));
            assert!(c.slots >= 1);
            assert!(c.slots as usize * c.size <= c.slab_bytes);
            if c.size * 8 <= 64 << 20 {
                assert!(c.slots >= 8, "{c:?}");
            }
            if c.size > 64 << 20 {
                assert_eq!(c.slots, 1, "{c:?}");
            }
            assert!(c.align >= MIN_SLOT && c.size.is_multiple_of(c.align));
        }
    }
}
