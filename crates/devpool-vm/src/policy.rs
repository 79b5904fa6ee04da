//! [`CachePolicy`]: how much memory a pool keeps without a live block on it.
//!
//! The bound is `floor + fraction × peak + (peak − allocated) + slack`, where `peak`
//! is the highest allocated byte count of the current or the previous window of
//! allocations and frees. Memory freed since the recent peak thus stays for reuse (a
//! training step frees its activations and allocates them again in the next step,
//! with no mapping), while on top of the peak at most the floor and the fraction
//! stay unused. When the workload shrinks for two windows, the peak falls and the
//! extra memory is given back.
//!
//! The slack is the hysteresis: when the policy's own unmaps keep coming back as
//! maps (a working set wider than the bound cycles through them), the bound widens
//! by twice what came back, up to a quarter of the peak, and the widening decays by
//! a quarter at every window.
//!
//! Moving memory has its own hysteresis: once the pool holds its limit, memory moves
//! to where blocks need pages (one driver call each). When moves recur across
//! windows, each moved byte widens the limit and the bound by as much, up to
//! `move_slack_max` of the peak, so a workload that lands on slightly different
//! pages every step ends up holding a little more instead of moving every step; the
//! widening decays by a quarter in every window without a move.
//!
//! A reserve ([`VmConfig::reserve`]) is a floor under all of it: while fewer bytes
//! are allocated than the reserve, the unused memory up to it stays.
//!
//! The same policy serves the page layer (unused mapped pages) and the region modes
//! of the strategies (wholly free regions), so every strategy is held to one rule.

use crate::config::VmConfig;

/// Unmaps of the policy per 1000 operations above which unmapping counts as churn.
pub(crate) const CHURN_CALLS: u64 = 8;

/// The state of the cache bound (the module docs give the bound).
///
/// ```
/// use devpool_vm::{CachePolicy, VmConfig};
/// let mut p = CachePolicy::new(&VmConfig::default().cache(1 << 20, 0.0));
/// p.on_alloc(100 << 20);
/// p.on_free(60 << 20);
/// // What was freed since the peak may stay, plus the floor.
/// assert_eq!(p.bound(0), (60 << 20) + (1 << 20));
/// ```
#[derive(Clone, Debug)]
pub struct CachePolicy {
    floor: u64,
    fraction: f64,
    window: u64,
    slack_max: f64,
    move_margin: f64,
    floor_max: f64,
    /// Granted bytes of live blocks.
    allocated: u64,
    peak_now: u64,
    peak_before: u64,
    /// Peak of the bytes held, in the current and the previous window.
    held_now: u64,
    held_before: u64,
    /// Operations in the current window.
    ops: u64,
    /// Bytes the policy gave back in this window, and how many times.
    released: u64,
    releases: u64,
    /// Extra unused bytes allowed after early releases had to be taken again.
    slack: u64,
    move_slack_max: f64,
    /// Bytes moved in the current and in the previous window.
    moved_now: u64,
    moved_before: u64,
    /// Extra bytes held (limit and bound) after moves recurred.
    move_slack: u64,
    /// Bytes held whatever the work ([`VmConfig::reserve`]): unused memory up to the
    /// reserve less the allocated bytes is always allowed.
    reserve: u64,
    /// Bytes freed so far, all windows together.
    freed_total: u64,
    /// Windows ended so far.
    windows: u64,
}

impl CachePolicy {
    /// A policy with the bounds of `cfg`.
    pub fn new(cfg: &VmConfig) -> Self {
        let cfg = cfg.clone().normalized();
        CachePolicy {
            floor: cfg.cache_floor as u64,
            fraction: cfg.cache_fraction,
            window: cfg.window_ops,
            slack_max: cfg.slack_max,
            move_margin: cfg.move_margin,
            floor_max: cfg.floor_max,
            allocated: 0,
            peak_now: 0,
            peak_before: 0,
            held_now: 0,
            held_before: 0,
            ops: 0,
            released: 0,
            releases: 0,
            slack: 0,
            move_slack_max: cfg.move_slack_max,
            moved_now: 0,
            moved_before: 0,
            move_slack: 0,
            reserve: cfg.reserve as u64,
            freed_total: 0,
            windows: 0,
        }
    }

