//! The backlog guard ([`BacklogGuard`], on by default; weir's rule, not the paper's): a queue that
//! keeps growing overrides the model.
//!
//! The caller reads the waiting count several times a period ([`Scheduler::record_queue`]). When in
//! `periods` (2) periods in a row the queue never emptied and ended longer than it began, the
//! current configuration is not keeping up whatever the model says: it is barred within one load
//! band of the planned load for `barred_for` (60 s; neither chosen nor explored), and the switch is
//! immediate to the configuration with the most capacity among those predicted to keep up
//! ([`SwitchReason::Backlog`]). A true overload, where none is predicted to keep up, moves nothing.
//!
//! Why: a configuration can be bistable under moderate load — keeping up while no queue forms; once
//! one does, its threads run back to back, every other thread of the process preempts one of them
//! mid-call, calls take twice as long, and the queue only grows. The measured service times see
//! that late (blended over seconds, re-evaluated every few updates, a choice on new rates waiting
//! for confirmation). A queue that grows for two whole periods is direct evidence, independent of
//! the model: at the utilisations the caps allow, a stable queue empties many times a second.
//!
//! What the waiting count is, is the caller's: reading only the executor's queue misses a backlog
//! in front of it (a starved dataflow holding requests before they reach the executor, whose
//! arrival count is then blind too), so weir feeds a graph's only model node its arrivals and
//! waiting requests from the graph's admission; other nodes read their executor's.
//!
//! - **Probation** (`probation_periods`, 3). For the updates after a switch made on the model's
//!   word (a predicted gain, an exploration, or its conclusion) one period of growth is enough: a
//!   configuration the model has just picked has not yet shown it keeps up, while one that has
//!   served for a while keeps the two-period rule against a noisy period. During probation a period
//!   whose mean waiting count exceeds `probation_waiting_margin` (2) times the model's `λ·W`, plus
//!   one request, backs it out too: a queue that keeps emptying never grows for the guard, yet can
//!   wait twice as long as the model predicted.
//! - The waiting check skips a period that began with the queue already beyond its bound: that is a
//!   backlog the previous configuration left, and working it off is not slowness (the growth rule
//!   still applies); otherwise a move away from a collapsing configuration is backed out, and
//!   barred, on the queue it inherited.
//!
//! [`SwitchReason::Backlog`]: crate::scheduler::SwitchReason::Backlog

use super::Scheduler;
use crate::config::Config;
use crate::scheduler::BacklogGuard;
use std::time::Duration;

/// The queue lengths read over one period ([`Scheduler::record_queue`]).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct QueueReadings {
    first: Option<u64>,
    last: u64,
    min: u64,
    sum: u64,
    readings: u32,
}

impl QueueReadings {
    pub(super) fn add(&mut self, waiting: u64) {
        self.min = if self.first.is_none() {
            waiting
        } else {
            self.min.min(waiting)
        };
        self.first.get_or_insert(waiting);
        self.last = waiting;
        self.sum = self.sum.saturating_add(waiting);
        self.readings += 1;
    }

    /// Mean waiting count over at least `min_readings` readings.
    pub(super) fn mean(&self, min_readings: u32) -> Option<f64> {
        (self.readings >= min_readings.max(1)).then(|| self.sum as f64 / f64::from(self.readings))
    }

    /// Whether, over at least `min_readings` readings, the queue never emptied and ended longer than
    /// it began.
    pub(super) fn grew(&self, min_readings: u32) -> bool {
        self.readings >= min_readings.max(2)
            && self.min >= 1
            && self.first.is_some_and(|f| self.last > f)
    }
}

impl Scheduler {
    /// Whether `config` is barred near the load band `band` at `now` (the band itself or one beside it).
    pub(super) fn is_barred(&self, config: Config, band: Option<i64>, now: Duration) -> bool {
        let Some(guard) = self.decider.options.backlog else {
            return false;
        };
        self.barred.iter().any(|(&(c, b), &at)| {
            c == config
                && now.saturating_sub(at) < guard.barred_for
                && match (b, band) {
                    (Some(b), Some(band)) => (b - band).abs() <= 1,
                    (None, None) => true,
                    _ => false,
                }
        })
    }

