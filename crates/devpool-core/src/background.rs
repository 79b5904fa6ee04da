//! A thread of devpool's own, for backend work that the caller need not wait for.
//!
//! The page layer (`devpool-vm`) unmaps the old addresses of memory that moved: they
//! hold no memory (it is mapped at its new place too), yet the driver charges tens
//! of microseconds per mapping to unmap them. Done here, that time leaves the
//! caller's free path. One thread serves the whole process: the driver serializes
//! its mapping calls anyway, so more threads would only wait for each other.
//!
//! - [`submit`] queues a job; jobs run one at a time, in order. The thread starts at
//!   the first job; if it cannot be started, jobs run on the caller's thread.
//! - [`on_worker`] says whether the current thread is that thread: backends count
//!   the calls made there apart ([`BackendCounters::background_calls`]), so that a
//!   replay can tell the caller's calls from the worker's.
//! - [`quiesce`] waits until every job submitted so far has run;
//!   [`stats`] says how many ran and how long they took.
//!
//! [`BackendCounters::background_calls`]: crate::BackendCounters::background_calls
//!
//! ```
//! use std::sync::atomic::{AtomicBool, Ordering};
//! use std::sync::Arc;
//! let ran = Arc::new(AtomicBool::new(false));
//! let r = ran.clone();
//! devpool_core::background::submit(Box::new(move || {
//!     assert!(devpool_core::background::on_worker());
//!     r.store(true, Ordering::SeqCst);
//! }));
//! devpool_core::background::quiesce();
//! assert!(ran.load(Ordering::SeqCst));
//! assert!(!devpool_core::background::on_worker());
//! ```

use parking_lot::{Condvar, Mutex};
use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::OnceLock;
use std::time::Instant;

/// Work for the background thread.
pub type Job = Box<dyn FnOnce() + Send + 'static>;

/// What the background thread has done since the process started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct BackgroundStats {
    /// Jobs run (on the thread, or on a caller's thread when it could not start).
    pub jobs: u64,
    /// Nanoseconds spent running them.
    pub busy_ns: u64,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Job>,
    /// A job is running now.
    running: bool,
    /// The thread was started (or could not be: then `failed`).
    started: bool,
    failed: bool,
    stats: BackgroundStats,
}

struct Worker {
    state: Mutex<State>,
    /// Signalled when a job is queued.
    work: Condvar,
    /// Signalled when the queue empties and nothing runs.
    idle: Condvar,
}

thread_local! {
    static ON_WORKER: Cell<bool> = const { Cell::new(false) };
}

fn worker() -> &'static Worker {
    static W: OnceLock<Worker> = OnceLock::new();
    W.get_or_init(|| Worker {
        state: Mutex::new(State::default()),
        work: Condvar::new(),
        idle: Condvar::new(),
    })
}

/// Whether the current thread is devpool's background thread.
#[inline]
pub fn on_worker() -> bool {
    ON_WORKER.with(Cell::get)
}

/// Queue `job` for the background thread (started now if it is the first). If the
/// thread cannot be started, `job` runs here, now.
pub fn submit(job: Job) {
    let w = worker();
    let mut s = w.state.lock();
    if !s.started {
        s.started = true;
        let spawned = std::thread::Builder::new()
            .name("devpool-background".into())
            .spawn(run);
        s.failed = spawned.is_err();
    }
    if s.failed {
        drop(s);
        let t = Instant::now();
        job();
        let ns = t.elapsed().as_nanos() as u64;
        let mut s = w.state.lock();
        s.stats.jobs += 1;
        s.stats.busy_ns += ns;
        return;
    }
    s.queue.push_back(job);
    w.work.notify_one();
}

/// The thread's loop: run jobs in order, forever.
fn run() {
    ON_WORKER.with(|c| c.set(true));
    let w = worker();
    let mut s = w.state.lock();
    loop {
        let Some(job) = s.queue.pop_front() else {
            s.running = false;
            w.idle.notify_all();
            w.work.wait(&mut s);
            continue;
        };
        s.running = true;
        drop(s);
        let t = Instant::now();
        // A job that panics must not take the thread (and every later job) with it.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
        let ns = t.elapsed().as_nanos() as u64;
        s = w.state.lock();
        s.stats.jobs += 1;
        s.stats.busy_ns += ns;
    }
}

/// Wait until every job submitted so far has run.
pub fn quiesce() {
    let w = worker();
    let mut s = w.state.lock();
    while !s.queue.is_empty() || s.running {
        w.idle.wait(&mut s);
    }
}

/// Jobs run so far and the time they took.
pub fn stats() -> BackgroundStats {
    worker().state.lock().stats
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    #[test]
    fn jobs_run_in_order_on_the_worker_and_are_counted() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let before = stats().jobs;
        for i in 0..100u32 {
            let seen = seen.clone();
            submit(Box::new(move || {
                assert!(on_worker());
                seen.lock().push(i);
            }));
        }
        quiesce();
        assert_eq!(*seen.lock(), (0..100).collect::<Vec<_>>());
        // Other tests of this process may submit jobs too: at least ours ran.
        assert!(stats().jobs >= before + 100);
    }

    #[test]
    fn a_job_that_panics_leaves_the_worker_running() {
        submit(Box::new(|| panic!("a job's own failure")));
        let n = Arc::new(AtomicU64::new(0));
        let m = n.clone();
        submit(Box::new(move || {
            m.fetch_add(1, Ordering::SeqCst);
        }));
        quiesce();
        assert_eq!(n.load(Ordering::SeqCst), 1);
    }
}
