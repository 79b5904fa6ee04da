//! Frees: checking a block against its record, counting it, and giving the room of
//! the last block back.

use super::alloc::granted;
use super::ArenaPool;
use crate::records::{self, Record};
use crate::stats::raise;
use crate::word::{self, NO_SLOT};
use devpool_core::{Block, Error, Result, StreamId};
use std::sync::atomic::Ordering::*;

/// A live block, checked: its epoch, generation, record index and record.
pub(super) struct Checked<'a> {
    epoch: u64,
    gen: u64,
    index: u64,
    rec: &'a Record,
}

impl ArenaPool {
    /// Check that `block` is live in the current epoch.
    #[inline]
    pub(super) fn validate(&self, block: &Block) -> Result<Checked<'_>> {
        let not_owned = || Error::NotOwned { ptr: block.ptr };
        if block.device != self.device {
            return Err(Error::WrongDevice {
                ptr: block.ptr,
                block_device: block.device,
                allocator_device: self.device,
            });
        }
        let (h_epoch, gen, index) = word::split_handle(block.handle).ok_or_else(not_owned)?;
        let epoch = self.epoch.load(Acquire);
        if !word::handle_epoch_matches(h_epoch, epoch) {
            return Err(self.stale(block));
        }
        let rec = self.records.get(index).ok_or_else(not_owned)?;
        let (tag, ptr, requested) = rec.read();
        if records::tag_epoch(tag) != epoch {
            return Err(not_owned());
        }
        if records::tag_gen(tag) != gen {
            // The record serves a later block: this one was freed in stack order.
            return Err(Error::DoubleFree { ptr: block.ptr });
        }
        if ptr != block.ptr.0
            || requested != block.requested as u64
            || granted(block.requested) != Some(block.size)
        {
            return Err(not_owned());
        }
        if tag == records::live(epoch, gen) {
            Ok(Checked {
                epoch,
                gen,
                index,
                rec,
            })
        } else {
            Err(Error::DoubleFree { ptr: block.ptr })
        }
    }

    /// The error for a block whose handle names another epoch.
    #[cold]
    fn stale(&self, block: &Block) -> Error {
        if self.inner.lock().chunks.owns(block.ptr.0) {
            // Its memory is ours: the block was reclaimed by a reset or freed before a
            // rewind.
            Error::DoubleFree { ptr: block.ptr }
        } else {
            Error::NotOwned { ptr: block.ptr }
        }
    }

    /// Free a block, fencing the rewind behind `streams`.
    pub(super) fn free(&self, block: &Block, streams: &[StreamId]) -> Result<()> {
        let c = self.validate(block)?;
        if !streams.is_empty() {
            let mut g = self.inner.lock();
            for &s in streams {
                g.fence.add(&*self.backend, s)?;
            }
        }
        if !c.rec.kill(c.epoch, c.gen) {
            return Err(Error::DoubleFree { ptr: block.ptr });
        }
        self.stats.on_free(c.epoch, block.requested, block.size);
        let stack = streams.is_empty() && self.cfg.reuse_last;
        if stack {
            self.roll_back(block, c.epoch);
        }
        if self.count_free(c.epoch, c.index, stack) == Some(0)
            && self.cfg.rewind_when_empty
            && self.cursor.load(Acquire) != word::cursor(c.epoch, 0, 0)
        {
            let mut g = self.inner.lock();
            if g.epoch == c.epoch && !self.try_rewind(&mut g) {
                self.rewind_due.store(true, Relaxed);
            }
        }
        Ok(())
    }

    /// If the freed block of `epoch` is the last one bumped in the current chunk, move
    /// the cursor back to its start: its room is reused at once, in stack order.
    #[inline]
    fn roll_back(&self, block: &Block, epoch: u64) {
        let c = self.cursor.load(Acquire);
        let (e, slot, off) = word::split_cursor(c);
        if e != word::short(epoch) || slot == NO_SLOT || self.epoch.load(Acquire) != epoch {
            return;
        }
        let (base, _) = self.descs[slot].get();
        let (start, end) = (block.ptr.0, block.ptr.0 + block.size as u64);
        if start >= base && end == base + off {
            // Fails, harmlessly, if another block was bumped meanwhile.
            let _ = self.cursor.compare_exchange(
                c,
                word::cursor(epoch, slot, start - base),
                AcqRel,
                Acquire,
            );
        }
    }

    /// Count a free in the ledger of `epoch`; when `give_back` and the block's record
    /// is the last one handed out, give the record back instead. Returns the blocks
    /// live after, or `None` if the epoch has ended.
    #[inline]
    fn count_free(&self, epoch: u64, index: u64, give_back: bool) -> Option<u64> {
        let mut l = self.ledger.load(Acquire);
        loop {
            if !word::ledger_in(l, epoch) || self.epoch.load(Acquire) != epoch {
                return None;
            }
            let (_, handed, freed) = word::split_ledger(l);
            let reuse = give_back && handed == index + 1;
            let next = if reuse {
                word::ledger(epoch, index, freed)
            } else {
                word::ledger(epoch, handed, freed + 1)
            };
            match self.ledger.compare_exchange_weak(l, next, AcqRel, Acquire) {
                Ok(_) => {
                    raise(&self.stats.peak_blocks, handed - freed);
                    if reuse {
                        self.stats.records_reused.fetch_add(1, Relaxed);
                    }
                    return Some(word::live(next));
                }
                Err(now) => l = now,
            }
        }
    }

    /// Try the rewind a fence held back, before the allocation that ends the chance.
    #[cold]
    pub(super) fn rewind_if_due(&self) {
        let mut g = self.inner.lock();
        self.rewind_due.store(false, Relaxed);
        if self.cfg.rewind_when_empty {
            self.try_rewind(&mut g);
        }
    }
}