    /// Operations counted so far, all windows together.
    pub fn ops_total(&self) -> u64 {
        self.windows * self.window + self.ops
    }

    /// Bytes freed so far, all windows together.
    pub fn freed_total(&self) -> u64 {
        self.freed_total
    }

    /// Granted bytes of live blocks.
    pub fn allocated(&self) -> u64 {
        self.allocated
    }

    /// The recent peak of allocated bytes.
    pub fn peak(&self) -> u64 {
        self.peak_now.max(self.peak_before)
    }

    /// The widening of the bound now in force.
    pub fn slack(&self) -> u64 {
        self.slack
    }

    /// The widening of the limit (and the bound) now in force after recurring moves.
    pub fn move_slack(&self) -> u64 {
        self.move_slack
    }

    /// `bytes` more are allocated.
    #[inline]
    pub fn on_alloc(&mut self, bytes: u64) {
        self.allocated += bytes;
        self.peak_now = self.peak_now.max(self.allocated);
    }

    /// `bytes` fewer are allocated.
    #[inline]
    pub fn on_free(&mut self, bytes: u64) {
        self.allocated = self.allocated.saturating_sub(bytes);
        self.freed_total += bytes;
    }

    /// Count one operation; returns true at the end of a window, when the peaks have
    /// rolled over and the bound should be enforced.
    #[inline]
    pub fn tick(&mut self) -> bool {
        self.ops += 1;
        if self.ops < self.window {
            return false;
        }
        self.roll();
        true
    }

    /// Whether the next [`tick`](Self::tick) ends the window.
    #[inline]
    pub fn window_ends_next(&self) -> bool {
        self.ops + 1 >= self.window
    }

    /// The end of a window: the peaks roll over, the widenings decay.
    #[cold]
    #[inline(never)]
    fn roll(&mut self) {
        self.windows += 1;
        self.ops = 0;
        self.peak_before = self.peak_now;
        self.peak_now = self.allocated;
        self.held_before = self.held_now;
        self.held_now = 0;
        self.released = 0;
        self.releases = 0;
        self.slack -= self.slack / 4;
        if self.moved_now == 0 {
            self.move_slack -= self.move_slack / 4;
        }
        self.moved_before = self.moved_now;
        self.moved_now = 0;
    }

    /// The floor at a peak of `peak` allocated bytes: at most the given fraction of
    /// the peak, so that a small pool is not held to a large floor.
    #[inline]
    fn floor_at(&self, peak: u64) -> u64 {
        self.floor.min((peak as f64 * self.floor_max) as u64)
    }

    /// The floor once `incoming` more bytes are allocated (at most `floor_max` of
    /// the recent peak): unused memory up to it stays whatever the work.
    #[inline]
    pub fn floor_for(&self, incoming: u64) -> u64 {
        self.floor_at(self.peak().max(self.allocated + incoming))
    }

    /// Unused bytes allowed once `incoming` more bytes are allocated.
    pub fn bound(&self, incoming: u64) -> u64 {
        let allocated = self.allocated + incoming;
        let peak = self.peak().max(allocated);
        let extra = (peak as f64 * self.fraction) as u64;
        self.floor_at(peak)
            .saturating_add(extra)
            .saturating_add(self.slack)
            .saturating_add(self.move_slack)
            .saturating_add(peak - allocated)
            .max(self.reserve.saturating_sub(allocated))
    }

    /// Bytes the pool may hold in all once `incoming` more bytes are allocated before
    /// it moves unused memory rather than take new: the recent peak of allocated
    /// bytes, plus the floor and the fraction. Below it, new memory raises no peak.
    pub fn limit(&self, incoming: u64) -> u64 {
        let peak = self.peak().max(self.allocated + incoming);
        let extra = (peak as f64 * (self.fraction + self.move_margin)) as u64;
        let by_use = peak
            .saturating_add(self.floor_at(peak))
            .saturating_add(extra)
            .saturating_add(self.move_slack);
        by_use
            .max(self.held_now.max(self.held_before))
            .max(self.reserve)
    }

    /// The pool holds `bytes` now.
    #[inline]
    pub fn on_held(&mut self, bytes: u64) {
        self.held_now = self.held_now.max(bytes);
    }

    /// The policy gave back `bytes` to keep within its bound.
    pub fn on_release(&mut self, bytes: u64) {
        self.released += bytes;
        self.releases += 1;
    }

