//! The control loop of one model node: [`Scheduler`] owns the arrival-rate estimator, the
//! [`Decider`] and the online profile, is fed arrivals, served calls and queue readings with their
//! timestamps, and is polled (weir's control loop: ten times a period).
//!
//! One update ([`Scheduler::poll`] past a period boundary), in order:
//! 1. the period's service times go to the online profile, tagged with its load ([`tagging`]);
//! 2. the estimate `λ̂` and the planned load;
//! 3. a re-evaluation with the blended rates when one is due ([`reprofile`]);
//! 4. the backlog guard, which overrides everything after it ([`backlog`]);
//! 5. an exploration or trial under way ends once measured, and is decided at once ([`explore`]);
//! 6. otherwise the decider's decision, with hysteresis;
//! 7. otherwise, perhaps, a new exploration.
//!
//! Between two updates a poll only tests for a surge ([`surge`]).
//!
//! - **Estimator** ([`crate::estimator`]). Arrivals are counted in buckets one period long; `λ̂` is
//!   the count in the last complete buckets covering the window (5 s), divided by their length —
//!   fewer buckets right after start, or after a change of load beyond `change_sigmas` (3.5): with
//!   the whole window, a step up from low to moderate load would take the window's length to be
//!   seen, and the configuration chosen for low load would queue meanwhile.
//! - **Planning load** (`load_margin_sigmas`, 1). Decisions are made for `λ̂ + 1σ`, σ = `√n/span`
//!   the Poisson standard error of the window's count `n`, not for `λ̂`: under-estimating load
//!   costs a growing queue, over-estimating it a modestly slower configuration. With a 5 s window
//!   at 7.5 requests/s, `λ̂` alone swings ±16 %, enough to flap across a crossover 15 % away; the
//!   margin biases near-crossover choices towards capacity, like the table's conservative row
//!   lookup.

mod backlog;
mod explore;
mod reprofile;
mod surge;
pub(super) mod tagging;

use super::{
    Decider, OnlineCounters, Reprofile, SchedulerError, SchedulerOptions, Standing, Switch,
    SwitchReason,
};
use crate::config::Config;
use crate::estimator::{RateEstimate, RateEstimator};
use crate::online::OnlineProfile;
use crate::slow_state::SlowStates;
use crate::table::Candidates;
use backlog::QueueReadings;
use explore::Exploration;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// One served request's service time as the executor measured it ([`Scheduler::record_service`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServedCall {
    /// The tuple it ran as: its configuration's intra-op threads, with `tuple.concurrency` requests
    /// running (time-weighted mean over the call, rounded).
    pub tuple: Config,
    /// Its service time, seconds.
    pub seconds: f64,
    /// How long its slot had been idle before it (`None` when unknown).
    pub idle_before: Option<Duration>,
    /// Time from the executor's last switch of configuration to the call's start: zero when a switch
    /// came while the call ran, `None` when none came since the executor started.
    pub since_switch: Option<Duration>,
}

impl ServedCall {
    /// A call of `tuple` that took `seconds`, with no idle gap or switch known.
    pub fn new(tuple: Config, seconds: f64) -> Self {
        Self {
            tuple,
            seconds,
            idle_before: None,
            since_switch: None,
        }
    }
}

/// Estimator plus decider for one model node: feed it arrivals and poll it; it decides once per period.
#[derive(Debug, Clone)]
pub struct Scheduler {
    estimator: RateEstimator,
    decider: Decider,
    next_update: Duration,
    last_estimate: Option<RateEstimate>,
    online: Option<OnlineProfile>,
    /// Updates made so far.
    updates: u64,
    /// The last estimates, newest last, as many as exploration's `steady_periods`.
    recent: VecDeque<f64>,
    exploring: Option<Exploration>,
    last_exploration: Option<Duration>,
    /// When each configuration was last explored, per load band of the planned load (`None`: no bands),
    /// and how many trials in a row it has had there without being kept.
    explored: BTreeMap<(Config, Option<i64>), (Duration, u32)>,
    reprofiles: Vec<Reprofile>,
    counters: OnlineCounters,
    /// Service times recorded since the last update, tagged with that period's arrival rate at the next one.
    pending: Vec<(Duration, Config, f64, Option<f64>)>,
    /// Arrivals recorded since the last update, and when that was.
    arrivals_since_update: u64,
    last_update_at: Duration,
    /// The arrival rate of the last period whose samples were flushed (for `tagging::is_load_step`).
    last_period_rate: Option<f64>,
    /// Arrivals handed over since the last update, by when (for `split_at_step`).
    period_arrivals: Vec<(Duration, u64)>,
    /// The estimated arrival rate at the last re-evaluation.
    reevaluated_at: Option<f64>,
    /// Whether a surge switched the configuration since the last update (at most one per period).
    surged: bool,
    /// The executor's queue readings since the last update (backlog guard).
    queue: QueueReadings,
    /// Consecutive periods in which the queue grew without emptying.
    backlogged_periods: u32,
    /// The update until which the configuration is on probation (backlog guard).
    probation_until: u64,
    /// When each configuration was barred by the backlog guard, per load band of the planned load then.
    barred: BTreeMap<(Config, Option<i64>), Duration>,
    /// The slowest level each tuple's calls ran at lately (*Slow states*).
    slow_states: Option<SlowStates>,
}

