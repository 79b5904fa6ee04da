//! The retiring queues: chunks waiting for the events recorded on the streams that
//! used them, and the events the layer reuses.

use crate::layer::RangeId;
use devpool_core::EventId;
use std::collections::VecDeque;

/// Chunks waiting for their events.
#[derive(Debug)]
pub(crate) struct Pending {
    pub events: Vec<EventId>,
    /// (range, first page, end page) of each chunk.
    pub chunks: Vec<(RangeId, usize, usize)>,
    /// Whether the events were recorded (else they are recorded at the next look).
    pub recorded: bool,
}

/// The two retiring queues and the events they reuse.
#[derive(Debug, Default)]
pub(crate) struct Retire {
    /// Chunks the policy gives back.
    pub queue: VecDeque<Pending>,
    /// Old addresses of chunks whose memory moved: they hold no memory, and are
    /// unmapped on frees once their streams have passed, or when a block needs them.
    pub moved: VecDeque<Pending>,
    pub spare: Vec<EventId>,
}

/// Which queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Queue {
    Retiring,
    Moved,
}

impl Retire {
    /// Whether no chunk the policy gives back waits.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    pub fn get(&mut self, q: Queue) -> &mut VecDeque<Pending> {
        match q {
            Queue::Retiring => &mut self.queue,
            Queue::Moved => &mut self.moved,
        }
    }

    /// Every event the queues hold, for destruction.
    pub fn drain_events(&mut self) -> Vec<EventId> {
        let mut v: Vec<EventId> = self.spare.drain(..).collect();
        for p in self.queue.drain(..).chain(self.moved.drain(..)) {
            v.extend(p.events);
        }
        v
    }

    /// Events held, waiting or spare.
    pub fn events(&self) -> usize {
        self.spare.len()
            + self
                .queue
                .iter()
                .chain(self.moved.iter())
                .map(|p| p.events.len())
                .sum::<usize>()
    }

    /// Chunks waiting, in both queues.
    pub fn chunks(&self) -> impl Iterator<Item = &(RangeId, usize, usize)> {
        self.queue
            .iter()
            .chain(self.moved.iter())
            .flat_map(|p| p.chunks.iter())
    }
}
