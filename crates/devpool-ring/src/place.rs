//! [`Placement`]: where a ring carves its blocks and how its tail retires them, with
//! no lock, no backend and no statistics, so that it can be tested alone.
//!
//! Addresses are absolute: the ring serves `[lo, hi)`, and `hi` moves when pages are
//! mapped or unmapped at the top.
//!
//! - **Records.** Every block has a host record (address, granted and requested
//!   bytes, state) in a queue in allocation order. A block's sequence number is its
//!   place in that queue, so a free finds its record in O(1).
//! - **Runs.** The queue is cut into runs: blocks carved one after the other at the
//!   head, each run one stretch of addresses. A plain ring has one run, or two once it
//!   has wrapped. The head is the end of the newest run; it carves up to the next
//!   obstacle (cached). A block that does not fit there starts a new run in the
//!   smallest free gap that fits, the first going round from the head among equals (in
//!   a plain ring: the room the tail left at the bottom, a wrap). A block is never
//!   split. Best fit on this slow path keeps the large gaps for large blocks (see
//!   docs/DESIGN.md for what it changed on the bundled traces).
//! - **The tail** is the oldest block. It retires (gives its bytes back to the ring)
//!   when it is freed, and blocks freed earlier than their elders retire when they
//!   reach the tail. A block freed on another stream waits until its events have
//!   completed, which the caller says through [`retire`](Placement::retire).
//! - **The newest block** freed on its own stream retires at once, so temporaries freed
//!   in stack order cost nothing (their sequence numbers are then handed out again).
//! - **Pinning.** A live block at the tail holds back everything freed after it. When
//!   room is short, [`pin_front`](Placement::pin_front) leaves such blocks where they
//!   are, as obstacles the head steps over, so that the tail can go on; a pinned
//!   block's bytes come back as soon as it is freed.

use crate::queue::Queue;
use devpool_core::{DevicePtr, Error, Result};
use std::collections::BTreeMap;

/// Bits of a sequence number.
pub const SEQ_BITS: u32 = 54;
/// Mask of a sequence number.
pub const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;

/// What became of a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Handed out and not freed.
    Live,
    /// Freed; its bytes come back when it reaches the tail.
    Freed,
    /// Freed on other streams: its bytes come back when it reaches the tail and its
    /// events have completed.
    Waiting,
}

#[derive(Clone, Copy, Debug)]
struct Rec {
    ptr: u64,
    size: u64,
    requested: u64,
    state: State,
}

/// Consecutive blocks carved one after the other: `[start, end)` holds the records
/// from sequence number `first` up to the next run's first.
#[derive(Clone, Copy, Debug)]
struct Run {
    start: u64,
    end: u64,
    first: u64,
}

/// A block the tail has passed while it was not retired.
#[derive(Clone, Copy, Debug)]
struct Pin {
    end: u64,
    seq: u64,
    requested: u64,
    state: State,
}

/// Where a checked block's record is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// In the queue, at this index.
    Queue(usize),
    /// Among the pinned blocks.
    Pinned,
}

/// Figures of a [`Placement`], for statistics and messages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shape {
    /// Records in the queue (live, freed and not retired, waiting).
    pub queued: usize,
    /// Live blocks, queued or pinned.
    pub live: usize,
    /// Blocks freed and not retired because an older block is still live.
    pub freed: usize,
    /// Blocks freed on other streams whose events have not been seen complete.
    pub waiting: usize,
    /// Blocks the tail has passed.
    pub pinned: usize,
    /// Runs in the queue.
    pub runs: usize,
    /// The head, the tail and the top (the end of the highest block), or `lo` when
    /// there are none.
    pub head: u64,
    /// The start of the oldest queued block.
    pub tail: u64,
    /// The end of the highest block.
    pub top: u64,
    /// Bytes between the oldest queued block and the head, gaps included, as the
    /// ring goes round.
    pub span: u64,
}

