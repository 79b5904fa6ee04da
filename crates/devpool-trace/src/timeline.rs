//! Keeping a bounded timeline without knowing the number of events up front: one
//! point per bucket of events, the one where reserved bytes were highest, so the
//! peak is always kept. When the points fill up, neighbouring buckets are merged and
//! buckets become twice as long, so memory stays bounded however long the trace.

use crate::report::TimelinePoint;

/// Collects at most `points` timeline points over any number of events.
pub(crate) struct Timeline {
    /// Most points kept (0: none).
    max: usize,
    /// Events per bucket (a power of two).
    per_bucket: u64,
    /// The bucket `best` belongs to.
    bucket: u64,
    best: Option<TimelinePoint>,
    points: Vec<TimelinePoint>,
}

impl Timeline {
    /// A timeline keeping at most `points` points (none if 0).
    pub(crate) fn new(points: usize) -> Self {
        Timeline {
            max: points,
            per_bucket: 1,
            bucket: 0,
            best: None,
            points: Vec::with_capacity(points.min(1 << 12)),
        }
    }

    /// The state after an event (events come in order).
    #[inline]
    pub(crate) fn push(&mut self, p: TimelinePoint) {
        if self.max == 0 {
            return;
        }
        let bucket = p.event / self.per_bucket;
        match &mut self.best {
            Some(best) if bucket == self.bucket => {
                if p.reserved_bytes > best.reserved_bytes {
                    *best = p;
                }
            }
            _ => {
                self.points.extend(self.best.take());
                self.bucket = bucket;
                self.best = Some(p);
                while self.points.len() + 1 > self.max {
                    self.coarsen();
                }
            }
        }
    }

    /// Buckets twice as long: the points of each pair of buckets merge into the
    /// higher one; the last bucket stays open.
    fn coarsen(&mut self) {
        self.per_bucket *= 2;
        let per = self.per_bucket;
        self.points.extend(self.best.take());
        let mut out: Vec<TimelinePoint> = Vec::with_capacity(self.points.len() / 2 + 1);
        for p in self.points.drain(..) {
            match out.last_mut() {
                Some(last) if last.event / per == p.event / per => {
                    if p.reserved_bytes > last.reserved_bytes {
                        *last = p;
                    }
                }
                _ => out.push(p),
            }
        }
        self.points = out;
        self.best = self.points.pop();
        self.bucket = self.best.map_or(0, |b| b.event / per);
    }

    /// The points, in event order.
    pub(crate) fn finish(mut self) -> Vec<TimelinePoint> {
        self.points.extend(self.best.take());
        self.points
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(event: u64, reserved_bytes: u64) -> TimelinePoint {
        TimelinePoint {
            event,
            time_us: event,
            live_bytes: 0,
            reserved_bytes,
        }
    }

    #[test]
    fn bounded_and_keeps_the_maximum() {
        let value = |i: u64| (i * 7919) % 1009;
        for n in [1u64, 7, 1000, 4096, 100_003] {
            for points in [1, 2, 3, 10, 999, 1000, 5000] {
                let mut t = Timeline::new(points);
                (0..n).for_each(|i| t.push(point(i, value(i))));
                let out = t.finish();
                assert!(
                    out.len() <= points && !out.is_empty(),
                    "{n} events, {points} points: {}",
                    out.len()
                );
                if n as usize <= points {
                    assert_eq!(out.len(), n as usize, "every event kept when they fit");
                } else {
                    assert!(out.len() >= points / 4, "{n}/{points}: {}", out.len());
                }
                let max = (0..n).map(value).max().unwrap();
                assert!(out.iter().any(|p| p.reserved_bytes == max));
                assert!(out.windows(2).all(|w| w[0].event < w[1].event));
                assert!(out.iter().all(|p| p.reserved_bytes == value(p.event)));
            }
        }
        let mut t = Timeline::new(0);
        t.push(point(0, 1));
        assert!(t.finish().is_empty());
    }
}
