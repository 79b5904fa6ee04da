//! Giving pages back in stream order.
//!
//! The policy picks unused chunks (highest addresses first, far from the low end
//! where placements pack live blocks) and marks them retiring: still mapped and
//! counted as held, no longer part of the cache. One event is recorded on each
//! stream whose blocks were released into the layer; the chunks are unmapped once
//! every event has completed, that is once all work queued on those streams before
//! the decision (the last use of every block that lay there) is done. Nothing waits
//! for the device: the queue is looked at on later operations, and waited on only
//! by `trim` and when the backend is out of memory.
//!
//! A retiring chunk that a new block lands on before it is unmapped is simply taken
//! back: it is still mapped.

use crate::layer::{at, PageLayer, RangeId};
use devpool_core::{DevicePtr, Error, EventId, Result};
use std::collections::VecDeque;

/// Chunks waiting for their events.
#[derive(Debug)]
pub(crate) struct Pending {
    events: Vec<EventId>,
    /// (range, first page, end page) of each chunk.
    chunks: Vec<(RangeId, usize, usize)>,
}

/// The retiring queue and the events it reuses.
#[derive(Debug, Default)]
pub(crate) struct Retire {
    queue: VecDeque<Pending>,
    spare: Vec<EventId>,
}

impl Retire {
    /// Whether nothing waits.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Every event the queue holds, for destruction.
    pub fn drain_events(&mut self) -> Vec<EventId> {
        let mut v: Vec<EventId> = self.spare.drain(..).collect();
        for p in self.queue.drain(..) {
            v.extend(p.events);
        }
        v
    }

    /// Events held, waiting or spare.
    pub fn events(&self) -> usize {
        self.spare.len() + self.queue.iter().map(|p| p.events.len()).sum::<usize>()
    }

    /// Chunks waiting.
    pub fn chunks(&self) -> impl Iterator<Item = &(RangeId, usize, usize)> {
        self.queue.iter().flat_map(|p| p.chunks.iter())
    }
}

impl PageLayer {
    /// Bring the unused pages within the policy's bound once `incoming` more bytes
    /// are allocated.
    pub(crate) fn enforce(&mut self, incoming: u64) -> Result<()> {
        let bound = self.policy.bound(incoming) >> self.shift;
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
        if self.n.free == 0 || want == 0 {
            return Ok(0);
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
                if rg.used.count(c, e) == 0 {
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
        let events = self.record_events()?;
        for &(r, c, e) in &picked {
            at(&mut self.ranges, r).retiring.set(c, e, true);
        }
        self.n.unused -= got;
        self.n.free -= got;
        self.n.retiring += got;
        self.retire.queue.push_back(Pending {
            events,
            chunks: picked,
        });
        self.poll(false)?;
        Ok(got)
    }

    /// One event recorded now on each stream that released blocks here.
    fn record_events(&mut self) -> Result<Vec<EventId>> {
        let mut events = Vec::with_capacity(self.streams.len());
        for i in 0..self.streams.len() {
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
                self.retire.spare.extend(events);
                return Err(err.into());
            }
            self.calls.events += 1;
            events.push(e);
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
            rg.retiring.set(c, e, false);
            let n = (e - c) as u64;
            self.n.retiring -= n;
            self.n.unused += n;
            self.n.free += n;
            for pend in &mut self.retire.queue {
                pend.chunks.retain(|&(x, s, _)| !(x == r && s == c));
            }
            p = e;
        }
    }

    /// Unmap the retiring chunks whose events have completed (waiting for them when
    /// `wait`); returns the pages unmapped.
    pub(crate) fn poll(&mut self, wait: bool) -> Result<u64> {
        self.since_poll = 0;
        let mut done_pages = 0u64;
        let mut first_err: Option<Error> = None;
        while let Some(front) = self.retire.queue.front() {
            let mut done = true;
            for &e in &front.events {
                let ok = if wait {
                    self.calls.waits += 1;
                    self.backend.wait_event(e).map(|_| true)
                } else {
                    self.backend.event_done(e)
                };
                match ok {
                    Ok(true) => {}
                    Ok(false) => {
                        done = false;
                        break;
                    }
                    Err(err) => {
                        // A broken event must not hold pages forever: when waiting,
                        // treat it as done (as the stream-ordered layer does), and
                        // report the error.
                        first_err.get_or_insert(err.into());
                        done = wait;
                        break;
                    }
                }
            }
            if !done {
                break;
            }
            let Some(mut p) = self.retire.queue.pop_front() else {
                break;
            };
            self.retire.spare.append(&mut p.events);
            p.chunks.sort_unstable();
            let mut i = 0;
            while i < p.chunks.len() {
                let (r, s, mut e) = p.chunks[i];
                let mut j = i + 1;
                while j < p.chunks.len() && p.chunks[j].0 == r && p.chunks[j].1 == e {
                    e = p.chunks[j].2;
                    j += 1;
                }
                match self.unmap_run(r, s, e) {
                    Ok(()) => done_pages += (e - s) as u64,
                    Err(err) => {
                        first_err.get_or_insert(err);
                    }
                }
                i = j;
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(done_pages),
        }
    }

    /// Unmap retiring pages `[s, e)` of range `r` (whole chunks). On failure they
    /// stay mapped, as cache.
    fn unmap_run(&mut self, r: RangeId, s: usize, e: usize) -> Result<()> {
        let shift = self.shift;
        let base = self.range(r)?.base;
        let n = (e - s) as u64;
        let res = self
            .backend
            .unmap(DevicePtr(base + ((s as u64) << shift)), (e - s) << shift);
        let rg = at(&mut self.ranges, r);
        rg.retiring.set(s, e, false);
        self.n.retiring -= n;
        match res {
            Ok(()) => {
                rg.mapped.set(s, e, false);
                rg.head.set(s, e, false);
                if e >= rg.top {
                    rg.top = rg.mapped.prev(0, s, true).map_or(0, |q| q + 1);
                }
                self.n.mapped -= n;
                self.held.current -= n << shift;
                self.calls.unmaps += 1;
                Ok(())
            }
            Err(err) => {
                self.n.unused += n;
                self.n.free += n;
                Err(err.into())
            }
        }
    }
}