    /// `bytes` of unused memory moved to where a block needed pages. When memory
    /// moved in the previous window too, moving recurs: the limit and the bound widen
    /// by as much, up to `move_slack_max` of the peak.
    pub fn on_move(&mut self, bytes: u64) {
        self.moved_now += bytes;
        if self.moved_before > 0 {
            let cap = (self.peak() as f64 * self.move_slack_max) as u64;
            self.move_slack = self
                .move_slack
                .saturating_add(bytes)
                .min(cap.max(self.move_slack));
        }
    }

    /// The pool takes `bytes` more from the backend to grow. When the policy has been
    /// giving back often in this window (more than `CHURN_CALLS` times per 1000
    /// operations), what it gave back went too early: the bound widens by twice as
    /// much, up to a quarter of the peak.
    pub fn on_growth(&mut self, bytes: u64) {
        let churn = bytes.min(self.released);
        if churn == 0 || self.releases * 1000 <= self.ops.max(1024) * CHURN_CALLS {
            return;
        }
        self.released -= churn;
        let cap = (self.peak() as f64 * self.slack_max) as u64;
        self.slack = (self.slack + 2 * churn).min(cap);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> CachePolicy {
        CachePolicy::new(
            &VmConfig::default()
                .cache(0, 0.0)
                .window_ops(4)
                .move_slack_max(1.0 / 64.0),
        )
    }

    /// Run one window of four operations; `moved` bytes move in it.
    fn window(p: &mut CachePolicy, moved: u64) {
        if moved > 0 {
            p.on_move(moved);
        }
        for _ in 0..4 {
            p.tick();
        }
    }

    #[test]
    fn recurring_moves_widen_the_limit_up_to_the_cap_and_it_decays() {
        let mut p = policy();
        p.on_alloc(64 << 20);
        let base = p.limit(0);
        assert_eq!(base, 64 << 20, "no floor, no fraction: the peak");
        // A move in one window alone widens nothing.
        window(&mut p, 1 << 20);
        assert_eq!((p.move_slack(), p.limit(0)), (0, base));
        // A move in the next window: moving recurs, the limit widens by it.
        window(&mut p, 1 << 20);
        assert_eq!(p.move_slack(), 1 << 20);
        assert_eq!(p.limit(0), base + (1 << 20));
        assert_eq!(p.bound(0), 1 << 20, "the bound widens as much");
        // Never past 1/64 of the peak.
        window(&mut p, 8 << 20);
        assert_eq!(p.move_slack(), (64 << 20) / 64);
        // Windows without moves give a quarter back each.
        window(&mut p, 0);
        window(&mut p, 0);
        assert_eq!(p.move_slack(), (1 << 20) * 3 / 4 * 3 / 4);
    }

    #[test]
    fn a_reserve_is_a_floor_under_the_bound_and_the_limit() {
        let mut p = CachePolicy::new(
            &VmConfig::default()
                .cache(0, 0.0)
                .window_ops(4)
                .reserve(256 << 20),
        );
        assert_eq!((p.bound(0), p.limit(0)), (256 << 20, 256 << 20));
        p.on_alloc(64 << 20);
        // Within the reserve: what is not allocated of it may stay unused.
        assert_eq!(p.bound(0), 192 << 20);
        // Past it, the usual bound: nothing was freed since the peak.
        p.on_alloc(256 << 20);
        assert_eq!((p.bound(0), p.limit(0)), (0, 320 << 20));
        // Freed again and two windows on, the recent peak is gone but the reserve
        // is still allowed.
        p.on_free(300 << 20);
        for _ in 0..8 {
            p.tick();
        }
        assert_eq!(p.allocated(), 20 << 20);
        assert_eq!(p.bound(0), (256 - 20) << 20);
        assert_eq!(p.limit(0), 256 << 20);
    }

    #[test]
    fn without_a_cap_moves_never_widen_the_limit() {
        let mut p = CachePolicy::new(
            &VmConfig::default()
                .cache(0, 0.0)
                .window_ops(4)
                .move_slack_max(0.0),
        );
        p.on_alloc(64 << 20);
        for _ in 0..4 {
            window(&mut p, 4 << 20);
        }
        assert_eq!((p.move_slack(), p.limit(0)), (0, 64 << 20));
    }
}
