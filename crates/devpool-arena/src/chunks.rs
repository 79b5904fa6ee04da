//! The chunks a pool holds, in numbered slots.
//!
//! The bump path reads a chunk's address and size from its slot's [`Desc`] without a
//! lock; everything else here runs under the pool's lock. A slot's chunk never
//! changes while the cursor may point at it in the current epoch: new chunks go into
//! empty slots, spares given back mid-epoch were never the cursor's in this epoch, and
//! the slots are rearranged only when a new epoch begins.

use std::sync::atomic::{AtomicU64, Ordering};

/// A chunk's address and size, for the lock-free bump path.
#[derive(Debug, Default)]
pub struct Desc {
    base: AtomicU64,
    size: AtomicU64,
}

impl Desc {
    /// Publish a chunk (or clear the slot with zeros).
    #[inline]
    pub fn set(&self, base: u64, size: u64) {
        self.base.store(base, Ordering::Release);
        self.size.store(size, Ordering::Release);
    }

    /// The chunk's address and size.
    #[inline]
    pub fn get(&self) -> (u64, u64) {
        (
            self.base.load(Ordering::Acquire),
            self.size.load(Ordering::Acquire),
        )
    }
}

/// One region taken from the backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// Device address.
    pub base: u64,
    /// Bytes.
    pub size: u64,
    /// The last epoch that bumped in it (0: none yet).
    pub used_in: u64,
}

impl Chunk {
    /// Where a block of `size` bytes at `align` goes in this chunk when it is empty:
    /// `(start, end)` offsets, or `None` when it does not fit.
    #[inline]
    pub fn place(&self, size: u64, align: u64) -> Option<(u64, u64)> {
        let start = self.base.next_multiple_of(align) - self.base;
        let end = start.checked_add(size)?;
        (end <= self.size).then_some((start, end))
    }
}

/// The slots.
#[derive(Debug)]
pub struct Chunks {
    slots: Vec<Option<Chunk>>,
    held: usize,
    bytes: u64,
    sorted: bool,
}

impl Chunks {
    /// `n` empty slots.
    pub fn new(n: usize) -> Self {
        Chunks {
            slots: vec![None; n],
            held: 0,
            bytes: 0,
            sorted: true,
        }
    }

    /// Chunks held.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The chunk in `slot`, to change its bookkeeping.
    pub fn get_mut(&mut self, slot: usize) -> Option<&mut Chunk> {
        self.slots.get_mut(slot)?.as_mut()
    }

    /// Every chunk with its slot.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &Chunk)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.as_ref().map(|c| (i, c)))
    }

    /// An empty slot.
    pub fn free_slot(&self) -> Option<usize> {
        self.slots.iter().position(Option::is_none)
    }

    /// Put `chunk` into the empty `slot` and publish it.
    pub fn insert(&mut self, slot: usize, chunk: Chunk, descs: &[Desc]) {
        debug_assert!(self.slots[slot].is_none());
        descs[slot].set(chunk.base, chunk.size);
        self.slots[slot] = Some(chunk);
        self.held += 1;
        self.bytes += chunk.size;
        self.sorted = false;
    }

    /// Take the chunk out of `slot`.
    pub fn remove(&mut self, slot: usize, descs: &[Desc]) -> Option<Chunk> {
        let c = self.slots.get_mut(slot)?.take()?;
        descs[slot].set(0, 0);
        self.held -= 1;
        self.bytes -= c.size;
        self.sorted = false;
        Some(c)
    }

    /// The smallest chunk not used in `epoch` that holds `size` bytes at `align`.
    pub fn best_spare(&self, epoch: u64, size: u64, align: u64) -> Option<usize> {
        self.iter()
            .filter(|(_, c)| c.used_in != epoch && c.place(size, align).is_some())
            .min_by_key(|(_, c)| c.size)
            .map(|(i, _)| i)
    }

    /// The slots of chunks not used in `epoch`.
    pub fn spares(&self, epoch: u64) -> Vec<usize> {
        self.iter()
            .filter(|(_, c)| c.used_in != epoch)
            .map(|(i, _)| i)
            .collect()
    }

    /// The slots of every chunk but the `keep` largest.
    pub fn beyond(&self, keep: usize) -> Vec<usize> {
        let mut v: Vec<(usize, u64)> = self.iter().map(|(i, c)| (i, c.size)).collect();
        v.sort_by_key(|&(_, size)| std::cmp::Reverse(size));
        v.into_iter().skip(keep).map(|(i, _)| i).collect()
    }

    /// Move the chunks into the first slots, largest first, and publish them. Only
    /// when a new epoch begins, before the cursor points anywhere.
    pub fn arrange(&mut self, descs: &[Desc]) {
        if self.sorted {
            return;
        }
        let mut all: Vec<Chunk> = self.slots.iter_mut().filter_map(Option::take).collect();
        all.sort_by_key(|c| std::cmp::Reverse(c.size));
        for (i, slot) in self.slots.iter_mut().enumerate() {
            *slot = all.get(i).copied();
            match slot {
                Some(c) => descs[i].set(c.base, c.size),
                None => descs[i].set(0, 0),
            }
        }
        self.sorted = true;
    }

    /// Whether `ptr` lies in one of the chunks.
    pub fn owns(&self, ptr: u64) -> bool {
        self.iter()
            .any(|(_, c)| ptr >= c.base && ptr - c.base < c.size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn descs(n: usize) -> Vec<Desc> {
        (0..n).map(|_| Desc::default()).collect()
    }

    #[test]
    fn spares_best_fit_and_arrange() {
        let d = descs(4);
        let mut c = Chunks::new(4);
        for (i, size) in [(0usize, 4096u64), (1, 1 << 20), (2, 8192)] {
            c.insert(
                i,
                Chunk {
                    base: 0x10_0000 * (i as u64 + 1),
                    size,
                    used_in: 0,
                },
                &d,
            );
        }
        assert_eq!(c.best_spare(1, 5000, 256), Some(2));
        c.get_mut(2).unwrap().used_in = 1;
        assert_eq!(c.best_spare(1, 5000, 256), Some(1));
        assert_eq!(c.best_spare(1, 2 << 20, 256), None);
        assert_eq!(c.spares(1), vec![0, 1]);
        assert_eq!(c.beyond(1), vec![2, 0]);
        c.arrange(&d);
        let sizes: Vec<u64> = c.iter().map(|(_, ch)| ch.size).collect();
        assert_eq!(sizes, vec![1 << 20, 8192, 4096]);
        assert_eq!(d[0].get().1, 1 << 20);
        assert_eq!(d[3].get(), (0, 0));
        assert!(c.owns(0x20_0000 + 100));
        assert!(!c.owns(0x40_0000));
        let total = c.bytes();
        let gone = c.remove(0, &d).unwrap();
        assert_eq!(c.bytes(), total - gone.size);
        assert_eq!(c.held(), 2);
        assert_eq!(c.free_slot(), Some(0));
    }

    #[test]
    fn placement_honours_alignment() {
        let ch = Chunk {
            base: 0x1100,
            size: 0x10000,
            used_in: 0,
        };
        assert_eq!(ch.place(256, 256), Some((0, 256)));
        assert_eq!(ch.place(256, 0x1000), Some((0xF00, 0x1000)));
        assert_eq!(ch.place(0x10000, 0x1000), None);
    }
}
