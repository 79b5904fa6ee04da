//! New epochs: rewinds, resets and trims, and giving chunks back.

use super::{ArenaPool, Inner};
use crate::word::{self, NO_SLOT};
use devpool_core::{DevicePtr, Error, Result};
use std::sync::atomic::Ordering::*;

/// What is done to the chunks when a new epoch begins.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Turn {
    /// Keep every chunk.
    Rewind,
    /// Keep the largest `keep_chunks`.
    Reset,
    /// Give every chunk back.
    TrimAll,
}

impl ArenaPool {
    /// Close the epoch if nothing is live in it; the ledger word it closed.
    fn close_if_empty(&self, g: &Inner) -> Option<u64> {
        let l = self.ledger.load(Acquire);
        if !word::ledger_in(l, g.epoch) || word::live(l) != 0 {
            return None;
        }
        self.ledger
            .compare_exchange(l, word::ledger(g.epoch + 1, 0, 0), AcqRel, Acquire)
            .ok()
    }

    /// Rewind if nothing is live and no other stream may still use freed memory.
    pub(super) fn try_rewind(&self, g: &mut Inner) -> bool {
        let l = self.ledger.load(Acquire);
        if !word::ledger_in(l, g.epoch)
            || word::live(l) != 0
            || !g.fence.settle(&*self.backend, false).unwrap_or(false)
        {
            return false;
        }
        let Some(prev) = self.close_if_empty(g) else {
            return false;
        };
        self.stats.rewinds.fetch_add(1, Relaxed);
        // A rewind gives nothing back to the backend, so it cannot fail.
        let _ = self.turn(g, Turn::Rewind, prev);
        true
    }

    /// Trim under the lock: see [`Pool::trim`](devpool_core::Pool::trim).
    pub(super) fn trim_locked(&self, g: &mut Inner) -> Result<usize> {
        let mut first_err = None;
        if word::live(self.ledger.load(Acquire)) == 0 {
            let settled = g.fence.settle(&*self.backend, true).unwrap_or_else(|e| {
                first_err = Some(e);
                true
            });
            if let Some(prev) = settled.then(|| self.close_if_empty(g)).flatten() {
                self.stats.rewinds.fetch_add(1, Relaxed);
                let r = self.turn(g, Turn::TrimAll, prev);
                return match first_err {
                    Some(e) => Err(e),
                    None => r,
                };
            }
        }
        let spares = g.chunks.spares(g.epoch);
        let (released, err) = self.release(g, spares);
        match err.or(first_err) {
            Some(e) => Err(e),
            None => Ok(released),
        }
    }

    /// Begin the next epoch; the ledger has already been moved to it from `prev`.
    pub(super) fn turn(&self, g: &mut Inner, how: Turn, prev: u64) -> Result<usize> {
        let (old, new) = (g.epoch, g.epoch + 1);
        // Bumps of the old epoch fail from here; new ones wait for the lock.
        self.cursor.store(word::cursor(new, NO_SLOT, 0), Release);
        let (handed, live) = if word::ledger_in(prev, old) {
            let (_, handed, freed) = word::split_ledger(prev);
            (handed, handed - freed)
        } else {
            (0, 0)
        };
        self.stats.turn(old, new, handed, live);
        g.epoch = new;
        g.retired = 0;
        self.epoch.store(new, Release);
        self.rewind_due.store(false, Relaxed);
        let (released, err) = match how {
            Turn::Rewind => (0, None),
            Turn::Reset => {
                let extra = g.chunks.beyond(self.cfg.keep_chunks);
                self.release(g, extra)
            }
            Turn::TrimAll => {
                let all = g.chunks.beyond(0);
                self.release(g, all)
            }
        };
        g.chunks.arrange(&self.descs);
        if let Some(first) = g.chunks.get_mut(0) {
            first.used_in = new;
            self.cursor.store(word::cursor(new, 0, 0), Release);
        }
        err.map_or(Ok(released), Err)
    }

    /// Give the chunks in `slots` back; bytes released and the first error (a chunk
    /// that could not be given back stays).
    pub(super) fn release(&self, g: &mut Inner, slots: Vec<usize>) -> (usize, Option<Error>) {
        let (mut released, mut first_err) = (0, None);
        for slot in slots {
            let Some(c) = g.chunks.remove(slot, &self.descs) else {
                continue;
            };
            match self.backend.free_region(DevicePtr(c.base), c.size as usize) {
                Ok(()) => {
                    self.stats.backend.on_release(c.size as usize);
                    released += c.size as usize;
                }
                Err(e) => {
                    g.chunks.insert(slot, c, &self.descs);
                    first_err.get_or_insert(Error::from(e));
                }
            }
        }
        (released, first_err)
    }
}
