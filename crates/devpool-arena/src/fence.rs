//! The fence that holds back a rewind while other streams may still use freed blocks.
//!
//! A block freed on another stream than its own (or declared used on other streams)
//! is freed at once: it leaves the live figures and a second free of it is caught.
//! What must wait is the reuse of its memory, and an arena reuses memory only when it
//! rewinds. So the free records an event on each of those streams, and the pool
//! rewinds only once every event of the fence has completed. One event per stream is
//! enough: recording it again moves it to the later point, which covers the earlier.

use devpool_core::{Backend, EventId, Result, StreamId};

/// Events that must complete before the pool's memory is reused.
#[derive(Debug, Default)]
pub struct Fence {
    pending: Vec<(StreamId, EventId)>,
    spare: Vec<EventId>,
}

impl Fence {
    /// Add the work queued so far on `stream`.
    pub fn add(&mut self, backend: &dyn Backend, stream: StreamId) -> Result<()> {
        if let Some(&(_, e)) = self.pending.iter().find(|(s, _)| *s == stream) {
            backend.record_event(e, stream)?;
            return Ok(());
        }
        let e = match self.spare.pop() {
            Some(e) => e,
            None => backend.create_event()?,
        };
        if let Err(err) = backend.record_event(e, stream) {
            self.spare.push(e);
            return Err(err.into());
        }
        self.pending.push((stream, e));
        Ok(())
    }

    /// Whether nothing is pending.
    #[cfg(test)]
    pub fn is_clear(&self) -> bool {
        self.pending.is_empty()
    }

    /// Drop the events that completed (all of them, waiting, if `wait`); true when
    /// none is left. Without waiting, an event the backend cannot query stays pending;
    /// waiting, it is dropped and its error returned.
    pub fn settle(&mut self, backend: &dyn Backend, wait: bool) -> Result<bool> {
        let mut first_err = None;
        let mut i = 0;
        while i < self.pending.len() {
            let e = self.pending[i].1;
            let done = if wait {
                if let Err(err) = backend.wait_event(e) {
                    first_err.get_or_insert(err);
                }
                true
            } else {
                backend.event_done(e).unwrap_or(false)
            };
            if done {
                self.spare.push(e);
                self.pending.swap_remove(i);
            } else {
                i += 1;
            }
        }
        match first_err {
            Some(e) => Err(e.into()),
            None => Ok(self.pending.is_empty()),
        }
    }

    /// Forget every pending event (a reset: the caller vouches the work is done).
    pub fn forget(&mut self) {
        self.spare.extend(self.pending.drain(..).map(|(_, e)| e));
    }

    /// Give every event back to the backend.
    pub fn destroy(&mut self, backend: &dyn Backend) {
        self.forget();
        for e in self.spare.drain(..) {
            let _ = backend.destroy_event(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use devpool_testing::{MockBackend, MockConfig};

    #[test]
    fn settles_when_streams_complete() {
        let mock = MockBackend::new(MockConfig::default().manual_events());
        let mut f = Fence::default();
        assert!(f.settle(&mock, false).unwrap(), "an empty fence is settled");
        let (s1, s2) = (
            devpool_testing::MockBackend::stream(1),
            devpool_testing::MockBackend::stream(2),
        );
        f.add(&mock, s1).unwrap();
        f.add(&mock, s2).unwrap();
        f.add(&mock, s1).unwrap();
        assert_eq!(mock.live_events(), 2, "one event per stream");
        assert!(!f.settle(&mock, false).unwrap());
        mock.complete_stream(s1);
        assert!(!f.settle(&mock, false).unwrap());
        mock.complete_stream(s2);
        assert!(f.settle(&mock, false).unwrap());
        assert!(f.is_clear());
        f.add(&mock, s2).unwrap();
        assert_eq!(mock.live_events(), 2, "events are reused");
        assert!(f.settle(&mock, true).unwrap(), "waiting settles everything");
        f.destroy(&mock);
        assert_eq!(mock.live_events(), 0);
    }
}
