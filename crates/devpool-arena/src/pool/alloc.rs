//! Allocation: the lock-free bump, counting the block in the ledger, and the slow path
//! that moves to another chunk.

use super::{ArenaPool, Inner};
use crate::chunks::Chunk;
use crate::word::{self, MAX_CHUNK_BYTES, MAX_HANDED, NO_SLOT};
use devpool_core::{align_up, BackendError, Block, DevicePtr, Error, Request, Result, MIN_ALIGN};
use std::sync::atomic::Ordering::*;

/// The largest alignment served: 1 GiB.
pub const MAX_ALIGN: usize = 1 << 30;

/// The bytes granted for `size` requested bytes.
#[inline]
pub(super) fn granted(size: usize) -> Option<usize> {
    align_up(size.max(1), MIN_ALIGN)
}

/// Granted bytes and alignment of a request, checked.
#[inline]
fn measure(req: &Request) -> Result<(u64, u64)> {
    let align = req.effective_align()?;
    if align > MAX_ALIGN {
        return Err(Error::InvalidAlignment { align: req.align });
    }
    let pad = (align - MIN_ALIGN) as u64;
    let max = MAX_CHUNK_BYTES - pad;
    match granted(req.size) {
        Some(g) if g as u64 <= max => Ok((g as u64, align as u64)),
        _ => Err(Error::TooLarge {
            size: req.size,
            max: max as usize,
        }),
    }
}

impl ArenaPool {
    /// Allocate a block.
    #[inline]
    pub(super) fn alloc(&self, req: &Request) -> Result<Block> {
        let (size, align) = measure(req)?;
        if self.rewind_due.load(Relaxed) {
            self.rewind_if_due();
        }
        loop {
            // The full epoch, read before the bump: the block is counted only if it is
            // still the epoch once counted.
            let epoch = self.epoch.load(Acquire);
            let (ptr, epoch) = match self.bump(size, align) {
                Some((ptr, e)) if e == word::short(epoch) => (ptr, epoch),
                // A new epoch began meanwhile; the room bumped is void.
                Some(_) => continue,
                None => self.refill(size, align)?,
            };
            if let Some(block) = self.commit(epoch, ptr, req, size)? {
                return Ok(block);
            }
        }
    }

    /// Bump in the current chunk: the address and the short epoch of the bump.
    #[inline]
    fn bump(&self, size: u64, align: u64) -> Option<(u64, u64)> {
        crate::bump::bump(&self.cursor, |slot| self.descs[slot].get(), size, align)
    }

    /// Count a block bumped in `epoch` in the ledger, record it and hand it out;
    /// `None` when the epoch ended meanwhile (the bump is then void).
    #[inline]
    fn commit(&self, epoch: u64, ptr: u64, req: &Request, size: u64) -> Result<Option<Block>> {
        let mut l = self.ledger.load(Acquire);
        let index = loop {
            if !word::ledger_in(l, epoch) {
                return Ok(None);
            }
            let (_, handed, freed) = word::split_ledger(l);
            if handed == MAX_HANDED {
                return Err(Error::Limit(format!(
                    "an arena epoch hands out at most {MAX_HANDED} blocks: reset the arena"
                )));
            }
            match self.ledger.compare_exchange_weak(
                l,
                word::ledger(epoch, handed + 1, freed),
                AcqRel,
                Acquire,
            ) {
                Ok(_) => break handed,
                Err(now) => l = now,
            }
        };
        let Some(rec) = self
            .records
            .slot(index)
            .filter(|_| self.epoch.load(Acquire) == epoch)
        else {
            // The epoch ended after all (a reset racing with this allocation), or the
            // ledger word was one of an epoch a million epochs back.
            self.void_index(epoch);
            return Ok(None);
        };
        let gen = rec.write(epoch, ptr, req.size as u64);
        self.stats.on_alloc(epoch, req.size, size as usize);
        Ok(Some(req.granted(
            DevicePtr(ptr),
            size as usize,
            self.device,
            word::handle(epoch, gen, index),
        )))
    }

    /// A record index taken in `epoch` stays unused: count it freed.
    #[cold]
    fn void_index(&self, epoch: u64) {
        let mut l = self.ledger.load(Acquire);
        while word::ledger_in(l, epoch) && self.epoch.load(Acquire) == epoch {
            let (_, handed, freed) = word::split_ledger(l);
            match self.ledger.compare_exchange_weak(
                l,
                word::ledger(epoch, handed, freed + 1),
                AcqRel,
                Acquire,
            ) {
                Ok(_) => return,
                Err(now) => l = now,
            }
        }
    }

