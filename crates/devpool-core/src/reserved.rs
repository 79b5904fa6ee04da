//! [`ReservedRanges`]: the book of address ranges a backend reserved, shared by the
//! CUDA backend and the mock so both check virtual-memory calls by one rule.

use std::collections::BTreeMap;

/// Reserved address ranges, start to size. Ranges never overlap (the backend that
/// reserves them makes sure), so the range holding an address is the last one that
/// starts at or below it.
///
/// ```
/// use devpool_core::ReservedRanges;
/// let mut r = ReservedRanges::default();
/// r.insert(1 << 20, 4 << 20);
/// assert!(r.covers(2 << 20, 5 << 20));
/// assert!(!r.covers(2 << 20, 6 << 20), "runs past the end");
/// assert!(!r.remove(1 << 20, 1 << 20), "not the size it was reserved with");
/// assert!(r.remove(1 << 20, 4 << 20));
/// assert!(!r.covers(2 << 20, 3 << 20));
/// ```
#[derive(Debug, Default, Clone)]
pub struct ReservedRanges(BTreeMap<u64, usize>);

impl ReservedRanges {
    /// Book the range `[start, start + size)`.
    pub fn insert(&mut self, start: u64, size: usize) {
        self.0.insert(start, size);
    }

    /// Whether `[start, start + size)` is a range booked exactly so.
    pub fn is_range(&self, start: u64, size: usize) -> bool {
        self.0.get(&start) == Some(&size)
    }

    /// Forget the range `[start, start + size)`; false (and nothing changes) when no
    /// range was booked exactly so.
    pub fn remove(&mut self, start: u64, size: usize) -> bool {
        if !self.is_range(start, size) {
            return false;
        }
        self.0.remove(&start);
        true
    }

    /// Whether `[start, end)` lies inside one booked range.
    pub fn covers(&self, start: u64, end: u64) -> bool {
        self.0
            .range(..=start)
            .next_back()
            .is_some_and(|(&s, &len)| end <= s.saturating_add(len as u64))
    }
}

impl IntoIterator for ReservedRanges {
    type Item = (u64, usize);
    type IntoIter = std::collections::btree_map::IntoIter<u64, usize>;

    /// Every booked range, start and size, in address order.
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}