/// The placement state of one ring (the module docs say how it places).
///
/// ```
/// use devpool_ring::Placement;
/// let mut p = Placement::new(0x1000, 0x1000 + 4096);
/// let (a, sa) = p.carve(1024, 1000, 256).unwrap();
/// let (b, sb) = p.carve(1024, 1024, 256).unwrap();
/// assert_eq!((a, b), (0x1000, 0x1400));
/// p.free(sb, b, 1024, 1024, false).unwrap(); // the newest: back at once
/// let (c, _) = p.carve(2048, 2048, 256).unwrap();
/// assert_eq!(c, 0x1400);
/// assert!(p.carve(2048, 2048, 256).is_none()); // full: the oldest is live
/// p.free(sa, a, 1024, 1000, false).unwrap(); // the tail retires
/// let (d, _) = p.carve(1024, 1024, 256).unwrap();
/// assert_eq!(d, 0x1c00); // the head goes on to the end
/// let (e, _) = p.carve(1024, 1024, 256).unwrap();
/// assert_eq!(e, 0x1000); // and wraps round to the room the tail left
/// ```
#[derive(Debug)]
pub struct Placement {
    lo: u64,
    hi: u64,
    recs: Queue<Rec>,
    /// Sequence number of `recs[0]`.
    base: u64,
    runs: Queue<Run>,
    /// Pinned blocks by address.
    pinned: BTreeMap<u64, Pin>,
    /// No obstacle lies between the head and here (a bound that may be low).
    limit: u64,
    live: usize,
    freed: usize,
    waiting: usize,
    waiting_pinned: usize,
    jumps: u64,
    scratch: Vec<(u64, u64)>,
}

#[inline]
fn align_to(x: u64, align: u64) -> Option<u64> {
    Some(x.checked_add(align - 1)? & !(align - 1))
}

/// Where `size` bytes at `align` go from `from` without passing `limit`.
#[inline]
fn fit(from: u64, size: u64, align: u64, limit: u64) -> Option<(u64, u64)> {
    let p = align_to(from, align)?;
    let e = p.checked_add(size)?;
    (e <= limit).then_some((p, e))
}

impl Placement {
    /// An empty ring over `[lo, hi)` (`hi` may equal `lo`: no room yet).
    pub fn new(lo: u64, hi: u64) -> Self {
        Placement {
            lo,
            hi: hi.max(lo),
            recs: Queue::default(),
            base: 0,
            runs: Queue::default(),
            pinned: BTreeMap::new(),
            limit: lo,
            live: 0,
            freed: 0,
            waiting: 0,
            waiting_pinned: 0,
            jumps: 0,
            scratch: Vec::new(),
        }
    }

    /// The start of the range.
    pub fn lo(&self) -> u64 {
        self.lo
    }

    /// The end of the room the ring may use.
    pub fn hi(&self) -> u64 {
        self.hi
    }

    /// Move the end of the room; it never goes below [`top`](Placement::top).
    pub fn set_hi(&mut self, hi: u64) {
        self.hi = hi.max(self.top());
        self.limit = self.limit.min(self.hi);
    }

    /// The end of the highest block (queued or pinned), or `lo`.
    pub fn top(&self) -> u64 {
        let runs = self.runs.iter().map(|r| r.end).max().unwrap_or(self.lo);
        let pins = self.pinned.values().next_back().map_or(self.lo, |p| p.end);
        runs.max(pins).max(self.lo)
    }

    /// Whether no block is held: nothing queued, nothing pinned.
    pub fn is_empty(&self) -> bool {
        self.recs.is_empty() && self.pinned.is_empty()
    }

    /// Whether some record waits for events.
    pub fn has_waiting(&self) -> bool {
        self.waiting > 0
    }

    /// New runs started while older ones were held (wraps and jumps to the top).
    pub fn jumps(&self) -> u64 {
        self.jumps
    }

    #[inline]
    fn next_seq(&self) -> u64 {
        (self.base + self.recs.len() as u64) & SEQ_MASK
    }

