//! The depot: empty slabs that no thread cache holds, kept for reuse up to
//! `keep_empty` per class, and the only place that calls the backend for memory.

use crate::classes::Classes;
use crate::slab::Slab;
use crossbeam_utils::CachePadded;
use devpool_core::{Backend, BackendError, Counters, Error, Result};
use parking_lot::Mutex;
use std::sync::Arc;

/// The classes, shared by every pool of an allocator, alone in their cache lines.
pub(crate) type SharedClasses = Arc<CachePadded<Classes>>;

/// What a pool's thread caches share: the backend and the classes, read on every
/// operation, then the counters of backend memory and the depot, written when slabs
/// come and go, padded apart from the rest.
pub(crate) struct Shared {
    pub backend: Arc<dyn Backend>,
    pub classes: SharedClasses,
    pub counters: CachePadded<Counters>,
    pub depot: CachePadded<Mutex<Depot>>,
}

/// Empty slabs per class.
#[derive(Debug)]
pub(crate) struct Depot {
    empty: Vec<Vec<Slab>>,
}

impl Depot {
    pub fn new(classes: usize) -> Self {
        Depot {
            empty: (0..classes).map(|_| Vec::new()).collect(),
        }
    }

    /// An empty slab of class `c`: a kept one, or a new region from the backend.
    pub fn take(&mut self, c: usize, ctx: &Shared) -> Result<Slab> {
        if let Some(s) = self.empty[c].pop() {
            return Ok(s);
        }
        Self::new_slab(c, ctx)
    }

    fn new_slab(c: usize, ctx: &Shared) -> Result<Slab> {
        let info = &ctx.classes.info[c];
        let mut bytes = info.slab_bytes;
        loop {
            let region = ctx.backend.alloc_region(bytes)?;
            ctx.counters.on_reserve(bytes);
            if let Some(s) = Slab::new(region, bytes, c, info) {
                return Ok(s);
            }
            // The region is not aligned as the backend promised and too small to
            // realign: give it back and take one with room to align.
            ctx.backend.free_region(region, bytes)?;
            ctx.counters.on_release(bytes);
            if bytes > info.slab_bytes {
                return Err(Error::Backend(BackendError::InvalidArgument {
                    call: "alloc_region",
                    detail: format!("region {region} is not {}-byte aligned", info.align),
                }));
            }
            bytes = info.slab_bytes + info.align;
        }
    }

    /// Take an empty slab from a thread cache: keep it, or give it back to the backend
    /// when the class already has `keep_empty` kept. Returns the bytes released.
    pub fn put(&mut self, slab: Slab, ctx: &Shared) -> Result<usize> {
        if self.empty[slab.class as usize].len() < ctx.classes.keep_empty {
            self.keep(slab);
            return Ok(0);
        }
        self.release(slab, ctx)
    }

    fn keep(&mut self, slab: Slab) {
        self.empty[slab.class as usize].push(slab);
    }

    /// Give an empty slab's region back. On a backend error the slab stays kept.
    pub fn release(&mut self, slab: Slab, ctx: &Shared) -> Result<usize> {
        if let Err(e) = ctx.backend.free_region(slab.region, slab.region_bytes) {
            self.keep(slab);
            return Err(e.into());
        }
        ctx.counters.on_release(slab.region_bytes);
        Ok(slab.region_bytes)
    }

    /// Give back every kept slab; returns the bytes released and the first error.
    pub fn release_all(&mut self, ctx: &Shared) -> (usize, Option<Error>) {
        let mut bytes = 0;
        let mut first_err = None;
        for c in 0..self.empty.len() {
            let kept = std::mem::take(&mut self.empty[c]);
            for s in kept {
                match self.release(s, ctx) {
                    Ok(b) => bytes += b,
                    Err(e) => {
                        first_err.get_or_insert(e);
                    }
                }
            }
        }
        (bytes, first_err)
    }

    /// Kept slabs of each class: (slabs, slots).
    pub fn kept(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.empty
            .iter()
            .map(|v| (v.len(), v.iter().map(|s| s.slots as u64).sum()))
    }

    /// Check that every kept slab is empty and its bitmap agrees.
    pub fn check(&self) -> std::result::Result<(), String> {
        for s in self.empty.iter().flatten() {
            if !s.is_empty() || s.bits.count_free() != s.slots as usize || !s.bits.consistent() {
                return Err(format!("kept slab at {:#x} is not empty", s.start));
            }
        }
        Ok(())
    }

    /// Host bytes of the depot's metadata.
    pub fn metadata_bytes(&self) -> usize {
        std::mem::size_of::<Depot>()
            + self
                .empty
                .iter()
                .map(|v| {
                    std::mem::size_of::<Vec<Slab>>()
                        + (v.capacity() - v.len()) * std::mem::size_of::<Slab>()
                        + v.iter().map(Slab::metadata_bytes).sum::<usize>()
                })
                .sum::<usize>()
    }

    /// Every kept slab, for the pool's drop.
    pub fn drain(&mut self) -> impl Iterator<Item = Slab> + '_ {
        self.empty.iter_mut().flat_map(|v| v.drain(..))
    }
}
