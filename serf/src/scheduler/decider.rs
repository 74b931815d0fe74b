//! The decision rule: given the planned load and the rates in force, which configuration now (SERF,
//! §IV-D: the best configuration for the estimated load), with hysteresis. Pure: fed loads and
//! rates, never a clock or a queue; the control loop ([`super::Scheduler`]) feeds it.
//!
//! - **Choice.** By default every configuration is evaluated with the model (Eq. 13) at the planned
//!   load; [`Lookup::Table`] uses the paper's reference table instead (the row with the smallest
//!   `λ_k ≥ λ̂`). Online, the choice is the fastest configuration within its utilisation cap, and
//!   the one with the most capacity when none is (the caps and why: [`caps`]). Configurations the
//!   backlog guard barred are left out, unless that leaves none.
//! - **Hysteresis.** Another configuration is adopted only after it has been the choice for
//!   `hold_periods` consecutive updates (2) and, evaluated online, only if it is predicted at least
//!   `min_gain` (2 %) faster than the current one; a configuration beyond its cap is left without
//!   the gain test (the model is least trustworthy there), and when both are beyond their caps (the
//!   choice is then by capacity) the choice needs `min_capacity_gain` (5 %) more capacity instead:
//!   capacities measured from tens of calls move by a few % from one re-evaluation to the next, and
//!   two configurations of nearly equal capacity would trade places on noise. When the current
//!   configuration is unstable at the load (`λ ≥ c·μ_c`) the switch is immediate, since its queue
//!   grows without bound.
//! - **Unconfirmed choices.** A choice that only new measured rates made — at a scheduled
//!   re-evaluation, the load in the same band, the old rates choosing the current configuration —
//!   is adopted only once the next scheduled re-evaluation still makes it, unless the current
//!   configuration is beyond its cap (a move for capacity never waits). The hold counts updates and
//!   the rates change only at re-evaluations, so the hold filters the noise of `λ̂` but not that of
//!   the rates: one fast estimate of a rate could move the node to a configuration the next
//!   re-evaluation moves it back from. Waiting costs a true flip one re-evaluation interval.
//! - **Evidence** ([`Evidence`]): a configuration not measured at this load is judged with the
//!   slowdown the current one shows here.
//! - **Surges** ([`Decider::surge`]): an immediate decision between two updates, only ever towards
//!   capacity.

mod caps;

use super::{Lookup, SchedulerError, SchedulerOptions, SwitchReason};
use crate::config::Config;
use crate::model::{Estimate, ModelError};
use crate::table::{Candidates, ConfigTable};
use std::collections::BTreeMap;

/// Which configurations' rates were measured at the load the decision is for (online re-profiling with
/// load bands, [`crate::online`]), and how much slower each ran there than its offline profile says
/// (`capacity offline / capacity measured`). Without it (the default) every rate counts the same.
///
/// Why: under load, a configuration measured at that load is compared with others known only from the
/// offline profile or from lower loads, which are optimistic on a machine whose other threads compete
/// for the cores; such a comparison moves the node to a configuration that looked fast only because it
/// was never measured here. So the decider leaves a configuration measured here for one that is not only
/// if the move still wins with the newcomer's rates cut by the current configuration's slowdown: the
/// assumption is that the load slows every configuration alike. When the current configuration's
/// deviation is its own (a bad profile of that tuple) the assumption is wrong and the move is held back;
/// exploration, which trials an unmeasured configuration within the cap, is how that is found out. A
/// switch away from an unstable configuration is never held back.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evidence {
    /// Evidenced configurations and their slowdown at the load.
    pub slowdown: BTreeMap<Config, f64>,
    /// The capacity (requests/s) each configuration would have at the slowest level its calls ran at
    /// lately, where it has one ([`crate::slow_state`]; *Slow states*); `None` when slow
    /// levels are not tracked (`OnlineOptions::slow_states: None`, and the default here). Tracked, a
    /// configuration without a level has not shown it and earns no headroom.
    pub slow_capacity: Option<BTreeMap<Config, f64>>,
}

