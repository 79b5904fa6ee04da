//! Unmapping the old addresses of moved memory on devpool's background thread
//! ([`VmConfig::background_unmap`](crate::VmConfig::background_unmap)).
//!
//! An old address holds no memory of its own (the memory is mapped at its new place
//! too), so unmapping it changes nothing the pool counts; only its address space is
//! not free for a new mapping until the driver is done. The layer therefore counts
//! such a run as unmapped when it hands it over (its bitmaps and counts are exactly
//! what they would be had it unmapped the run itself) and keeps the job, so that:
//!
//! - a mapping about to land on pages of a job that has not run takes the job back
//!   and unmaps those pages itself, or waits for the one running
//!   ([`PageLayer::clear_unmapping`]): the backend never sees a page mapped twice;
//! - before memory goes back to the device (the policy's unmaps, a trim, the layer
//!   dropped) every job is done ([`PageLayer::settle_unmapping`]): an old mapping
//!   still alive would keep memory the pool no longer counts;
//! - a job the driver refused stays, and is tried again by the next of those; until
//!   it succeeds no mapping lands on its pages (that mapping fails with the unmap's
//!   error, as a block landing on an old address does when its unmap fails).

use crate::layer::{PageLayer, RangeId};
use devpool_core::{Backend, BackendError, DevicePtr, Result};
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

const QUEUED: u8 = 0;
const RUNNING: u8 = 1;
const DONE: u8 = 2;
const FAILED: u8 = 3;
/// Taken back by the layer, which unmaps the pages itself.
const TAKEN: u8 = 4;

/// One run of old addresses handed to the background thread.
pub(crate) struct Job {
    state: AtomicU8,
    pub r: RangeId,
    /// Pages `[s, e)` of range `r`.
    pub s: usize,
    pub e: usize,
    /// The first page of each chunk in `[s, e)`, in order (`s` first): a mapping
    /// that lands on some of them takes back only those.
    starts: Vec<usize>,
    ptr: DevicePtr,
    bytes: usize,
    error: Mutex<Option<BackendError>>,
}

/// Signalled whenever a job of the layer ends.
#[derive(Default)]
pub(crate) struct Signal {
    m: Mutex<()>,
    cv: Condvar,
}

/// The layer's jobs not yet seen done.
#[derive(Default)]
pub(crate) struct Unmapping {
    pub jobs: Vec<Arc<Job>>,
    signal: Arc<Signal>,
}

impl Job {
    /// Unmap the job's pages on this thread; its state says how it went.
    fn unmap(&self, backend: &dyn Backend) {
        let st = match backend.unmap(self.ptr, self.bytes) {
            Ok(()) => DONE,
            Err(e) => {
                *self.error.lock() = Some(e);
                FAILED
            }
        };
        self.state.store(st, Ordering::Release);
    }

    fn overlaps(&self, r: RangeId, p0: usize, p1: usize) -> bool {
        self.r == r && self.s < p1 && self.e > p0
    }
}

impl PageLayer {
    /// Count the old addresses `[s, e)` of range `r` (whole moved chunks starting
    /// at `starts`) as unmapped, and hand their unmapping to the background thread.
    pub(crate) fn unmap_moved_later(&mut self, r: RangeId, s: usize, e: usize, starts: Vec<usize>) {
        if self.range(r).is_err() {
            return;
        }
        self.unmapped(r, s, e, true);
        self.spawn_unmap(r, s, e, starts, QUEUED);
    }

    /// A job for pages `[s, e)` of range `r` in state `state`: queued jobs go to the
    /// background thread.
    fn spawn_unmap(
        &mut self,
        r: RangeId,
        s: usize,
        e: usize,
        starts: Vec<usize>,
        state: u8,
    ) -> Arc<Job> {
        let base = self.range(r).map_or(0, |rg| rg.base);
        let shift = self.shift;
        let job = Arc::new(Job {
            state: AtomicU8::new(state),
            r,
            s,
            e,
            starts,
            ptr: DevicePtr(base + ((s as u64) << shift)),
            bytes: (e - s) << shift,
            error: Mutex::new(None),
        });
        self.unmapping.jobs.push(job.clone());
        if state == QUEUED {
            let job = job.clone();
            let backend = self.backend.clone();
            let signal = self.unmapping.signal.clone();
            devpool_core::background::submit(Box::new(move || {
                if job
                    .state
                    .compare_exchange(QUEUED, RUNNING, Ordering::AcqRel, Ordering::Acquire)
                    .is_err()
                {
                    return; // taken back
                }
                job.unmap(&*backend);
                let _g = signal.m.lock();
                signal.cv.notify_all();
            }));
        }
        job
    }