    #[inline]
    fn push(&mut self, ptr: u64, size: u64, requested: u64) -> u64 {
        let seq = self.next_seq();
        self.recs.push_back(Rec {
            ptr,
            size,
            requested,
            state: State::Live,
        });
        self.live += 1;
        seq
    }

    /// Carve `size` bytes (a multiple of 256) at `align` (a power of two) for a block
    /// of `requested` bytes: at the head, else in the smallest gap that fits.
    /// Returns the address and sequence number, or `None` when no gap fits.
    #[inline]
    pub fn carve(&mut self, size: u64, requested: u64, align: u64) -> Option<(u64, u64)> {
        if let Some(run) = self.runs.back_mut() {
            if let Some((p, e)) = fit(run.end, size, align, self.limit) {
                run.end = e;
                return Some((p, self.push(p, size, requested)));
            }
            let head = run.end;
            self.limit = self.next_obstacle(head);
            if let Some((p, e)) = fit(head, size, align, self.limit) {
                if let Some(run) = self.runs.back_mut() {
                    run.end = e;
                }
                return Some((p, self.push(p, size, requested)));
            }
        } else if self.pinned.is_empty() {
            // An empty ring: start again from the bottom.
            let (p, e) = fit(self.lo, size, align, self.hi)?;
            return Some(self.start_run(p, e, self.hi, size, requested));
        }
        self.carve_gap(size, requested, align)
    }

    /// The first obstacle at or after `head` (another run or a pinned block), or `hi`.
    fn next_obstacle(&self, head: u64) -> u64 {
        let n = self.runs.len();
        let mut lim = self.hi;
        for r in self.runs.iter().take(n.saturating_sub(1)) {
            if r.start >= head && r.start < lim {
                lim = r.start;
            }
        }
        if let Some((&p, _)) = self.pinned.range(head..).next() {
            lim = lim.min(p);
        }
        lim
    }

    /// Every obstacle, by address, in `self.scratch`.
    fn collect_obstacles(&mut self) {
        self.scratch.clear();
        self.scratch
            .extend(self.runs.iter().map(|r| (r.start, r.end)));
        self.scratch.sort_unstable();
        let runs = self.scratch.len();
        self.scratch
            .extend(self.pinned.iter().map(|(&p, pin)| (p, pin.end)));
        if runs > 0 && self.scratch.len() > runs {
            // Both halves are sorted: merge them.
            let mut merged = Vec::with_capacity(self.scratch.len());
            let (a, b) = self.scratch.split_at(runs);
            let (mut i, mut j) = (0, 0);
            while i < a.len() || j < b.len() {
                if j == b.len() || (i < a.len() && a[i].0 <= b[j].0) {
                    merged.push(a[i]);
                    i += 1;
                } else {
                    merged.push(b[j]);
                    j += 1;
                }
            }
            self.scratch = merged;
        }
    }

