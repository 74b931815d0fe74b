//! Surges (`surge_sigmas`, 4; weir's rule, not the paper's): a step up of load acted on between two
//! updates.
//!
//! A step up of load is first seen at the update after it and then waits out the hold, so the
//! configuration chosen for low load would run on for two periods into the higher load, near
//! saturation, building a queue that takes far longer to drain. So between two updates (the caller
//! polls more often than once a period), once a fifth of the period has passed, the arrivals since
//! the last update are tested against the last estimate: `n − λ̂·τ > z·√(λ̂·τ + n)`, the same
//! Poisson test as the estimator's change detection. On a surge, planning for `n/τ + σ`, the switch
//! is immediate ([`SwitchReason::Surge`]) if the current configuration is beyond its cap there (or
//! unstable) and the choice has more capacity — judged, when the surge's rate is in another load
//! band than the last re-evaluation's, with the rates measured at the surge's load (the slow calls
//! other configurations made at low load must not keep a surge from firing). At most once a period,
//! and never the other way: a step down costs latency, not a queue, and waits for the update and
//! the hold. At `z = 4` a steady Poisson load raises a false surge in fewer than one test in 30,000
//! (a one-sided 4σ tail; `√(λ̂τ + n)` over-counts the variance, so fewer still), and a false one
//! costs a switch towards capacity, which the next updates undo if the load does not bear it out.

use super::Scheduler;
use crate::scheduler::{Switch, SwitchReason};
use std::time::Duration;

/// The shortest part of a period over which arrivals are judged a surge (`surge_sigmas`):
/// a fifth (200 ms at the default 1 s period), enough arrivals at the loads that matter for a 4σ test to be
/// meaningful, and an order of magnitude sooner than the next update plus the hold.
pub(super) const SURGE_MIN_FRACTION: f64 = 0.2;

impl Scheduler {
    /// Between two updates: a switch on a surge of arrivals since the last update (
    /// *Surges*), if one is due.
    pub(super) fn surge(&mut self, now: Duration) -> Option<Switch> {
        let z = self.decider.options.surge_sigmas;
        if !(z.is_finite() && z > 0.0) || self.surged {
            return None;
        }
        let base = self.last_estimate?;
        let elapsed = now.saturating_sub(self.last_update_at).as_secs_f64();
        if elapsed < SURGE_MIN_FRACTION * self.decider.options.period.as_secs_f64() {
            return None;
        }
        let n = self.arrivals_since_update as f64;
        let expected = base.rate * elapsed;
        if n - expected <= z * (expected + n).max(1.0).sqrt() {
            return None;
        }
        let rate = n / elapsed;
        let planned_lambda = rate + self.decider.options.load_margin_sigmas * n.sqrt() / elapsed;
        if self.load_moved(rate) {
            // Judge the surge with the rates measured at its load, not at the load before the step.
            self.reevaluate(now, rate, planned_lambda, false);
        }
        let from = self.decider.current();
        let to = self.decider.surge(planned_lambda)?;
        self.reset_trials(to);
        self.surged = true;
        self.exploring = None;
        Some(Switch {
            at: now,
            from,
            to,
            lambda: rate,
            planned_lambda,
            reason: SwitchReason::Surge,
        })
    }
}
