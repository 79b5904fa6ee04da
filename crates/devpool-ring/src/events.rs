//! [`Events`]: the events that hold back blocks freed on other streams.
//!
//! A block freed on another stream than its own, or declared used on other streams
//! with `record_stream`, gets one event recorded on each of those streams at its
//! free. Its bytes come back only once every one of them has completed. Events come
//! from a spare list and go back to it, so steady work creates none.

use devpool_core::{Backend, Error, EventId, Result, StreamId};
use std::collections::HashMap;

/// Events per waiting block, by block handle, and the spare ones.
#[derive(Debug, Default)]
pub(crate) struct Events {
    spare: Vec<EventId>,
    waits: HashMap<u64, Vec<EventId>>,
}

impl Events {
    /// Record an event on each of `streams` for block `handle`: all of them, or none
    /// and the error.
    pub fn record(
        &mut self,
        backend: &dyn Backend,
        handle: u64,
        streams: &[StreamId],
    ) -> Result<()> {
        let mut got = Vec::with_capacity(streams.len());
        for &s in streams {
            let e = match self.spare.pop() {
                Some(e) => e,
                None => match backend.create_event() {
                    Ok(e) => e,
                    Err(err) => {
                        self.spare.extend(got);
                        return Err(err.into());
                    }
                },
            };
            if let Err(err) = backend.record_event(e, s) {
                self.spare.push(e);
                self.spare.extend(got);
                return Err(err.into());
            }
            got.push(e);
        }
        self.waits.insert(handle, got);
        Ok(())
    }

    /// Whether every event of block `handle` has completed (waiting for them if
    /// `wait`); if so, they go back to the spare list. Without waiting, an event the
    /// backend cannot query counts as not done; waiting, as done, and its error is
    /// kept in `err`.
    pub fn done(
        &mut self,
        backend: &dyn Backend,
        handle: u64,
        wait: bool,
        err: &mut Option<Error>,
    ) -> bool {
        let Some(events) = self.waits.get(&handle) else {
            return true;
        };
        for &e in events {
            let r = if wait {
                backend.wait_event(e).map(|_| true)
            } else {
                backend.event_done(e)
            };
            match r {
                Ok(true) => {}
                Ok(false) => return false,
                Err(e) => {
                    err.get_or_insert(e.into());
                    if !wait {
                        return false;
                    }
                }
            }
        }
        if let Some(v) = self.waits.remove(&handle) {
            self.spare.extend(v);
        }
        true
    }

    /// Events in existence: spare and waiting.
    #[cfg(test)]
    pub fn count(&self) -> usize {
        self.spare.len() + self.waits.values().map(Vec::len).sum::<usize>()
    }

    /// Give every event back to the backend.
    pub fn destroy(&mut self, backend: &dyn Backend) {
        for (_, v) in self.waits.drain() {
            self.spare.extend(v);
        }
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
    fn done_only_when_every_stream_completed() {
        let mock = MockBackend::new(MockConfig::default().manual_events());
        let mut ev = Events::default();
        let (s1, s2) = (
            devpool_testing::MockBackend::stream(1),
            devpool_testing::MockBackend::stream(2),
        );
        ev.record(&mock, 7, &[s1, s2]).unwrap();
        let mut err = None;
        assert!(!ev.done(&mock, 7, false, &mut err));
        mock.complete_stream(s1);
        assert!(!ev.done(&mock, 7, false, &mut err));
        mock.complete_stream(s2);
        assert!(ev.done(&mock, 7, false, &mut err));
        assert!(err.is_none());
        ev.record(&mock, 8, &[s1]).unwrap();
        assert_eq!(mock.live_events(), 2, "events are reused");
        assert!(ev.done(&mock, 8, true, &mut err), "waiting completes");
        assert_eq!(ev.count(), 2);
        ev.destroy(&mock);
        assert_eq!(mock.live_events(), 0);
    }
}