/// Service times held for tagging at most; beyond it they are tagged with the last estimate at once.
const MAX_PENDING_SAMPLES: usize = 1 << 16;

/// Hand-overs of arrivals kept per period at most, for locating a step of load in it; beyond it they
/// are merged into the last one (the step is then placed less precisely).
const MAX_PERIOD_ENTRIES: usize = 4096;

impl Scheduler {
    /// A scheduler started at `now`, running `initial`.
    ///
    /// # Errors
    /// As [`Decider::new`] and [`RateEstimator::new`].
    pub fn new(
        candidates: Candidates,
        initial: Config,
        options: SchedulerOptions,
        now: Duration,
    ) -> Result<Self, SchedulerError> {
        let estimator = RateEstimator::new(options.window, options.period, now)?
            .with_change_sigmas(options.change_sigmas);
        let next_update = estimator.next_boundary(now);
        if let Some(o) = &options.online {
            if o.memory.is_zero() {
                return Err(SchedulerError::BadOptions(
                    "online memory must be longer than zero".into(),
                ));
            }
            if o.reevaluate_periods == 0 {
                return Err(SchedulerError::BadOptions(
                    "online reevaluate_periods must be at least 1".into(),
                ));
            }
            if let Some(e) = &o.explore {
                if e.max_periods == 0 || e.steady_periods == 0 {
                    return Err(SchedulerError::BadOptions(
                        "exploration max_periods and steady_periods must be at least 1".into(),
                    ));
                }
            }
        }
        let online = options.online.map(|o| OnlineProfile::new(&candidates, o));
        let slow_states = options
            .online
            .and_then(|o| o.slow_states)
            .map(SlowStates::new);
        let decider = Decider::new(candidates, initial, options)?;
        Ok(Self {
            estimator,
            decider,
            next_update,
            last_estimate: None,
            online,
            updates: 0,
            recent: VecDeque::new(),
            exploring: None,
            last_exploration: None,
            explored: BTreeMap::new(),
            reprofiles: Vec::new(),
            counters: OnlineCounters::default(),
            pending: Vec::new(),
            arrivals_since_update: 0,
            last_update_at: now,
            last_period_rate: None,
            period_arrivals: Vec::new(),
            reevaluated_at: None,
            surged: false,
            queue: QueueReadings::default(),
            backlogged_periods: 0,
            probation_until: 0,
            barred: BTreeMap::new(),
            slow_states,
        })
    }

    /// Records the service time of one served request at `now`. Ignored without online
    /// re-profiling, and left out (counted as settling) when the call began within
    /// `settle_after_switch` of a switch; returns whether it was used. The sample reaches the profile
    /// at the next update, tagged with the arrival rate measured over the period it was served in
    /// (load bands).
    pub fn record_service(&mut self, now: Duration, call: ServedCall) -> bool {
        let Some(online) = &mut self.online else {
            return false;
        };
        let settle = online.options().settle_after_switch;
        if call.since_switch.is_some_and(|d| d < settle) {
            self.counters.settling += 1;
            return false;
        }
        let ServedCall {
            tuple,
            seconds,
            idle_before,
            ..
        } = call;
        let idle_before = idle_before.map(|d| d.as_secs_f64());
        if !online.accepts(tuple, seconds) {
            // Counted as rejected there.
            return online.record(now, tuple, seconds, None, idle_before);
        }
        self.counters.samples += 1;
        if let Some(states) = &mut self.slow_states {
            states.record(now, tuple, seconds);
        }
        if self.pending.len() >= MAX_PENDING_SAMPLES {
            let load = self.last_estimate.map(|e| e.rate);
            online.record(now, tuple, seconds, load, idle_before);
        } else {
            self.pending.push((now, tuple, seconds, idle_before));
        }
        true
    }

    /// The re-evaluations that changed the ranking since the last call, oldest first.
    pub fn take_reprofiles(&mut self) -> Vec<Reprofile> {
        std::mem::take(&mut self.reprofiles)
    }

    /// The blended profile, with online re-profiling.
    pub fn online(&self) -> Option<&OnlineProfile> {
        self.online.as_ref()
    }

    /// Counters of the online re-profiling.
    pub fn counters(&self) -> OnlineCounters {
        self.counters
    }

    /// Whether an exploration is under way.
    pub fn is_exploring(&self) -> bool {
        self.exploring.is_some()
    }

    /// Records one arrival at `now`.
    pub fn record_arrival(&mut self, now: Duration) {
        self.record_arrivals(now, 1);
    }

