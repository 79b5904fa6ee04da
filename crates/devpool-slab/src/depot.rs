//! The depot: empty slabs that no thread cache holds, kept for reuse up to
//! `keep_empty` per class, and the only place that calls the backend for memory.

use crate::classes::Classes;
use crate::slab::Slab;
use crate::table::{Entry, SlabTable, DEPOT, MAX_SLABS};
use crossbeam_utils::CachePadded;
use devpool_core::{Backend, BackendError, Block, Counters, Error, Result};
use parking_lot::Mutex;
use std::sync::Arc;

/// The classes, shared by every pool of an allocator, alone in their cache lines.
pub(crate) type SharedClasses = Arc<CachePadded<Classes>>;

/// What a pool's thread caches share: the backend, the classes and the slab table,
/// read on every operation, then the counters of backend memory and the depot,
/// written when slabs come and go, padded apart from the rest.
pub(crate) struct Shared {
    pub backend: Arc<dyn Backend>,
    pub classes: SharedClasses,
    pub table: SlabTable,
    pub counters: CachePadded<Counters>,
    pub depot: CachePadded<Mutex<Depot>>,
}

/// Empty slabs per class, and the slab numbers free for reuse.
#[derive(Debug)]
pub(crate) struct Depot {
    empty: Vec<Vec<Slab>>,
    free_numbers: Vec<u32>,
    next_number: u32,
}

impl Depot {
    pub fn new(classes: usize) -> Self {
        Depot {
            empty: (0..classes).map(|_| Vec::new()).collect(),
            free_numbers: Vec::new(),
            next_number: 0,
        }
    }

    /// An empty slab of class `c`: a kept one, or a new region from the backend.
    pub fn take(&mut self, c: usize, ctx: &Shared) -> Result<Slab> {
        if let Some(s) = self.empty[c].pop() {
            return Ok(s);
        }
        let idx = match self.free_numbers.pop() {
            Some(i) => i,
            None if (self.next_number as usize) < MAX_SLABS => {
                self.next_number += 1;
                self.next_number - 1
            }
            None => {
                return Err(Error::Limit(format!(
                    "a slab pool holds at most {MAX_SLABS} slabs"
                )))
            }
        };
        ctx.table.ensure(idx);
        let gen = ctx.table.get(idx).map_or(0, |e| e.gen.wrapping_add(1));
        match Self::new_slab(idx, gen, c, ctx) {
            Ok(s) => Ok(s),
            Err(e) => {
                self.free_numbers.push(idx);
                Err(e)
            }
        }
    }

    fn new_slab(idx: u32, gen: u16, c: usize, ctx: &Shared) -> Result<Slab> {
        let info = &ctx.classes.info[c];
        let mut bytes = info.slab_bytes;
        loop {
            let region = ctx.backend.alloc_region(bytes)?;
            ctx.counters.on_reserve(bytes);
            if let Some(s) = Slab::new(region, bytes, idx, gen, c, info) {
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
            self.keep(slab, ctx);
            return Ok(0);
        }
        self.release(slab, ctx)
    }

    fn keep(&mut self, slab: Slab, ctx: &Shared) {
        ctx.table.set(
            slab.idx,
            Entry {
                present: true,
                owner: DEPOT,
                local: 0,
                gen: slab.gen,
            },
        );
        self.empty[slab.class as usize].push(slab);
    }

    /// Give an empty slab's region back. On a backend error the slab stays kept.
    pub fn release(&mut self, slab: Slab, ctx: &Shared) -> Result<usize> {
        if let Err(e) = ctx.backend.free_region(slab.region, slab.region_bytes) {
            self.keep(slab, ctx);
            return Err(e.into());
        }
        ctx.counters.on_release(slab.region_bytes);
        ctx.table.set(
            slab.idx,
            Entry {
                present: false,
                owner: 0,
                local: 0,
                gen: slab.gen,
            },
        );
        self.free_numbers.push(slab.idx);
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

    /// The error for a free of a block in slab `idx`, which the depot holds empty.
    pub fn refuse(&self, idx: u32, slot: usize, block: &Block) -> Error {
        let found = self
            .empty
            .iter()
            .flatten()
            .find(|s| s.idx == idx)
            .is_some_and(|s| {
                slot < s.slots as usize && s.slot_ptr(slot) == block.ptr.0 && block.size == s.size
            });
        if found {
            Error::DoubleFree { ptr: block.ptr }
        } else {
            Error::NotOwned { ptr: block.ptr }
        }
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
                return Err(format!(
                    "kept slab {} at {:#x} is not empty",
                    s.idx, s.start
                ));
            }
        }
        Ok(())
    }

    /// Host bytes of the depot's metadata.
    pub fn metadata_bytes(&self) -> usize {
        std::mem::size_of::<Depot>()
            + self.free_numbers.capacity() * 4
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
