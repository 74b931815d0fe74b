//! The scheduler's tunables and their defaults. Each field states what it means and its default;
//! the reasoning behind a rule is in the file that applies it (listed in [`crate::scheduler`]'s
//! docs). The defaults are what weir serves with; the YAML sets only one cap per node
//! (`parallelism: {auto: {max_utilisation: U}}`, which also sets `unproven_utilisation: None`).

use crate::baseline::Predictor;
use crate::online::OnlineOptions;
use crate::table::TableOptions;
use serde::Serialize;
use std::time::Duration;
/// How the decision picks the configuration for `λ̂`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Lookup {
    /// Evaluate every configuration at `λ̂` (default).
    Online,
    /// Use the paper's reference table (row with the smallest `λ_k ≥ λ̂`).
    Table(TableOptions),
}

/// Tunables of the estimator and the decision.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SchedulerOptions {
    /// Sliding window of the arrival-rate estimate (5 s; cut short at a step of load,
    /// `change_sigmas`).
    pub window: Duration,
    /// Update period: at most one decision per period (1 s). Surges are acted on between updates.
    pub period: Duration,
    /// Consecutive updates a new choice must persist before it is adopted (2): a one-period spike of
    /// the estimate switches nothing (*Hysteresis*).
    pub hold_periods: u32,
    /// Predicted relative latency gain a switch must bring, online evaluation only (0.02): near a
    /// crossover two configurations are predicted within a few % of each other, and the estimate's
    /// noise alone would move the choice back and forth.
    pub min_gain: f64,
    /// Online evaluation chooses among the configurations predicted at most this busy at the planned
    /// load, and the one with the most capacity when none is (0.6, for a configuration shown to hold
    /// near the load: *Earned headroom*); 1.0 or more, with `unproven_utilisation: None`, turns the
    /// rule off.
    pub max_utilisation: f64,
    /// The cap of a configuration not shown to hold near the planned load — its calls there not
    /// measured, or slower than `holding_slowdown` times the profile's, or its slowest level lately
    /// unable to carry the load — when lower than `max_utilisation` (0.5; `None`: every
    /// configuration has `max_utilisation`; *Earned headroom*, *Slow states*).
    pub unproven_utilisation: Option<f64>,
    /// A configuration holds near the planned load when its calls measured there took at most this
    /// many times their profiled time (1.3; [`Evidence`](super::Evidence)): calls that hold run close
    /// to their profile, calls of a configuration collapsing under a queue about twice as long.
    pub holding_slowdown: f64,
    /// The cap's dead band (0.05): a configuration other than the current one is chosen within its cap
    /// only when predicted at most `cap · (1 − utilisation_band)` busy, so the planned load's Poisson
    /// wobble does not move a configuration back and forth across the cap.
    pub utilisation_band: f64,
    /// When the current configuration and the choice are both beyond their caps (so the choice is by
    /// capacity), the choice must have at least this much more capacity (0.05): measured capacities
    /// move by a few % between re-evaluations. The current one being unstable overrides it.
    pub min_capacity_gain: f64,
    /// The decision plans for `λ̂ + load_margin_sigmas · σ(λ̂)` (1.0), σ the Poisson standard error of
    /// the window's count (*Planning load*).
    pub load_margin_sigmas: f64,
    /// The estimator's window is cut short at a change of load beyond this many standard deviations
    /// (3.5; 0 turns it off; [`crate::estimator`]). The same test finds a step of load within a period
    /// (*Rates by load*).
    pub change_sigmas: f64,
    /// Between two updates, arrivals this many standard deviations above the last estimate are a surge,
    /// acted on at once when it puts the current configuration beyond its cap (4.0: a false surge in
    /// fewer than one test in 30,000 under a steady load; 0 turns it off; *Surges*).
    pub surge_sigmas: f64,
    /// Online evaluation (default) or the paper's table lookup.
    pub lookup: Lookup,
    /// Predictor used (SERF's model).
    pub predictor: Predictor,
    /// Online re-profiling from measured service times, with its load bands, exploration and slow
    /// levels ([`OnlineOptions`]); `None` keeps the offline profile for ever.
    pub online: Option<OnlineOptions>,
    /// Leave a configuration whose queue grows although the model says it keeps up (*Backlog*); `None`
    /// turns it off.
    pub backlog: Option<BacklogGuard>,
}

/// When a growing queue overrides the model ([`SchedulerOptions::backlog`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BacklogGuard {
    /// Consecutive periods in which the queue never emptied and ended longer than it began (2).
    pub periods: u32,
    /// Updates after a switch made on the model's word ([`SwitchReason::Better`](super::SwitchReason::Better),
    /// [`SwitchReason::Explore`](super::SwitchReason::Explore),
    /// [`SwitchReason::Explored`](super::SwitchReason::Explored)) during which one such period is
    /// enough (3; *Backlog*, probation): a configuration just picked has not yet shown it keeps up.
    pub probation_periods: u32,
    /// During probation, a period whose mean waiting count exceeds this many times what the model
    /// predicts for the configuration (`λ̂ · W`, Little's law), plus one request, also backs it out
    /// (2.0; 0 turns the check off).
    pub probation_waiting_margin: f64,
    /// Queue readings a period needs before it can count (3; weir's control loop reads ten a period).
    pub min_readings: u32,
    /// How long the configuration is then neither chosen nor explored within one load band of that
    /// load (60 s).
    pub barred_for: Duration,
}

impl Default for BacklogGuard {
    fn default() -> Self {
        Self {
            periods: 2,
            probation_periods: 3,
            probation_waiting_margin: 2.0,
            min_readings: 3,
            barred_for: Duration::from_secs(60),
        }
    }
}

impl Default for SchedulerOptions {
    fn default() -> Self {
        Self {
            window: Duration::from_secs(5),
            period: Duration::from_secs(1),
            hold_periods: 2,
            min_gain: 0.02,
            max_utilisation: 0.6,
            unproven_utilisation: Some(0.5),
            holding_slowdown: 1.3,
            utilisation_band: 0.05,
            min_capacity_gain: 0.05,
            load_margin_sigmas: 1.0,
            change_sigmas: 3.5,
            surge_sigmas: 4.0,
            lookup: Lookup::Online,
            predictor: Predictor::Serf,
            online: Some(OnlineOptions::default()),
            backlog: Some(BacklogGuard::default()),
        }
    }
}
