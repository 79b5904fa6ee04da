//! [`Recent`]: the addresses a trace freed lately.

use crate::hash::AddrMap;

/// Addresses freed lately, to tell a double free from a free of an address the trace
/// never allocated. Two generations of at least [`RECENT`] addresses each: memory
/// stays bounded however long the trace, and a double free is recognised when its
/// first free is among the last [`RECENT`] frees at least.
#[derive(Default)]
pub(crate) struct Recent {
    new: AddrMap<()>,
    old: AddrMap<()>,
}

/// See [`Recent`].
const RECENT: usize = 1 << 16;

impl Recent {
    /// `ptr` was freed.
    pub(crate) fn freed(&mut self, ptr: u64) {
        self.new.insert(ptr, ());
        if self.new.len() >= RECENT {
            self.old = std::mem::take(&mut self.new);
        }
    }
    /// `ptr` was allocated again.
    pub(crate) fn reused(&mut self, ptr: u64) {
        self.new.remove(&ptr);
        self.old.remove(&ptr);
    }
    /// Whether `ptr` was freed lately and not allocated since.
    pub(crate) fn contains(&self, ptr: u64) -> bool {
        self.new.contains_key(&ptr) || self.old.contains_key(&ptr)
    }
}