    /// Drop the jobs that ended well; no waiting.
    pub(crate) fn collect_unmapped(&mut self) {
        if !self.unmapping.jobs.is_empty() {
            self.unmapping
                .jobs
                .retain(|j| j.state.load(Ordering::Acquire) != DONE);
        }
    }

    /// Make sure no job still holds a page of `[p0, p1)` of range `r`: of a job not
    /// started, the chunks under those pages are taken back and unmapped here (the
    /// others go back to the background thread), a running job is waited for, a
    /// failed one tried again here. The first error of a try that failed.
    pub(crate) fn clear_unmapping(&mut self, r: RangeId, p0: usize, p1: usize) -> Result<()> {
        if self.unmapping.jobs.is_empty() {
            return Ok(());
        }
        let mut first_err: Option<BackendError> = None;
        // Jobs made on the way (the parts not under [p0, p1)) need nothing here.
        let n = self.unmapping.jobs.len();
        let mut k = 0;
        while k < n {
            let j = self.unmapping.jobs[k].clone();
            k += 1;
            if !j.overlaps(r, p0, p1) {
                continue;
            }
            if j.state
                .compare_exchange(QUEUED, TAKEN, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                // The chunks under [p0, p1) are unmapped here; those before and
                // after go back to the thread as jobs of their own.
                let ends: Vec<usize> = j.starts.iter().skip(1).copied().chain([j.e]).collect();
                let first = ends.iter().position(|&c| c > p0).unwrap_or(0);
                let last = j
                    .starts
                    .iter()
                    .rposition(|&c| c < p1)
                    .unwrap_or(j.starts.len() - 1);
                let (a, b) = (j.starts[first], ends[last]);
                if a > j.s {
                    self.spawn_unmap(r, j.s, a, j.starts[..first].to_vec(), QUEUED);
                }
                if b < j.e {
                    self.spawn_unmap(r, b, j.e, j.starts[last + 1..].to_vec(), QUEUED);
                }
                let here = self.spawn_unmap(r, a, b, j.starts[first..=last].to_vec(), TAKEN);
                here.unmap(&*self.backend);
                j.state.store(DONE, Ordering::Release);
                if let Some(e) = here.error.lock().take() {
                    first_err.get_or_insert(e);
                }
                continue;
            }
            self.finish_job(&j, &mut first_err);
        }
        self.collect_unmapped();
        match first_err {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    /// Every job done: a job not started is taken back and run here, a running one
    /// waited for, a failed one tried again here. The first error of a try that
    /// failed again.
    pub(crate) fn settle_unmapping(&mut self) -> Result<()> {
        if self.unmapping.jobs.is_empty() {
            return Ok(());
        }
        let mut first_err: Option<BackendError> = None;
        for j in self.unmapping.jobs.clone() {
            if j.state
                .compare_exchange(QUEUED, TAKEN, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                j.unmap(&*self.backend);
            }
            self.finish_job(&j, &mut first_err);
        }
        self.collect_unmapped();
        match first_err {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    /// Wait for job `j` if it runs; try it again here if it failed.
    fn finish_job(&self, j: &Job, first_err: &mut Option<BackendError>) {
        let signal = &self.unmapping.signal;
        let mut g = signal.m.lock();
        while j.state.load(Ordering::Acquire) == RUNNING {
            signal.cv.wait(&mut g);
        }
        drop(g);
        if j.state.load(Ordering::Acquire) == FAILED {
            j.error.lock().take();
            j.unmap(&*self.backend);
            if let Some(e) = j.error.lock().take() {
                first_err.get_or_insert(e);
            }
        }
    }

    /// Wait until every old address handed to the background thread is unmapped
    /// (taking back the jobs not started, trying failed ones again): for a snapshot
    /// that does not depend on the thread's pace. The first error of a try that
    /// failed again.
    pub fn finish_unmapping(&mut self) -> Result<()> {
        self.settle_unmapping()
    }

    /// Pages whose unmapping was handed over and is not yet seen done.
    pub(crate) fn unmapping_pages(&self) -> u64 {
        self.unmapping.jobs.iter().map(|j| (j.e - j.s) as u64).sum()
    }
}
