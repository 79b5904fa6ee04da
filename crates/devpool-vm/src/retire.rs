//! Giving pages back in stream order.
//!
//! The policy picks unused chunks (highest addresses first, far from the low end
//! where placements pack live blocks) and marks them retiring: still mapped and
//! counted as held, no longer part of the cache. One event is recorded on each
//! stream whose blocks were released into the layer; the chunks are unmapped once
//! every event has completed, that is once all work queued on those streams before
//! the decision (the last use of every block that lay there) is done. Nothing waits
//! for the device: the queue is looked at on later frees, and waited on (event by
//! event) only by `trim`, when the backend is out of memory, and when a block lands
//! on the old address of memory that moved.
//!
//! A retiring chunk that a new block lands on before it is unmapped is simply taken
//! back: it is still mapped.
//!
//! The old addresses of memory that moved (see [`moves`](crate::moves)) retire on a
//! queue of their own: they hold no memory, and are unmapped on the free path, with
//! the retiring chunks, once their streams have passed. A block that lands on one
//! before then unmaps the chunks under it (waiting for their streams), and no others.
//! While any wait, the policy gives no chunk back: the memory of a chunk may still be
//! mapped at an old address too.

use crate::layer::{at, PageLayer, RangeId};
use crate::queue::{Pending, Queue};
use devpool_core::{DevicePtr, Error, EventId, Result};

impl PageLayer {
    /// Bring the unused pages within the policy's bound once `incoming` more bytes
    /// are allocated, keeping at least `min_pages` of them.
    pub(crate) fn enforce(&mut self, incoming: u64, min_pages: u64) -> Result<()> {
        let bound = (self.policy.bound(incoming) >> self.shift).max(min_pages);
        if self.n.unused > bound {
            let got = self.retire_unused(self.n.unused - bound)?;
            if got > 0 {
                self.policy.on_release(got << self.shift);
            }
        }
        Ok(())
    }

