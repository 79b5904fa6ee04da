//! [`KeyTable`]: the lock-free table that maps a stream to its pool's slot.
//!
//! Open addressing over a fixed array of atomic keys. A key is claimed once, by
//! compare-and-swap on the first empty slot of its probe sequence, and never removed,
//! so a lookup is plain loads and stops at the first empty slot. Every thread probes
//! the same sequence for a key, so two threads claiming the same key meet on the same
//! slot: one wins, the other sees the key and takes that slot too. The loom model
//! test at the bottom checks this under every interleaving.

#[cfg(loom)]
use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU64, Ordering};

/// The reserved key of an empty slot.
pub(crate) const EMPTY: u64 = u64::MAX;

/// The slot [`KeyTable::slot_of`] gives for a key never claimed: past the end of
/// every table.
pub(crate) const NO_SLOT: usize = usize::MAX;

/// A fixed table of keys; see the [module docs](self).
pub(crate) struct KeyTable {
    keys: Box<[AtomicU64]>,
}

impl KeyTable {
    /// A table of `slots` slots (a power of two). At most half are ever claimed, so
    /// probe sequences stay short.
    pub(crate) fn new(slots: usize) -> Self {
        debug_assert!(slots.is_power_of_two());
        KeyTable {
            keys: (0..slots).map(|_| AtomicU64::new(EMPTY)).collect(),
        }
    }

    /// Slots in all.
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    #[inline]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & (self.keys.len() - 1)
    }

    /// The slot of `key`, if it was claimed (for the tests; callers use
    /// [`slot_of`](Self::slot_of)).
    #[cfg(test)]
    pub(crate) fn find(&self, key: u64) -> Option<usize> {
        let i = self.slot_of(key);
        (i != NO_SLOT).then_some(i)
    }

    /// The slot of `key`, or [`NO_SLOT`] if it was not claimed: a plain index, so
    /// that a caller indexing a table of its own with `get` tests it once, with its
    /// bound check, not first as an `Option`.
    #[inline]
    pub(crate) fn slot_of(&self, key: u64) -> usize {
        let i = self.home(key);
        // Most keys sit in their home slot: one load.
        if self.keys[i].load(Ordering::Acquire) == key {
            return i;
        }
        self.probe(key, i)
    }

    /// The slot of `key` if it sits in its home slot (else it may sit further on:
    /// [`slot_of`](Self::slot_of) looks). One load and no call, for a fast path
    /// that leaves every other case to a slow one. An `Option`, not [`NO_SLOT`]:
    /// the caller branches on the key, so its next load does not wait for this one.
    #[inline]
    pub(crate) fn home_slot(&self, key: u64) -> Option<usize> {
        let i = self.home(key);
        (self.keys[i].load(Ordering::Acquire) == key).then_some(i)
    }

    /// [`slot_of`](Self::slot_of) past the home slot `i`.
    #[cold]
    fn probe(&self, key: u64, mut i: usize) -> usize {
        let mask = self.keys.len() - 1;
        for _ in 0..self.keys.len() {
            match self.keys[i].load(Ordering::Acquire) {
                k if k == key => return i,
                EMPTY => return NO_SLOT,
                _ => i = (i + 1) & mask,
            }
        }
        NO_SLOT
    }

    /// The slot of `key`, claiming one if needed; `None` when half the table is taken
    /// along its probe sequence. `key` must not be [`EMPTY`].
    #[inline]
    pub(crate) fn claim(&self, key: u64) -> Option<usize> {
        debug_assert_ne!(key, EMPTY);
        let mask = self.keys.len() - 1;
        let mut i = self.home(key);
        for _ in 0..self.keys.len() / 2 {
            let k = self.keys[i].load(Ordering::Acquire);
            if k == key {
                return Some(i);
            }
            if k == EMPTY {
                match self.keys[i].compare_exchange(EMPTY, key, Ordering::AcqRel, Ordering::Acquire)
                {
                    Ok(_) => return Some(i),
                    Err(now) if now == key => return Some(i),
                    Err(_) => {}
                }
            }
            i = (i + 1) & mask;
        }
        None
    }

    /// The key in slot `i` (`EMPTY` if none).
    #[inline]
    pub(crate) fn key(&self, i: usize) -> u64 {
        self.keys[i].load(Ordering::Acquire)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn keys_get_one_slot_each_and_lookups_find_them() {
        let t = KeyTable::new(16);
        let slots: Vec<usize> = (1..=8).map(|k| t.claim(k).unwrap()).collect();
        let mut uniq = slots.clone();
        uniq.sort();
        uniq.dedup();
        assert_eq!(uniq.len(), 8);
        for (k, s) in (1..=8).zip(&slots) {
            assert_eq!(t.find(k), Some(*s));
            assert_eq!(t.claim(k), Some(*s));
            assert_eq!(t.key(*s), k);
        }
        assert_eq!(t.find(99), None);
    }

    #[test]
    fn threads_claiming_the_same_keys_agree() {
        let t = std::sync::Arc::new(KeyTable::new(64));
        let runs: Vec<Vec<Option<usize>>> = (0..4)
            .map(|_| {
                let t = t.clone();
                std::thread::spawn(move || (0..32u64).map(|k| t.claim(k * 7919)).collect())
            })
            .map(|h| h.join().unwrap())
            .collect();
        assert!(
            runs.iter().all(|r| r == &runs[0]),
            "every thread saw the same slots"
        );
        let mut slots: Vec<usize> = runs[0].iter().map(|s| s.unwrap()).collect();
        slots.sort();
        slots.dedup();
        assert_eq!(slots.len(), 32);
    }
}

/// Model test with loom: `RUSTFLAGS="--cfg loom" cargo test -p devpool-core --lib --release loom`.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    /// Two threads claim the same key while a third claims another that probes into
    /// the same slots: the same key always gets one slot, different keys different
    /// slots, and a lookup after the claims finds each.
    #[test]
    fn concurrent_claims_agree() {
        loom::model(|| {
            // Four slots: keys collide often, so the probing paths are exercised.
            let t = Arc::new(KeyTable::new(4));
            let (a, b) = (1u64, 5u64);
            let h1 = {
                let t = t.clone();
                thread::spawn(move || t.claim(a))
            };
            let h2 = {
                let t = t.clone();
                thread::spawn(move || t.claim(a))
            };
            let h3 = {
                let t = t.clone();
                thread::spawn(move || t.claim(b))
            };
            let (s1, s2, s3) = (h1.join().unwrap(), h2.join().unwrap(), h3.join().unwrap());
            assert_eq!(s1, s2, "one key, one slot");
            assert!(s1.is_some() && s3.is_some());
            assert_ne!(s1, s3, "two keys, two slots");
            assert_eq!(t.find(a), s1);
            assert_eq!(t.find(b), s3);
        });
    }

    /// A lookup racing a claim sees either nothing or the claimed slot, never another.
    #[test]
    fn lookup_during_claim() {
        loom::model(|| {
            let t = Arc::new(KeyTable::new(4));
            let h = {
                let t = t.clone();
                thread::spawn(move || t.claim(3))
            };
            let seen = t.find(3);
            let claimed = h.join().unwrap();
            assert!(seen.is_none() || seen == claimed);
        });
    }
}