    /// Records `n` arrivals at `now` (a caller that counts arrivals between polls and hands them over
    /// in one go; the count lands in `now`'s bucket, so hand them over well within a period).
    pub fn record_arrivals(&mut self, now: Duration, n: u64) {
        if n > 0 {
            self.estimator.record(now, n);
            self.arrivals_since_update += n;
            let full = self.period_arrivals.len() >= MAX_PERIOD_ENTRIES;
            match self.period_arrivals.last_mut() {
                Some((at, m)) if *at == now || full => *m += n,
                _ => self.period_arrivals.push((now, n)),
            }
        }
    }

    /// Records the number of requests waiting in the executor's queue now (not those running). Read it
    /// several times a period (weir's control loop: every tenth) for the backlog guard (*Backlog*).
    pub fn record_queue(&mut self, waiting: u64) {
        self.queue.add(waiting);
    }

    /// Runs the periodic update if a period boundary has passed since the last one (at most one decision per
    /// call); returns the switch decided, if any. Call it on every arrival and/or from a timer.
    pub fn poll(&mut self, now: Duration) -> Option<Switch> {
        if now < self.next_update {
            return self.surge(now);
        }
        self.surged = false;
        self.next_update = self.estimator.next_boundary(now);
        self.flush_samples(now);
        let estimate = self.estimator.measure(now)?;
        self.last_estimate = Some(estimate);
        self.updates += 1;
        let planned_lambda = self.planned_lambda().unwrap_or(estimate.rate);
        let from = self.decider.current();
        let switch = |to: Config, reason: SwitchReason| Switch {
            at: now,
            from,
            to,
            lambda: estimate.rate,
            planned_lambda,
            reason,
        };
        if let Some(o) = self.online.as_ref().map(|o| *o.options()) {
            if let Some(e) = o.explore {
                self.recent.push_back(estimate.rate);
                while self.recent.len() > e.steady_periods as usize {
                    self.recent.pop_front();
                }
            }
            let scheduled = self.updates.is_multiple_of(u64::from(o.reevaluate_periods));
            let unscheduled = self.reevaluated_at.is_none() || self.load_moved(estimate.rate);
            if scheduled || unscheduled {
                self.reevaluate(now, estimate.rate, planned_lambda, !unscheduled);
            }
        }
        self.refresh_barred(now, planned_lambda);
        if let Some(to) = self.backlog_switch(now, planned_lambda) {
            return Some(switch(to, SwitchReason::Backlog));
        }
        if let Some(ex) = self.exploring {
            let measured = self.online.as_ref().is_some_and(|o| {
                o.options().explore.is_some_and(|e| {
                    o.is_fresh_near(self.decider.current(), planned_lambda, now, e.stale_after)
                })
            });
            if self.updates < ex.until_update
                && !measured
                && !self.decider.is_overloaded(planned_lambda)
            {
                return None;
            }
            self.exploring = None;
            self.reevaluate(now, estimate.rate, planned_lambda, false);
            let to = self.decider.conclude(planned_lambda);
            self.reset_trials(self.decider.current());
            if to.is_some() {
                self.start_probation();
            }
            return to.map(|to| switch(to, SwitchReason::Explored));
        }
        if let Some((to, reason)) = self.decider.decide(planned_lambda) {
            self.reset_trials(to);
            if reason == SwitchReason::Better {
                self.start_probation();
                self.try_unmeasured(to, now, planned_lambda);
            }
            return Some(switch(to, reason));
        }
        let to = self.explore_target(now, planned_lambda)?;
        let periods = self
            .online
            .as_ref()
            .and_then(|o| o.options().explore)
            .map_or(1, |e| e.max_periods);
        if !self.decider.force(to) {
            return None;
        }
        self.start_trial(periods);
        self.last_exploration = Some(now);
        let trials = self
            .explored
            .get(&(to, self.load_band(planned_lambda)))
            .map_or(0, |e| e.1);
        self.explored
            .insert((to, self.load_band(planned_lambda)), (now, trials + 1));
        self.counters.explorations += 1;
        self.start_probation();
        Some(switch(to, SwitchReason::Explore))
    }

    /// The configuration in force.
    pub fn current(&self) -> Config {
        self.decider.current()
    }

    /// The estimate used at the last update.
    pub fn last_estimate(&self) -> Option<RateEstimate> {
        self.last_estimate
    }

    /// The load the last update planned for, `λ̂ + load_margin_sigmas·σ` (`None` before the first).
    pub fn planned_lambda(&self) -> Option<f64> {
        self.last_estimate
            .map(|e| e.rate + self.decider.options.load_margin_sigmas * e.std_error)
    }

    /// Every configuration as the decision weighs it at the last update's planned load, in
    /// [`Config`] order ([`Standing`]; empty before the first update): what `/metrics` shows of why
    /// the node runs what it runs.
    pub fn standings(&self) -> Vec<Standing> {
        let Some(lambda) = self.planned_lambda() else {
            return Vec::new();
        };
        self.decider
            .standings(self.decider.candidates().configs(), lambda)
    }

    /// The decision state (table, candidates).
    pub fn decider(&self) -> &Decider {
        &self.decider
    }
}