    /// Bytes bumped this epoch.
    pub(super) fn consumed(&self, g: &Inner) -> u64 {
        let (e, slot, off) = word::split_cursor(self.cursor.load(Acquire));
        let current = if slot != NO_SLOT && e == word::short(g.epoch) {
            off
        } else {
            0
        };
        g.retired + current
    }

    /// The slow path: the current chunk is full. Returns the address and the full
    /// epoch it was carved in.
    #[cold]
    fn refill(&self, size: u64, align: u64) -> Result<(u64, u64)> {
        let mut g = self.inner.lock();
        if let Some((ptr, _)) = self.bump(size, align) {
            return Ok((ptr, g.epoch));
        }
        if self.cfg.rewind_when_empty && self.consumed(&g) > 0 && self.try_rewind(&mut g) {
            if let Some((ptr, _)) = self.bump(size, align) {
                return Ok((ptr, g.epoch));
            }
        }
        let epoch = g.epoch;
        let slot = match g.chunks.best_spare(epoch, size, align) {
            Some(s) => s,
            None => self.grow(&mut g, size, align)?,
        };
        let (_, cslot, coff) = word::split_cursor(self.cursor.load(Acquire));
        let room = match cslot {
            NO_SLOT => 0,
            s => self.descs[s].get().1.saturating_sub(coff),
        };
        let chunk = g
            .chunks
            .get_mut(slot)
            .ok_or(Error::Unsupported("arena slot emptied under its lock"))?;
        let (start, end) = chunk
            .place(size, align)
            .ok_or(Error::Unsupported("arena chunk smaller than placed"))?;
        chunk.used_in = epoch;
        let ptr = chunk.base + start;
        if cslot != NO_SLOT && chunk.size - end < room {
            // A block that would leave less room in its chunk than the current one has
            // gets that chunk to itself; the cursor stays where the room is.
            g.retired += end;
        } else {
            let prev = self.cursor.swap(word::cursor(epoch, slot, end), AcqRel);
            let (_, ps, poff) = word::split_cursor(prev);
            if ps != NO_SLOT {
                g.retired += poff;
            }
        }
        Ok((ptr, epoch))
    }

    /// Take a new chunk for a block of `size` bytes at `align`; its slot.
    fn grow(&self, g: &mut Inner, size: u64, align: u64) -> Result<usize> {
        let slot = g.chunks.free_slot().ok_or_else(|| {
            Error::Limit(format!(
                "an arena pool holds at most {} chunks",
                self.cfg.max_chunks
            ))
        })?;
        // Room for the block wherever a 256-byte aligned region starts.
        let need = size + (align - MIN_ALIGN as u64);
        let regular = self.cfg.chunk_for(g.chunks.held()) as u64;
        let want = if need <= regular {
            regular
        } else {
            need.next_multiple_of(self.granularity)
                .min(MAX_CHUNK_BYTES)
                .max(need)
        };
        // The driver gives a large region whole pages: ask for all of them and use
        // them, since they are held either way.
        let whole = |n: u64| {
            self.backend
                .region_bytes(n as usize)
                .map_or(n, |b| b as u64)
                .min(MAX_CHUNK_BYTES.max(n))
        };
        let (want, need) = (whole(want), whole(need));
        let (base, bytes) = match self.backend.alloc_region(want as usize) {
            Ok(p) => (p.0, want),
            Err(BackendError::OutOfMemory { .. }) if need < want => {
                (self.backend.alloc_region(need as usize)?.0, need)
            }
            Err(e) => return Err(e.into()),
        };
        self.stats.backend.on_reserve(bytes as usize);
        if !base.is_multiple_of(MIN_ALIGN as u64) {
            if self
                .backend
                .free_region(DevicePtr(base), bytes as usize)
                .is_ok()
            {
                self.stats.backend.on_release(bytes as usize);
            }
            return Err(Error::Unsupported(
                "the backend returned a region not aligned to 256 bytes",
            ));
        }
        g.chunks.insert(
            slot,
            Chunk {
                base,
                size: bytes,
                used_in: 0,
            },
            &self.descs,
        );
        Ok(slot)
    }
}