    /// Hands the decider the configurations barred near `planned_lambda`.
    pub(super) fn refresh_barred(&mut self, now: Duration, planned_lambda: f64) {
        let band = self.load_band(planned_lambda);
        let barred: Vec<Config> = self
            .decider
            .candidates()
            .configs()
            .filter(|&c| self.is_barred(c, band, now))
            .collect();
        self.decider.set_barred(barred);
    }

    /// The backlog guard at an update (*Backlog*): after [`BacklogGuard::periods`]
    /// periods in a row in which the queue grew without emptying, bars the current configuration near
    /// this load and moves to the configuration with the most capacity among those predicted to keep
    /// up at `planned_lambda` and not barred, if there is one.
    pub(super) fn backlog_switch(&mut self, now: Duration, planned_lambda: f64) -> Option<Config> {
        let readings = std::mem::take(&mut self.queue);
        let guard = self.decider.options.backlog?;
        self.backlogged_periods = if readings.grew(guard.min_readings) {
            self.backlogged_periods + 1
        } else {
            0
        };
        let on_probation = self.updates <= self.probation_until;
        let needed = if on_probation {
            1
        } else {
            guard.periods.max(1)
        };
        let slower_than_predicted =
            on_probation && self.waits_beyond_prediction(&readings, guard, planned_lambda);
        if self.backlogged_periods < needed && !slower_than_predicted {
            return None;
        }
        let current = self.decider.current();
        let band = self.load_band(planned_lambda);
        let to = self
            .decider
            .candidates()
            .as_slice()
            .iter()
            .filter(|c| c.config != current && c.capacity() > planned_lambda)
            .filter(|c| !self.is_barred(c.config, band, now))
            .max_by(|a, b| a.capacity().total_cmp(&b.capacity()))
            .map(|c| c.config)?;
        self.backlogged_periods = 0;
        self.barred.insert((current, band), now);
        self.refresh_barred(now, planned_lambda);
        if !self.decider.force(to) {
            return None;
        }
        self.exploring = None;
        self.reset_trials(to);
        self.counters.backlogs += 1;
        Some(to)
    }

    /// Whether the period's mean waiting count (`readings`) exceeds
    /// [`BacklogGuard::probation_waiting_margin`] times the model's `λ·W` for the current
    /// configuration at `planned_lambda`, plus one request (*Backlog*, probation).
    fn waits_beyond_prediction(
        &self,
        readings: &QueueReadings,
        guard: BacklogGuard,
        planned_lambda: f64,
    ) -> bool {
        let margin = guard.probation_waiting_margin;
        if !(margin.is_finite() && margin > 0.0) {
            return false;
        }
        let Some(mean) = readings.mean(guard.min_readings) else {
            return false;
        };
        let current = self.decider.current();
        let predicted = self
            .decider
            .candidates()
            .get(current)
            .and_then(|c| {
                c.estimate(planned_lambda, self.decider.options.predictor)
                    .ok()
            })
            .map(|e| planned_lambda * e.waiting);
        // A period that began with a queue already beyond the bound holds a backlog from before
        // the switch; working it off is not waiting the configuration causes (the growth rule still
        // judges it). Otherwise a move away from a collapsing configuration is backed out, and the
        // configuration it moved to barred, on the backlog it inherited.
        predicted.is_some_and(|q| {
            let bound = margin * q + 1.0;
            q.is_finite() && mean > bound && readings.first.is_some_and(|f| (f as f64) <= bound)
        })
    }

    /// Puts the configuration just adopted on the model's word on probation: for the next
    /// [`BacklogGuard::probation_periods`] updates one period of a growing queue, or of a waiting
    /// count beyond the model's ([`Scheduler::waits_beyond_prediction`]), moves it (
    /// *Backlog*). The readings of the period before the switch are the old configuration's.
    pub(super) fn start_probation(&mut self) {
        if let Some(guard) = self.decider.options.backlog {
            self.probation_until = self.updates + u64::from(guard.probation_periods);
            self.backlogged_periods = 0;
        }
    }
}