/// The hysteresis state machine over decisions (pure: fed `λ̂` values).
#[derive(Debug, Clone)]
pub struct Decider {
    candidates: Candidates,
    table: Option<ConfigTable>,
    /// The options (the control loop reads its own tunables here).
    pub(super) options: SchedulerOptions,
    current: Config,
    pending: Option<(Config, u32)>,
    /// The configurations whose rates were measured at the load they are used for, each with its slowdown
    /// there (online re-profiling with load bands; empty otherwise). See [`Evidence`].
    evidence: Evidence,
    /// A configuration that a periodic re-evaluation made the choice at an unchanged load (new rates, not a
    /// new load), not yet confirmed by the next periodic re-evaluation (*Hysteresis*).
    unconfirmed: Option<Config>,
    /// Configurations not to be chosen at the current load (*Backlog*).
    barred: Vec<Config>,
}

impl Decider {
    /// A decider currently running `initial`.
    ///
    /// # Errors
    /// [`SchedulerError::NoCandidates`], [`SchedulerError::UnknownInitial`], or the table's error.
    pub fn new(
        candidates: Candidates,
        initial: Config,
        options: SchedulerOptions,
    ) -> Result<Self, SchedulerError> {
        if candidates.as_slice().is_empty() {
            return Err(SchedulerError::NoCandidates);
        }
        if candidates.get(initial).is_none() {
            return Err(SchedulerError::UnknownInitial(initial));
        }
        if !(options.min_gain.is_finite() && options.min_gain >= 0.0) {
            return Err(SchedulerError::BadOptions(format!(
                "min_gain {} must be ≥ 0",
                options.min_gain
            )));
        }
        if !(options.min_capacity_gain.is_finite() && options.min_capacity_gain >= 0.0) {
            return Err(SchedulerError::BadOptions(format!(
                "min_capacity_gain {} must be ≥ 0",
                options.min_capacity_gain
            )));
        }
        if let Some(u) = options.unproven_utilisation {
            if !(u.is_finite() && u > 0.0) {
                return Err(SchedulerError::BadOptions(format!(
                    "unproven_utilisation {u} must be > 0"
                )));
            }
        }
        if !(options.holding_slowdown.is_finite() && options.holding_slowdown > 0.0) {
            return Err(SchedulerError::BadOptions(format!(
                "holding_slowdown {} must be > 0",
                options.holding_slowdown
            )));
        }
        if !(options.load_margin_sigmas.is_finite() && options.load_margin_sigmas >= 0.0) {
            return Err(SchedulerError::BadOptions(format!(
                "load_margin_sigmas {} must be ≥ 0",
                options.load_margin_sigmas
            )));
        }
        let table = match options.lookup {
            Lookup::Online => None,
            Lookup::Table(t) => Some(ConfigTable::build(&candidates, t)?),
        };
        Ok(Self {
            candidates,
            table,
            options,
            current: initial,
            pending: None,
            evidence: Evidence::default(),
            unconfirmed: None,
            barred: Vec::new(),
        })
    }

    /// The configuration in force.
    pub fn current(&self) -> Config {
        self.current
    }

    /// The reference table, when [`Lookup::Table`] is used.
    pub fn table(&self) -> Option<&ConfigTable> {
        self.table.as_ref()
    }

    /// The configurations chosen among.
    pub fn candidates(&self) -> &Candidates {
        &self.candidates
    }

    /// The configuration the model prefers at `lambda`, without hysteresis: the table row, or the online
    /// best, or (when nothing is stable) the largest-capacity configuration.
    /// Barred configurations are left out, unless that leaves none.
    pub fn target(&self, lambda: f64) -> Config {
        let choosable = self.choosable();
        let fallback = choosable.max_capacity().map_or(self.current, |c| c.config);
        match &self.table {
            Some(t) if self.barred.is_empty() => t.lookup(lambda),
            Some(_) => fallback,
            None => self.best_within_cap(&choosable, lambda).unwrap_or(fallback),
        }
    }

