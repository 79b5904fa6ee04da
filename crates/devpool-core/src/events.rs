//! Whether queued work has passed a set of events: the one check behind every queue
//! of things waiting for streams (frees from other streams in
//! [`StreamOrdered`](crate::StreamOrdered), pages retiring in the page layer).

use crate::backend::Backend;
use crate::error::BackendError;
use crate::types::EventId;

/// What [`events_passed`] found.
#[derive(Debug)]
pub struct Passed {
    /// Every event completed (or, when waiting, broke).
    pub done: bool,
    /// `wait_event` calls made.
    pub waited: usize,
    /// The error of a broken event, if one broke.
    pub error: Option<BackendError>,
}

/// Whether every one of `events` has completed: asked without blocking, or waited
/// for one by one when `wait`. Stops at the first event that is not done. A broken
/// event must not strand what waits behind it forever: it counts as done only when
/// waiting, and its error is returned.
///
/// ```
/// use devpool_core::{events_passed, Backend};
/// use devpool_testing::{MockBackend, MockConfig};
/// let mock = MockBackend::shared_with(MockConfig::default().manual_events());
/// let s = MockBackend::stream(3);
/// let e = mock.create_event().unwrap();
/// mock.record_event(e, s).unwrap();
/// assert!(!events_passed(&*mock, &[e], false).done, "stream 3 has not passed it");
/// let p = events_passed(&*mock, &[e], true);
/// assert!(p.done && p.waited == 1 && p.error.is_none());
/// ```
pub fn events_passed(backend: &dyn Backend, events: &[EventId], wait: bool) -> Passed {
    let mut waited = 0;
    for &e in events {
        let ok = if wait {
            waited += 1;
            backend.wait_event(e).map(|_| true)
        } else {
            backend.event_done(e)
        };
        match ok {
            Ok(true) => {}
            Ok(false) => {
                return Passed {
                    done: false,
                    waited,
                    error: None,
                }
            }
            Err(err) => {
                return Passed {
                    done: wait,
                    waited,
                    error: Some(err),
                }
            }
        }
    }
    Passed {
        done: true,
        waited,
        error: None,
    }
}