    /// Start a new run in the smallest gap that fits (among equals the first going
    /// round from the head).
    fn carve_gap(&mut self, size: u64, requested: u64, align: u64) -> Option<(u64, u64)> {
        let head = self.runs.back().map_or(self.lo, |r| r.end);
        let found = {
            self.collect_obstacles();
            let mut best: Option<(u64, u64, u64, u64)> = None;
            // The smallest gap that fits; among equals the first going round from the
            // head (gaps at or after it, then from the bottom).
            'passes: for pass in 0..2 {
                let mut cur = self.lo;
                let mut i = 0;
                loop {
                    let (g0, g1) = match self.scratch.get(i) {
                        Some(&(s, e)) => {
                            i += 1;
                            let g = (cur, s);
                            cur = cur.max(e);
                            g
                        }
                        None if cur < self.hi => {
                            let g = (cur, self.hi);
                            cur = self.hi;
                            g
                        }
                        None => break,
                    };
                    if g1 <= g0 || (pass == 0) != (g0 >= head) {
                        continue;
                    }
                    if let Some((p, e)) = fit(g0, size, align, g1) {
                        if best.is_none_or(|b| g1 - g0 < b.3) {
                            best = Some((p, e, g1, g1 - g0));
                        }
                        if g1 - g0 == size {
                            break 'passes;
                        }
                    }
                }
            }
            best.map(|(p, e, g1, _)| (p, e, g1))
        };
        let (p, e, g1) = found?;
        if !self.runs.is_empty() {
            self.jumps += 1;
        }
        Some(self.start_run(p, e, g1, size, requested))
    }

    /// A new run with one block at `[p, e)`, free up to `limit`.
    #[inline]
    fn start_run(&mut self, p: u64, e: u64, limit: u64, size: u64, requested: u64) -> (u64, u64) {
        let first = self.next_seq();
        self.runs.push_back(Run {
            start: p,
            end: e,
            first,
        });
        self.limit = limit;
        (p, self.push(p, size, requested))
    }

    #[inline]
    fn index(&self, seq: u64) -> Option<usize> {
        let d = seq.wrapping_sub(self.base) & SEQ_MASK;
        ((d as usize) < self.recs.len()).then_some(d as usize)
    }

    /// Find the live block `seq` at `ptr` with these sizes; a block that does not match
    /// its record is [`Error::NotOwned`], one freed already [`Error::DoubleFree`].
    #[inline]
    pub fn find(&self, seq: u64, ptr: u64, size: u64, requested: u64) -> Result<Slot> {
        let not_owned = || Error::NotOwned {
            ptr: DevicePtr(ptr),
        };
        if let Some(i) = self.index(seq) {
            let r = &self.recs[i];
            if r.ptr != ptr || r.size != size || r.requested != requested {
                return Err(not_owned());
            }
            return match r.state {
                State::Live => Ok(Slot::Queue(i)),
                _ => Err(Error::DoubleFree {
                    ptr: DevicePtr(ptr),
                }),
            };
        }
        if let Some(p) = self.pinned.get(&ptr) {
            if p.seq != seq || p.end - ptr != size || p.requested != requested {
                return Err(not_owned());
            }
            return match p.state {
                State::Live => Ok(Slot::Pinned),
                _ => Err(Error::DoubleFree {
                    ptr: DevicePtr(ptr),
                }),
            };
        }
        Err(not_owned())
    }

    /// Free a live block (checked as [`find`](Placement::find) does). With `waiting`,
    /// its bytes wait for [`retire`](Placement::retire) to see its events complete;
    /// without, the tail and the head retire what they can at once.
    #[inline]
    pub fn free(
        &mut self,
        seq: u64,
        ptr: u64,
        size: u64,
        requested: u64,
        waiting: bool,
    ) -> Result<()> {
        let slot = self.find(seq, ptr, size, requested)?;
        self.live -= 1;
        match slot {
            Slot::Queue(i) => {
                if waiting {
                    self.recs[i].state = State::Waiting;
                    self.waiting += 1;
                    return Ok(());
                }
                self.recs[i].state = State::Freed;
                self.freed += 1;
                let last = i + 1 == self.recs.len();
                if i == 0 {
                    self.retire_freed_front();
                }
                if last {
                    self.pop_freed_back();
                }
            }
            Slot::Pinned => {
                if waiting {
                    if let Some(p) = self.pinned.get_mut(&ptr) {
                        p.state = State::Waiting;
                    }
                    self.waiting += 1;
                    self.waiting_pinned += 1;
                } else {
                    self.pinned.remove(&ptr);
                }
            }
        }
        Ok(())
    }

    /// Take the oldest record off the queue, keeping the runs right.
    #[inline]
    fn pop_front_one(&mut self) -> Option<Rec> {
        let r = self.recs.pop_front()?;
        self.base = (self.base + 1) & SEQ_MASK;
        let next_first = match self.runs.get(1) {
            Some(n) => n.first,
            None => self.next_seq(),
        };
        if next_first == self.base {
            self.runs.pop_front();
        } else if let (Some(run), Some(front)) = (self.runs.front_mut(), self.recs.front()) {
            run.first = self.base;
            run.start = front.ptr;
        }
        Some(r)
    }

    #[inline]
    fn retire_freed_front(&mut self) -> usize {
        let mut n = 0;
        while self.recs.front().is_some_and(|r| r.state == State::Freed) {
            self.pop_front_one();
            self.freed -= 1;
            n += 1;
        }
        n
    }

    /// Give back the newest records while they are freed (stack order).
    fn pop_freed_back(&mut self) {
        while self.recs.back().is_some_and(|r| r.state == State::Freed) {
            self.recs.pop_back();
            self.freed -= 1;
            let seq = self.next_seq();
            let Some(last) = self.runs.back_mut() else {
                break;
            };
            if last.first == seq {
                self.runs.pop_back();
                // The head is now the end of an older run: find its obstacle again.
                self.limit = self.lo;
            } else if let Some(r) = self.recs.back() {
                last.end = r.ptr + r.size;
            }
        }
    }

    /// Retire the oldest blocks while they are freed, or waiting with `done(seq)`
    /// true, and drop the pinned blocks whose events `done` says completed. Returns
    /// the blocks whose bytes came back.
    pub fn retire(&mut self, done: &mut dyn FnMut(u64) -> bool) -> usize {
        let mut n = self.retire_freed_front();
        while let Some(state) = self.recs.front().map(|r| r.state) {
            match state {
                State::Freed => {
                    self.pop_front_one();
                    self.freed -= 1;
                }
                State::Waiting if done(self.base) => {
                    self.pop_front_one();
                    self.waiting -= 1;
                }
                _ => break,
            }
            n += 1;
        }
        if self.waiting_pinned > 0 {
            let gone: Vec<u64> = self
                .pinned
                .iter()
                .filter(|(_, p)| p.state == State::Waiting)
                .filter_map(|(&ptr, p)| done(p.seq).then_some(ptr))
                .collect();
            for ptr in gone {
                self.pinned.remove(&ptr);
                self.waiting -= 1;
                self.waiting_pinned -= 1;
                n += 1;
            }
        }
        n
    }

    /// Whether passing the live blocks at the tail could give bytes back: some block
    /// behind them is freed, and fewer than `max` blocks are pinned.
    pub fn can_pin(&self, max: usize) -> bool {
        self.freed > 0 && self.pinned.len() < max
    }

    /// Leave the oldest blocks that are not freed (live, or waiting for events) where
    /// they are, up to `max` pinned in all, so that the tail reaches the next freed
    /// block; then retire what follows. Returns the blocks pinned.
    pub fn pin_front(&mut self, max: usize) -> usize {
        let mut n = 0;
        while self.pinned.len() < max {
            match self.recs.front() {
                Some(r) if r.state != State::Freed => {}
                _ => break,
            }
            let seq = self.base;
            let Some(r) = self.pop_front_one() else {
                break;
            };
            if r.state == State::Waiting {
                self.waiting_pinned += 1;
            }

            self.pinned.insert(
                r.ptr,
                Pin {
                    end: r.ptr + r.size,
                    seq,
                    requested: r.requested,
                    state: r.state,
                },
            );
            n += 1;
        }
        self.retire_freed_front();
        n
    }

    /// The sequence numbers of the records waiting for events, oldest first, queued
    /// ones before pinned ones.
    pub fn waiting_seqs(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .recs
            .iter()
            .enumerate()
            .filter(|(_, r)| r.state == State::Waiting)
            .map(|(i, _)| (self.base + i as u64) & SEQ_MASK)
            .collect();
        v.extend(
            self.pinned
                .values()
                .filter(|p| p.state == State::Waiting)
                .map(|p| p.seq),
        );
        v
    }

    /// The figures of the ring now.
    pub fn shape(&self) -> Shape {
        let head = self.runs.back().map_or(self.lo, |r| r.end);
        let tail = self.recs.front().map_or(head, |r| r.ptr);
        let span = if self.recs.is_empty() {
            0
        } else if head > tail {
            head - tail
        } else {
            (self.hi - tail) + (head - self.lo)
        };
        Shape {
            queued: self.recs.len(),
            live: self.live,
            freed: self.freed,
            waiting: self.waiting,
            pinned: self.pinned.len(),
            runs: self.runs.len(),
            head,
            tail,
            top: self.top(),
            span,
        }
    }

    /// Check every invariant; the first broken one, in words.
    pub fn verify(&self) -> std::result::Result<(), String> {
        if self.runs.is_empty() != self.recs.is_empty() {
            return Err(format!(
                "{} runs for {} queued records",
                self.runs.len(),
                self.recs.len()
            ));
        }
        let mut obstacles: Vec<(u64, u64)> = Vec::new();
        let next = self.next_seq();
        for (k, run) in self.runs.iter().enumerate() {
            let end_seq = self.runs.get(k + 1).map_or(next, |n| n.first);
            let from = (run.first.wrapping_sub(self.base) & SEQ_MASK) as usize;
            let to = (end_seq.wrapping_sub(self.base) & SEQ_MASK) as usize;
            let to = if end_seq == next { self.recs.len() } else { to };
            if k == 0 && run.first != self.base {
                return Err(format!(
                    "first run starts at seq {} not {}",
                    run.first, self.base
                ));
            }
            if from >= to || to > self.recs.len() {
                return Err(format!(
                    "run {k} holds records {from}..{to} of {}",
                    self.recs.len()
                ));
            }
            let mut at = run.start;
            for (i, r) in self.recs.range(from, to).enumerate() {
                if i == 0 && r.ptr != run.start {
                    return Err(format!(
                        "run {k} starts at {:#x}, its first block at {:#x}",
                        run.start, r.ptr
                    ));
                }
                if r.ptr < at || r.size == 0 || r.size % 256 != 0 || r.requested > r.size {
                    return Err(format!("record {r:?} out of order in run {k}"));
                }
                at = r.ptr + r.size;
            }
            if at != run.end {
                return Err(format!(
                    "run {k} ends at {:#x}, its last block at {at:#x}",
                    run.end
                ));
            }
            obstacles.push((run.start, run.end));
        }
        obstacles.extend(self.pinned.iter().map(|(&p, pin)| (p, pin.end)));
        obstacles.sort_unstable();
        for w in obstacles.windows(2) {
            if w[0].1 > w[1].0 {
                return Err(format!("overlap: {:x?} and {:x?}", w[0], w[1]));
            }
        }
        if let (Some(f), Some(l)) = (obstacles.first(), obstacles.last()) {
            if f.0 < self.lo || l.1 > self.hi {
                return Err(format!("blocks outside [{:#x}, {:#x})", self.lo, self.hi));
            }
        }
        let count = |s: State| self.recs.iter().filter(|r| r.state == s).count();
        let pinned = |s: State| self.pinned.values().filter(|p| p.state == s).count();
        if self.freed != count(State::Freed) {
            return Err(format!(
                "freed count {} is not {}",
                self.freed,
                count(State::Freed)
            ));
        }
        if self.live != count(State::Live) + pinned(State::Live) {
            return Err(format!("live count {} is wrong", self.live));
        }
        if self.waiting != count(State::Waiting) + pinned(State::Waiting)
            || self.waiting_pinned != pinned(State::Waiting)
        {
            return Err(format!(
                "waiting counts {} / {} are wrong",
                self.waiting, self.waiting_pinned
            ));
        }
        if pinned(State::Freed) != 0 {
            return Err("a freed block stays pinned".into());
        }
        if let Some(run) = self.runs.back() {
            if self.limit > self.next_obstacle(run.end) {
                return Err(format!("limit {:#x} passes an obstacle", self.limit));
            }
        }
        Ok(())
    }
}