    /// Pick up to about `want` unused pages, whole chunks from the top, and start
    /// giving them back; returns the pages picked. Those whose streams are already
    /// done are unmapped at once.
    pub(crate) fn retire_unused(&mut self, want: u64) -> Result<u64> {
        if self.n.unused == 0 || want == 0 {
            return Ok(0);
        }
        if self.n.moved > 0 {
            // Memory that moved may still be mapped at its old address too: a chunk
            // it moved to must not go while that mapping lives, or the memory would
            // stay held unseen. Old addresses go first.
            let _ = self.sweep_moved(false);
            if self.n.moved > 0 {
                return Ok(0);
            }
        }
        let mut picked: Vec<(RangeId, usize, usize)> = Vec::new();
        let mut got = 0u64;
        'ranges: for i in (0..self.ranges.len()).rev() {
            let Some(rg) = self.ranges[i].as_ref() else {
                continue;
            };
            let mut top = rg.top;
            while let Some(q) = rg.mapped.prev_only(&rg.used, &rg.retiring, 0, top) {
                let (c, e) = rg.chunk_of(q);
                if rg.chunk_free(c, e) {
                    picked.push((RangeId(i as u32), c, e));
                    got += (e - c) as u64;
                    if got >= want {
                        break 'ranges;
                    }
                }
                top = c;
            }
        }
        if picked.is_empty() {
            return Ok(0);
        }
        for &(r, c, e) in &picked {
            at(&mut self.ranges, r).retiring.set(c, e, true);
        }
        self.n.unused -= got;
        self.n.retiring += got;
        self.queue_retiring(Queue::Retiring, picked);
        self.poll(false)?;
        Ok(got)
    }

    /// Queue `chunks` (already marked retiring) on queue `q` behind one event per
    /// stream that released blocks here. Should an event fail, the chunks record
    /// theirs at the next look at the queue.
    pub(crate) fn queue_retiring(&mut self, q: Queue, chunks: Vec<(RangeId, usize, usize)>) {
        let (events, recorded) = match self.record_events() {
            Ok(ev) => (ev, true),
            Err(_) => (Vec::new(), false),
        };
        self.retire.get(q).push_back(Pending {
            events,
            chunks,
            recorded,
        });
    }

    /// Unmap the moved pages under `[p0, p1)` of range `r` now, waiting for their
    /// streams (a block is about to land there). Only the chunks under those pages
    /// go now; the other old addresses queued with them stay for the sweep on the
    /// free path, so that an allocation pays for no unmap it does not need.
    pub(crate) fn flush_moved(&mut self, r: RangeId, p0: usize, p1: usize) -> Result<()> {
        let under = |c: &(RangeId, usize, usize)| c.0 == r && c.1 < p1 && c.2 > p0;
        let mut first_err: Option<Error> = None;
        let mut chunks = Vec::new();
        let mut k = 0;
        while k < self.retire.moved.len() {
            if self.retire.moved[k].chunks.iter().any(under) {
                if let Some(e) = self.settle(Queue::Moved, k, true).1 {
                    first_err.get_or_insert(e);
                }
                let p = &mut self.retire.moved[k];
                chunks.extend(p.chunks.extract_if(.., |c| under(c)));
                if p.chunks.is_empty() {
                    let mut p = self.retire.moved.remove(k).expect("entry k exists");
                    self.retire.spare.append(&mut p.events);
                    continue;
                }
            }
            k += 1;
        }
        let (_, err) = self.unmap_chunks(chunks);
        if let Some(e) = first_err.or(err) {
            return Err(e);
        }
        if self.range(r)?.moved.count(p0, p1) > 0 {
            return Err(Error::Unsupported("moved pages with nothing queued"));
        }
        Ok(())
    }

    /// Unmap the old addresses of moved chunks whose streams have passed (waiting
    /// for them when `wait`), all at once: neighbours go in one call.
    pub(crate) fn sweep_moved(&mut self, wait: bool) -> Result<u64> {
        let (chunks, err) = self.take_done(Queue::Moved, wait, usize::MAX);
        let (pages, err2) = self.unmap_chunks(chunks);
        match err.or(err2) {
            Some(e) => Err(e),
            None => Ok(pages),
        }
    }

    /// One event recorded now on each stream that released blocks here.
    ///
    /// A stream the program destroyed after freeing blocks on it (a CuPy stream
    /// collected, a C program's `cudaStreamDestroy`) refuses events. Then the layer
    /// waits once for the whole device, after which no work queued on that stream
    /// can touch a page, and forgets the stream (a later free on it adds it again);
    /// the other streams get their events. Without that, every later event, and so
    /// every unmap and trim, would fail for the rest of the run.
    fn record_events(&mut self) -> Result<Vec<EventId>> {
        let mut events = Vec::with_capacity(self.streams.len());
        let mut i = 0;
        while i < self.streams.len() {
            let e = match self.retire.spare.pop() {
                Some(e) => e,
                None => match self.backend.create_event() {
                    Ok(e) => e,
                    Err(err) => {
                        self.retire.spare.extend(events);
                        return Err(err.into());
                    }
                },
            };
            if let Err(err) = self.backend.record_event(e, self.streams[i]) {
                self.retire.spare.push(e);
                if self.backend.synchronize_device().is_ok() {
                    self.calls.waits += 1;
                    self.calls.streams_dropped += 1;
                    self.streams.remove(i);
                    continue;
                }
                self.retire.spare.extend(events);
                return Err(err.into());
            }
            self.calls.events += 1;
            events.push(e);
            i += 1;
        }
        Ok(events)
    }

    /// Take back the retiring chunks under pages `[p0, p1)` of range `r`: a block is
    /// about to use them, and they are still mapped.
    pub(crate) fn rescue(&mut self, r: RangeId, p0: usize, p1: usize) {
        let mut p = p0;
        loop {
            let rg = at(&mut self.ranges, r);
            let q = rg.retiring.next(p, p1, true);
            if q >= p1 {
                break;
            }
            let (c, e) = rg.chunk_of(q);
            if rg.moved.get(c) {
                // Its memory lives elsewhere now (the caller flushed these first).
                p = e;
                continue;
            }
            rg.retiring.set(c, e, false);
            let n = (e - c) as u64;
            self.n.retiring -= n;
            self.n.unused += n;
            // Mapped pages usable again: what a search remembered may be stale.
            self.epoch += 1;
            for pend in &mut self.retire.queue {
                pend.chunks.retain(|&(x, s, _)| !(x == r && s == c));
            }
            p = e;
        }
    }

    /// Unmap the chunks the policy gives back whose events have completed (waiting
    /// for them when `wait`); returns the pages unmapped.
    pub(crate) fn poll(&mut self, wait: bool) -> Result<u64> {
        self.since_poll = 0;
        let (chunks, err) = self.take_done(Queue::Retiring, wait, usize::MAX);
        let (pages, err2) = self.unmap_chunks(chunks);
        match err.or(err2) {
            Some(e) => Err(e),
            None => Ok(pages),
        }
    }

    /// Whether the events of entry `k` of queue `q` have completed (waiting for them
    /// when `wait`; recording them first if they could not be recorded before), and
    /// the first error. A broken event does not hold pages forever: when waiting, it
    /// counts as done (as in the stream-ordered layer), and the error is reported.
    fn settle(&mut self, q: Queue, k: usize, wait: bool) -> (bool, Option<Error>) {
        let mut first_err: Option<Error> = None;
        if !self.retire.get(q)[k].recorded {
            match self.record_events() {
                Ok(ev) => {
                    let entry = &mut self.retire.get(q)[k];
                    entry.events = ev;
                    entry.recorded = true;
                }
                Err(e) if wait => {
                    // No event to wait for: wait for the streams themselves.
                    for i in 0..self.streams.len() {
                        let _ = self.backend.synchronize(self.streams[i]);
                    }
                    first_err.get_or_insert(e);
                }
                Err(e) => return (false, Some(e)),
            }
        }
        let passed =
            devpool_core::events_passed(&*self.backend, &self.retire.get(q)[k].events, wait);
        self.calls.waits += passed.waited as u64;
        if let Some(err) = passed.error {
            first_err.get_or_insert(err.into());
        }
        (passed.done, first_err)
    }

    /// Take up to `max` entries from the front of queue `q` whose events have
    /// completed (waiting for them when `wait`): their chunks, and the first error.
    fn take_done(
        &mut self,
        q: Queue,
        wait: bool,
        max: usize,
    ) -> (Vec<(RangeId, usize, usize)>, Option<Error>) {
        let mut chunks = Vec::new();
        let mut first_err: Option<Error> = None;
        let mut taken = 0;
        while taken < max && !self.retire.get(q).is_empty() {
            let (done, err) = self.settle(q, 0, wait);
            if let Some(e) = err {
                first_err.get_or_insert(e);
            }
            if !done {
                break;
            }
            let mut p = self.retire.get(q).pop_front().expect("front exists");
            self.retire.spare.append(&mut p.events);
            chunks.append(&mut p.chunks);
            taken += 1;
        }
        (chunks, first_err)
    }

    /// Unmap retiring `chunks`, one call per run of neighbours (all moved or none);
    /// returns the pages unmapped and the first error.
    fn unmap_chunks(&mut self, mut chunks: Vec<(RangeId, usize, usize)>) -> (u64, Option<Error>) {
        chunks.sort_unstable();
        let mut pages = 0u64;
        let mut first_err: Option<Error> = None;
        let mut retry = Vec::new();
        let mut i = 0;
        while i < chunks.len() {
            let (r, s, mut e) = chunks[i];
            let moved = self.range(r).is_ok_and(|rg| rg.moved.get(s));
            let mut j = i + 1;
            while j < chunks.len()
                && chunks[j].0 == r
                && chunks[j].1 == e
                && self.range(r).is_ok_and(|rg| rg.moved.get(e) == moved)
            {
                e = chunks[j].2;
                j += 1;
            }
            match self.unmap_run(r, s, e, moved) {
                Ok(()) => pages += (e - s) as u64,
                Err(err) => {
                    if moved {
                        retry.extend_from_slice(&chunks[i..j]);
                    }
                    first_err.get_or_insert(err);
                }
            }
            i = j;
        }
        if !retry.is_empty() {
            // Their memory lives elsewhere: they cannot rejoin the cache, so they wait
            // for another try.
            self.retire.moved.push_back(Pending {
                events: Vec::new(),
                chunks: retry,
                recorded: false,
            });
        }
        (pages, first_err)
    }

    /// Unmap retiring pages `[s, e)` of range `r` (whole chunks, all moved or none).
    /// On failure pages not moved stay mapped, as cache; moved ones stay retiring.
    fn unmap_run(&mut self, r: RangeId, s: usize, e: usize, moved: bool) -> Result<()> {
        let shift = self.shift;
        let base = self.range(r)?.base;
        let n = (e - s) as u64;
        let res = self
            .backend
            .unmap(DevicePtr(base + ((s as u64) << shift)), (e - s) << shift);
        let rg = at(&mut self.ranges, r);
        match res {
            Ok(()) => {
                rg.retiring.set(s, e, false);
                rg.moved.set(s, e, false);
                rg.mapped.set(s, e, false);
                rg.head.set(s, e, false);
                if e >= rg.top {
                    rg.top = rg.mapped.prev(0, s, true).map_or(0, |q| q + 1);
                }
                self.n.retiring -= n;
                self.n.mapped -= n;
                if moved {
                    self.n.moved -= n;
                }
                self.calls.unmaps += 1;
                self.sync_held();
                Ok(())
            }
            Err(err) => {
                if !moved {
                    rg.retiring.set(s, e, false);
                    self.n.retiring -= n;
                    self.n.unused += n;
                    self.epoch += 1;
                }
                Err(err.into())
            }
        }
    }
}
