//! Keeping a bounded timeline: one point per bucket of events, the one where
//! reserved bytes were highest, so the peak is always kept.

use crate::report::TimelinePoint;

/// Collects at most `points` timeline points over `events` events.
pub(crate) struct Timeline {
    per_bucket: u64,
    bucket: u64,
    best: Option<TimelinePoint>,
    points: Vec<TimelinePoint>,
}

impl Timeline {
    /// A timeline over `events` events, keeping at most `points` points (none if 0).
    pub(crate) fn new(events: usize, points: usize) -> Self {
        let per_bucket = if points == 0 {
            0
        } else {
            (events as u64).div_ceil(points as u64).max(1)
        };
        Timeline {
            per_bucket,
            bucket: 0,
            best: None,
            points: Vec::with_capacity(points.min(events)),
        }
    }

    /// The state after an event.
    #[inline]
    pub(crate) fn push(&mut self, p: TimelinePoint) {
        if self.per_bucket == 0 {
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
            }
        }
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
        let n = 1000u64;
        let value = |i: u64| (i * 7919) % 1009;
        for points in [1, 3, 10, 999, 1000, 5000] {
            let mut t = Timeline::new(n as usize, points);
            (0..n).for_each(|i| t.push(point(i, value(i))));
            let out = t.finish();
            assert!(out.len() <= points && !out.is_empty());
            let max = (0..n).map(value).max().unwrap();
            assert!(out.iter().any(|p| p.reserved_bytes == max));
            assert!(out.windows(2).all(|w| w[0].event < w[1].event));
        }
        let mut t = Timeline::new(10, 0);
        t.push(point(0, 1));
        assert!(t.finish().is_empty());
    }
}
