//! Rates by load ([`LoadBands`](crate::online::LoadBands), on by default): each service time is
//! tagged with the arrival rate of the period it was served in, so that the decider gets, per
//! tuple, the rate measured near the current load where there is one.
//!
//! Service times are held until the period's update, whose arrival count gives that rate (the
//! estimate itself lags a step by its window). A configuration without measurements at this load is
//! then judged with the slowdown the current one shows here
//! ([`Evidence`](crate::scheduler::Evidence)). A period whose arrival count differs from the
//! previous period's rate by more than `change_sigmas` Poisson deviations holds a step of load, and
//! one rate for it would be a mix of the two loads, at which no call was served: calls served at
//! low load in the period of a step up would land in a band next to the higher load's and count as
//! evidence there. So that period's service times are split at the step's most likely moment
//! ([`split_at_step`]) and tagged with the rate on their side of it (none after it when less than a
//! fifth of the period is left).

use super::surge::SURGE_MIN_FRACTION;
use super::Scheduler;
use std::time::Duration;

/// Where the load changed within a period that holds a step (`split_at_step`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(in crate::scheduler) struct StepSplit {
    /// Service times recorded before this were served at `before`, the others at `after`.
    pub(in crate::scheduler) at: Duration,
    /// The arrival rate before the step (the previous period's).
    pub(in crate::scheduler) before: f64,
    /// The rate after it, `None` when less than the minimum span of the period is left after it.
    pub(in crate::scheduler) after: Option<f64>,
}

/// The most likely moment of a step of load within the period `[start, end)`, given the arrivals
/// handed over in it (`(when, how many)`, in time order) and the previous period's rate `before`: the
/// split that maximises the Poisson likelihood of the arrivals with rate `before` up to it and their
/// own maximum-likelihood rate after it. Candidate splits are the period's start and each hand-over.
pub(in crate::scheduler) fn split_at_step(
    before: f64,
    (start, end): (Duration, Duration),
    arrivals: &[(Duration, u64)],
    min_after: Duration,
) -> StepSplit {
    // x·ln(y), with 0·ln(0) = 0.
    let xlny = |x: f64, y: f64| if x == 0.0 { 0.0 } else { x * y.ln() };
    let total: u64 = arrivals.iter().map(|a| a.1).sum();
    let mut best = (f64::NEG_INFINITY, start, total);
    let mut seen = 0u64;
    let splits = std::iter::once((start, 0)).chain(arrivals.iter().copied());
    for (at, n) in splits {
        seen += n;
        if at >= end {
            break;
        }
        let (n1, n2) = (seen as f64, (total - seen) as f64);
        let (t1, t2) = (
            at.saturating_sub(start).as_secs_f64(),
            end.saturating_sub(at).as_secs_f64(),
        );
        let likelihood = xlny(n1, before) - before * t1 + xlny(n2, n2 / t2) - n2;
        if likelihood > best.0 {
            best = (likelihood, at, total - seen);
        }
    }
    let (_, at, after_count) = best;
    let after_span = end.saturating_sub(at);
    StepSplit {
        at,
        before,
        after: (after_span >= min_after && !after_span.is_zero())
            .then(|| after_count as f64 / after_span.as_secs_f64()),
    }
}

/// Whether `count` arrivals over `span` seconds differ from the previous period's rate `before` by more
/// than `z` Poisson standard deviations (the estimator's change test): the period holds a step of
/// load, which `split_at_step` then places. `z` of 0 turns the test off.
pub(in crate::scheduler) fn is_load_step(before: f64, count: u64, span: f64, z: f64) -> bool {
    if !(z.is_finite() && z > 0.0 && span > 0.0) {
        return false;
    }
    let expected = before * span;
    let n = count as f64;
    (n - expected).abs() > z * (n + expected).max(1.0).sqrt()
}

impl Scheduler {
    /// Hands the held service times to the profile, tagged with the arrival rate since the last update;
    /// when that period holds a step of load, those served before the step with the rate before it and
    /// those after with the rate after it (*Rates by load*).
    pub(super) fn flush_samples(&mut self, now: Duration) {
        let start = self.last_update_at;
        let span = now.saturating_sub(start).as_secs_f64();
        let count = self.arrivals_since_update;
        let rate = (span > 0.0).then(|| count as f64 / span);
        let z = self.decider.options.change_sigmas;
        let split = match (self.last_period_rate, rate) {
            (Some(before), Some(_)) if is_load_step(before, count, span, z) => {
                let min_after = self.decider.options.period.mul_f64(SURGE_MIN_FRACTION);
                Some(split_at_step(
                    before,
                    (start, now),
                    &self.period_arrivals,
                    min_after,
                ))
            }
            _ => None,
        };
        self.last_period_rate = match split {
            Some(s) => s.after.or(rate),
            None => rate.or(self.last_period_rate),
        };
        self.arrivals_since_update = 0;
        self.period_arrivals.clear();
        self.last_update_at = now;
        let Some(online) = &mut self.online else {
            self.pending.clear();
            return;
        };
        for (at, tuple, seconds, idle_before) in self.pending.drain(..) {
            let load = match split {
                Some(s) if at < s.at => Some(s.before),
                Some(s) => s.after,
                None => rate,
            };
            online.record(at, tuple, seconds, load, idle_before);
        }
    }
}