    /// The candidates without the barred configurations (all of them when every one is barred).
    fn choosable(&self) -> std::borrow::Cow<'_, Candidates> {
        if self.barred.is_empty() {
            return std::borrow::Cow::Borrowed(&self.candidates);
        }
        let left: Vec<(Config, Vec<f64>)> = self
            .candidates
            .as_slice()
            .iter()
            .filter(|c| !self.barred.contains(&c.config))
            .map(|c| (c.config, c.mu.clone()))
            .collect();
        if left.is_empty() {
            std::borrow::Cow::Borrowed(&self.candidates)
        } else {
            std::borrow::Cow::Owned(Candidates::new(left))
        }
    }

    /// Sets the configurations not to be chosen now (the scheduler's backlog guard).
    pub fn set_barred(&mut self, barred: Vec<Config>) {
        self.barred = barred;
    }

    /// The configurations barred now.
    pub fn barred(&self) -> &[Config] {
        &self.barred
    }

    /// One update planning for arrival rate `lambda`: returns the new configuration and the reason when a switch is
    /// decided now (and adopts it), `None` to stay.
    pub fn decide(&mut self, lambda: f64) -> Option<(Config, SwitchReason)> {
        let target = self.target(lambda);
        if target == self.current {
            self.pending = None;
            return None;
        }
        let current = self.predict(self.current, lambda);
        if matches!(current, Some(Err(ModelError::Unstable { .. }))) {
            self.adopt(target);
            return Some((target, SwitchReason::Overload));
        }
        if self.holds_back(target, lambda) {
            self.pending = None;
            return None;
        }
        if self.table.is_none()
            && self.options.min_gain > 0.0
            && !self.beyond_max_utilisation(self.current, lambda)
            && self.gain_too_small(current, target, lambda)
        {
            self.pending = None;
            return None;
        }
        let held = match self.pending {
            Some((cfg, n)) if cfg == target => n + 1,
            _ => 1,
        };
        if held >= self.options.hold_periods && !self.awaits_confirmation(target, lambda) {
            self.adopt(target);
            return Some((target, SwitchReason::Better));
        }
        self.pending = Some((target, held));
        None
    }

    /// Whether a move to `target` at `lambda` waits for the next periodic re-evaluation to confirm the
    /// rates that made it the choice: it is the unconfirmed choice of the last one, and the current
    /// configuration is within the utilisation cap (a move for capacity never waits).
    fn awaits_confirmation(&self, target: Config, lambda: f64) -> bool {
        self.unconfirmed == Some(target) && !self.beyond_max_utilisation(self.current, lambda)
    }

    /// Replaces the rates decided on at a re-evaluation planning for `lambda` ([`Self::set_candidates`]),
    /// and records whether the new rates alone changed the choice: at a `periodic` re-evaluation (the load
    /// has not moved by a band since the last one), a choice that was the current configuration under the
    /// old rates and is another one under the new ones is *unconfirmed* until the next periodic
    /// re-evaluation still makes it (*Hysteresis*). Any other re-evaluation clears it.
    ///
    /// # Errors
    /// As [`Self::set_candidates`] (nothing changes then).
    pub fn reevaluate(
        &mut self,
        candidates: Candidates,
        evidence: Evidence,
        lambda: f64,
        periodic: bool,
    ) -> Result<(), SchedulerError> {
        let before = self.target(lambda);
        self.set_candidates(candidates, evidence)?;
        let after = self.target(lambda);
        self.unconfirmed =
            (periodic && before == self.current && after != self.current).then_some(after);
        Ok(())
    }

    /// The choice waiting for the next periodic re-evaluation's confirmation, if any.
    pub fn unconfirmed(&self) -> Option<Config> {
        self.unconfirmed
    }

    /// Whether no different choice is waiting out its hold periods.
    pub fn is_settled(&self) -> bool {
        self.pending.is_none()
    }

    /// Whether the current configuration is unstable at `lambda`.
    pub fn is_overloaded(&self, lambda: f64) -> bool {
        matches!(
            self.predict(self.current, lambda),
            Some(Err(ModelError::Unstable { .. }))
        )
    }

    /// Replaces the rates decided on (re-profiling). The table, with [`Lookup::Table`], is rebuilt; if that
    /// fails the old rates and table stay and the error is returned. `evidence`: which of the rates were
    /// measured at the load they are for ([`Evidence::default`]: no distinction).
    ///
    /// # Errors
    /// The table's error.
    pub fn set_candidates(
        &mut self,
        candidates: Candidates,
        evidence: Evidence,
    ) -> Result<(), SchedulerError> {
        if candidates.get(self.current).is_none() {
            return Err(SchedulerError::UnknownInitial(self.current));
        }
        if let Lookup::Table(t) = self.options.lookup {
            self.table = Some(ConfigTable::build(&candidates, t)?);
        }
        self.candidates = candidates;
        self.evidence = evidence;
        Ok(())
    }

    /// Whether a move to `target` at `lambda` is held back by the evidence rule or the capacity dead band
    /// (both let an unstable current configuration go; the callers check that first).
    fn holds_back(&self, target: Config, lambda: f64) -> bool {
        self.lacks_evidence(target, lambda)
            || self.capacity_gain_too_small(&self.candidates, target, lambda)
    }

    /// Whether a move to `target` at `lambda` is ruled out for want of evidence ([`Evidence`]): under
    /// online evaluation, `target`'s rates were not measured at this load while the current
    /// configuration's were, and with `target`'s rates cut by the slowdown the current configuration shows
    /// at this load, the choice between the two (the same rule as [`Self::target`]: the fastest within
    /// the utilisation cap, else the most capacity) is the current one. The caller lets an unstable
    /// current configuration go anyway.
    fn lacks_evidence(&self, target: Config, lambda: f64) -> bool {
        if self.table.is_some() || self.evidence.slowdown.contains_key(&target) {
            return false;
        }
        let Some(&slowdown) = self.evidence.slowdown.get(&self.current) else {
            return false;
        };
        let (Some(t), Some(c)) = (
            self.candidates.get(target),
            self.candidates.get(self.current),
        ) else {
            return false;
        };
        let slowed: Vec<f64> = t.mu.iter().map(|m| m / slowdown.max(1.0)).collect();
        let pair = Candidates::new(vec![(c.config, c.mu.clone()), (t.config, slowed)]);
        let fallback = pair.max_capacity().map_or(self.current, |m| m.config);
        let choice = self.best_within_cap(&pair, lambda).unwrap_or(fallback);
        choice != target
    }

    /// Whether a move to `target` at `lambda` is a choice by capacity (both it and the current configuration
    /// beyond the utilisation cap) that gains less than `min_capacity_gain`. Why: there the model's latency
    /// is not trusted and capacity decides, and capacities measured from tens of calls move by a few % from
    /// one re-evaluation to the next; without a dead band, two configurations of nearly equal measured
    /// capacity trade places on noise (a move on 1 % more capacity can queue). `rates` are the rates
    /// compared (the decider's, or a surge's judged ones). The caller lets an unstable current
    /// configuration go anyway.
    fn capacity_gain_too_small(&self, rates: &Candidates, target: Config, lambda: f64) -> bool {
        if !(self.beyond_max_utilisation(self.current, lambda)
            && self.beyond_max_utilisation(target, lambda))
        {
            return false;
        }
        match (rates.get(target), rates.get(self.current)) {
            (Some(t), Some(c)) => {
                t.capacity() < c.capacity() * (1.0 + self.options.min_capacity_gain)
            }
            _ => false,
        }
    }

    /// Runs `config` from now on, whatever the model says (an exploration); `false` if it is no candidate.
    pub fn force(&mut self, config: Config) -> bool {
        if self.candidates.get(config).is_none() {
            return false;
        }
        self.adopt(config);
        true
    }

    /// Decides at once, without hold periods (the end of an exploration): the target at `lambda` if it is
    /// predicted at least `min_gain` faster than the current configuration, or the current one is unstable.
    pub fn conclude(&mut self, lambda: f64) -> Option<Config> {
        let target = self.target(lambda);
        if target == self.current {
            self.pending = None;
            return None;
        }
        if !self.is_overloaded(lambda) && self.holds_back(target, lambda) {
            self.pending = None;
            return None;
        }
        if !self.beyond_max_utilisation(self.current, lambda)
            && self.gain_too_small(self.predict(self.current, lambda), target, lambda)
        {
            self.pending = None;
            return None;
        }
        self.adopt(target);
        Some(target)
    }

    /// Decides at once on a surge of arrivals between two updates ([`Scheduler::poll`](super::Scheduler::poll)): the target at `lambda`,
    /// but only when the current configuration is beyond the utilisation cap there (or unstable) and the
    /// target has more capacity; a surge only ever moves towards capacity. Without an unstable current
    /// configuration the evidence rule and the capacity dead band still apply.
    pub fn surge(&mut self, lambda: f64) -> Option<Config> {
        let overloaded = self.is_overloaded(lambda);
        if !(overloaded || self.beyond_max_utilisation(self.current, lambda)) {
            return None;
        }
        let judged = self.judged_by_evidence();
        let target = match &self.table {
            Some(_) => self.target(lambda),
            None => {
                let fallback = judged.max_capacity().map_or(self.current, |c| c.config);
                self.best_within_cap(&judged, lambda).unwrap_or(fallback)
            }
        };
        let capacity = |c: Config| judged.get(c).map_or(0.0, |x| x.capacity());
        if target == self.current
            || capacity(target) <= capacity(self.current)
            || (!overloaded
                && (self.lacks_evidence(target, lambda)
                    || self.capacity_gain_too_small(&judged, target, lambda)))
        {
            return None;
        }
        self.adopt(target);
        Some(target)
    }

    /// The choosable candidates with every configuration not measured at the load of the last
    /// re-evaluation slowed down by the largest slowdown measured there for one that was (as they
    /// are without such evidence). A surge compares configurations at a load some of them have not
    /// served: one measured there must not lose to another's rates from a quieter time.
    fn judged_by_evidence(&self) -> Candidates {
        let choosable = self.choosable().into_owned();
        let Some(slowdown) = self
            .evidence
            .slowdown
            .values()
            .copied()
            .filter(|s| s.is_finite())
            .reduce(f64::max)
        else {
            return choosable;
        };
        let slowdown = slowdown.max(1.0);
        Candidates::new(
            choosable
                .as_slice()
                .iter()
                .map(|c| {
                    let mu = if self.evidence.slowdown.contains_key(&c.config) {
                        c.mu.clone()
                    } else {
                        c.mu.iter().map(|m| m / slowdown).collect()
                    };
                    (c.config, mu)
                })
                .collect(),
        )
    }

    /// The model's prediction for `config` at `lambda` (`None`: not a candidate).
    fn predict(&self, config: Config, lambda: f64) -> Option<Result<Estimate, ModelError>> {
        self.candidates
            .get(config)
            .map(|c| c.estimate(lambda, self.options.predictor))
    }

    /// Whether `target` is predicted less than `min_gain` faster than the current configuration,
    /// whose prediction is `current` (both stable; otherwise the gain does not rule it out).
    fn gain_too_small(
        &self,
        current: Option<Result<Estimate, ModelError>>,
        target: Config,
        lambda: f64,
    ) -> bool {
        match (current, self.predict(target, lambda)) {
            (Some(Ok(cur)), Some(Ok(new))) => {
                cur.latency <= new.latency * (1.0 + self.options.min_gain)
            }
            _ => false,
        }
    }

    fn adopt(&mut self, config: Config) {
        self.current = config;
        self.pending = None;
        self.unconfirmed = None;
    }
}
