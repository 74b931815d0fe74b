//! SERF's run-time side for one model node (paper §IV-A, §IV-D; note §2.12; requirements S3, S4): the
//! [`crate::estimator`]'s arrival-rate estimate, updated once per period, feeds the decision "given the
//! estimated `λ̂` and the current configuration, which configuration now", with hysteresis.
//!
//! Everything is driven by explicit timestamps (a [`Duration`] since any fixed origin, e.g.
//! `Instant::duration_since(start)`); nothing reads a clock, so the logic replays exactly in tests and in the
//! simulator. Applying a switch (admission limit, intra-op threads of new requests) is the executor's job.
//!
//! Decisions made where the paper is silent (note §2.12, "\[gap\]"), all in [`SchedulerOptions`]:
//! - **Estimator.** Arrivals are counted in buckets one period long; `λ̂` is the count in the last complete
//!   buckets covering the window (default 5 s), divided by their length (fewer buckets right after start).
//! - **Choice.** By default every configuration is evaluated online with Eq. 13 at `λ̂` (microseconds);
//!   [`Lookup::Table`] uses the paper's reference table instead.
//! - **Planning load.** Decisions are made for `λ̂ + 1σ` (`load_margin_sigmas`, σ = `√n/span` the Poisson
//!   standard error of the window's count `n`), not `λ̂`: under-estimating load costs a growing queue, while
//!   over-estimating costs a modestly slower configuration. With a 5 s window at 7.5 requests/s, `λ̂` alone
//!   swings ±16% and, in the S4 replay, made the decision flap across a crossover 15% away; the margin
//!   biases near-crossover choices towards capacity, like the table's conservative row lookup.
//! - **Hysteresis.** A different configuration is adopted only after it has been the choice for
//!   `hold_periods` consecutive updates (default 2) and, with online evaluation, only if it is predicted at
//!   least `min_gain` (default 2%) faster than the current one at `λ̂`. Exception: when the current
//!   configuration is unstable at `λ̂` (`λ̂ ≥ c·μ_c`) the switch is immediate, since its queue grows without
//!   bound.

use crate::baseline::Predictor;
use crate::config::Config;
use crate::estimator::{EstimatorError, RateEstimate, RateEstimator};
use crate::model::ModelError;
use crate::table::{Candidates, ConfigTable, TableError, TableOptions};
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

/// Tunables of the estimator and the decision (module docs give the defaults' reasons).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SchedulerOptions {
    /// Sliding window of the arrival-rate estimate (5 s).
    pub window: Duration,
    /// Update period: one decision per period (1 s).
    pub period: Duration,
    /// Consecutive updates a new choice must persist before it is adopted (2).
    pub hold_periods: u32,
    /// Predicted relative latency gain a switch must bring, online evaluation only (0.02).
    pub min_gain: f64,
    /// The decision plans for `λ̂ + load_margin_sigmas · σ(λ̂)` (1.0), σ the Poisson standard error.
    pub load_margin_sigmas: f64,
    /// Online evaluation or table lookup.
    pub lookup: Lookup,
    /// Predictor used (SERF).
    pub predictor: Predictor,
}

impl Default for SchedulerOptions {
    fn default() -> Self {
        Self {
            window: Duration::from_secs(5),
            period: Duration::from_secs(1),
            hold_periods: 2,
            min_gain: 0.02,
            load_margin_sigmas: 1.0,
            lookup: Lookup::Online,
            predictor: Predictor::Serf,
        }
    }
}

/// Errors setting up a scheduler.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SchedulerError {
    /// The initial configuration is not among the candidates.
    #[error("initial configuration {0} is not among the profiled configurations")]
    UnknownInitial(Config),
    /// No configurations.
    #[error("no configurations to choose from")]
    NoCandidates,
    /// The options are inconsistent.
    #[error("bad scheduler options: {0}")]
    BadOptions(String),
    /// The estimator's window or period is invalid.
    #[error(transparent)]
    Estimator(#[from] EstimatorError),
    /// The table could not be built.
    #[error(transparent)]
    Table(#[from] TableError),
}

/// Why a switch happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SwitchReason {
    /// The new configuration is predicted faster, and stayed the choice for `hold_periods` updates.
    Better,
    /// The current configuration could not keep up with `λ̂` (immediate).
    Overload,
}

/// A decided configuration change, for the executor to apply and for logs/metrics.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Switch {
    /// When it was decided.
    pub at: Duration,
    /// Previous configuration.
    pub from: Config,
    /// New configuration.
    pub to: Config,
    /// Estimated arrival rate `λ̂` at the decision.
    pub lambda: f64,
    /// The load the decision planned for, `λ̂ + load_margin_sigmas·σ`.
    pub planned_lambda: f64,
    /// Why.
    pub reason: SwitchReason,
}

/// The hysteresis state machine over decisions (pure: fed `λ̂` values).
#[derive(Debug, Clone)]
pub struct Decider {
    candidates: Candidates,
    table: Option<ConfigTable>,
    options: SchedulerOptions,
    current: Config,
    pending: Option<(Config, u32)>,
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
    pub fn target(&self, lambda: f64) -> Config {
        let fallback = self
            .candidates
            .max_capacity()
            .map_or(self.current, |c| c.config);
        match &self.table {
            Some(t) => t.lookup(lambda),
            None => self
                .candidates
                .best(lambda, self.options.predictor)
                .map_or(fallback, |(c, _)| c),
        }
    }

    /// One update planning for arrival rate `lambda`: returns the new configuration and the reason when a switch is
    /// decided now (and adopts it), `None` to stay.
    pub fn decide(&mut self, lambda: f64) -> Option<(Config, SwitchReason)> {
        let target = self.target(lambda);
        if target == self.current {
            self.pending = None;
            return None;
        }
        let predict = |cfg: Config| {
            self.candidates
                .get(cfg)
                .map(|c| self.options.predictor.estimate(lambda, &c.mu))
        };
        let current = predict(self.current);
        if matches!(current, Some(Err(ModelError::Unstable { .. }))) {
            self.adopt(target);
            return Some((target, SwitchReason::Overload));
        }
        if self.table.is_none() && self.options.min_gain > 0.0 {
            if let (Some(Ok(cur)), Some(Ok(new))) = (current, predict(target)) {
                if cur.latency <= new.latency * (1.0 + self.options.min_gain) {
                    self.pending = None;
                    return None;
                }
            }
        }
        let held = match self.pending {
            Some((cfg, n)) if cfg == target => n + 1,
            _ => 1,
        };
        if held >= self.options.hold_periods {
            self.adopt(target);
            return Some((target, SwitchReason::Better));
        }
        self.pending = Some((target, held));
        None
    }

    fn adopt(&mut self, config: Config) {
        self.current = config;
        self.pending = None;
    }
}

/// Estimator plus decider for one model node: feed it arrivals and poll it; it decides once per period.
#[derive(Debug, Clone)]
pub struct Scheduler {
    estimator: RateEstimator,
    decider: Decider,
    next_update: Duration,
    last_estimate: Option<RateEstimate>,
}

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
        let estimator = RateEstimator::new(options.window, options.period, now)?;
        let next_update = estimator.next_boundary(now);
        let decider = Decider::new(candidates, initial, options)?;
        Ok(Self {
            estimator,
            decider,
            next_update,
            last_estimate: None,
        })
    }

    /// Records one arrival at `now`.
    pub fn record_arrival(&mut self, now: Duration) {
        self.estimator.record(now, 1);
    }

    /// Records `n` arrivals at `now` (a caller that counts arrivals between polls and hands them over
    /// in one go; the count lands in `now`'s bucket, so hand them over well within a period).
    pub fn record_arrivals(&mut self, now: Duration, n: u64) {
        if n > 0 {
            self.estimator.record(now, n);
        }
    }

    /// Runs the periodic update if a period boundary has passed since the last one (at most one decision per
    /// call); returns the switch decided, if any. Call it on every arrival and/or from a timer.
    pub fn poll(&mut self, now: Duration) -> Option<Switch> {
        if now < self.next_update {
            return None;
        }
        self.next_update = self.estimator.next_boundary(now);
        let estimate = self.estimator.measure(now)?;
        self.last_estimate = Some(estimate);
        let planned_lambda =
            estimate.rate + self.decider.options.load_margin_sigmas * estimate.std_error;
        let from = self.decider.current();
        self.decider
            .decide(planned_lambda)
            .map(|(to, reason)| Switch {
                at: now,
                from,
                to,
                lambda: estimate.rate,
                planned_lambda,
                reason,
            })
    }

    /// The configuration in force.
    pub fn current(&self) -> Config {
        self.decider.current()
    }

    /// The estimate used at the last update.
    pub fn last_estimate(&self) -> Option<RateEstimate> {
        self.last_estimate
    }

    /// The decision state (table, candidates).
    pub fn decider(&self) -> &Decider {
        &self.decider
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Profile;
    use crate::simulator::{Completed, Semantics, Station};
    use rand::{rngs::StdRng, SeedableRng};
    use rand_distr::{Distribution, Exp};

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    /// Note §2.9's 2-core illustration: (1,1) 0.2 s, (1,2) 0.12 s, (2,1) 0.20/0.22 s.
    fn two_core() -> Candidates {
        Candidates::from_profile(
            &Profile::from_rates(
                2,
                &[(1, vec![1.0 / 0.20, 1.0 / 0.22]), (2, vec![1.0 / 0.12])],
            )
            .unwrap(),
        )
    }

    #[test]
    fn s3_hysteresis_holds_and_overload_is_immediate() {
        let a = Config::new(1, 2);
        let b = Config::new(2, 1);
        let mut d = Decider::new(two_core(), a, SchedulerOptions::default()).unwrap();
        assert_eq!(d.target(2.0), a);
        assert_eq!(d.target(8.0), b);
        // A one-period spike does not switch; two consecutive periods do.
        assert_eq!(d.decide(8.0), None);
        assert_eq!(d.decide(2.0), None);
        assert_eq!(d.decide(8.0), None);
        assert_eq!(d.decide(8.0), Some((b, SwitchReason::Better)));
        assert_eq!(d.current(), b);
        // Near the crossover (≈ 6.5/s) the predicted gain is below 2%: stay, however long.
        for _ in 0..5 {
            assert_eq!(d.decide(6.42), None);
        }
        // Overload: A's capacity is 8.33/s; at 9/s the switch back to B... from A is immediate.
        let mut d = Decider::new(two_core(), a, SchedulerOptions::default()).unwrap();
        assert_eq!(d.decide(9.0), Some((b, SwitchReason::Overload)));
        // Beyond every capacity: go to the largest capacity.
        let mut d =
            Decider::new(two_core(), Config::new(1, 1), SchedulerOptions::default()).unwrap();
        assert_eq!(d.decide(100.0), Some((b, SwitchReason::Overload)));
        // Table lookup behaves the same way on clear loads.
        let opts = SchedulerOptions {
            lookup: Lookup::Table(TableOptions::default()),
            ..Default::default()
        };
        let mut d = Decider::new(two_core(), a, opts).unwrap();
        assert_eq!(d.table().unwrap().rows.len(), 10);
        assert_eq!(d.decide(8.0), None);
        assert_eq!(d.decide(8.0), Some((b, SwitchReason::Better)));
        assert!(matches!(
            Decider::new(two_core(), Config::new(3, 1), SchedulerOptions::default()),
            Err(SchedulerError::UnknownInitial(_))
        ));
    }

    #[test]
    fn s3_scheduler_decides_once_per_period() {
        let a = Config::new(1, 2);
        let exact = SchedulerOptions {
            load_margin_sigmas: 0.0,
            ..Default::default()
        };
        let mut s = Scheduler::new(two_core(), a, exact, secs(0.0)).unwrap();
        let mut switches = Vec::new();
        // 8/s evenly for 10 s.
        for k in 0..80 {
            let t = secs(k as f64 / 8.0 + 0.01);
            s.record_arrival(t);
            switches.extend(s.poll(t));
        }
        // Updates at 1 s (estimate 8) and 2 s (estimate 8): switch decided at the second.
        assert_eq!(switches.len(), 1);
        assert_eq!(switches[0].to, Config::new(2, 1));
        assert!(
            switches[0].at >= secs(2.0) && switches[0].at < secs(2.2),
            "{:?}",
            switches[0]
        );
        let est = s.last_estimate().unwrap();
        assert_eq!((est.rate, est.arrivals, est.span_s), (8.0, 40, 5.0));
        assert!((est.std_error - 40f64.sqrt() / 5.0).abs() < 1e-12);
        assert_eq!(s.current(), Config::new(2, 1));
        // With the default 1σ margin the first update plans for 8 + √8 > A's capacity: immediate switch.
        let mut s = Scheduler::new(two_core(), a, SchedulerOptions::default(), secs(0.0)).unwrap();
        let mut switches = Vec::new();
        for k in 0..16 {
            let t = secs(k as f64 / 8.0 + 0.01);
            s.record_arrival(t);
            switches.extend(s.poll(t));
        }
        assert_eq!(switches.len(), 1);
        assert_eq!(switches[0].reason, SwitchReason::Overload);
        assert!((switches[0].planned_lambda - (8.0 + 8f64.sqrt())).abs() < 1e-12);
    }

    /// Runs `arrivals` through a station, either fixed at `fixed` or driven by a SERF scheduler.
    fn replay(cands: &Candidates, arrivals: &[f64], fixed: Option<Config>) -> Vec<Completed> {
        let start = fixed.unwrap_or(Config::new(1, 1));
        let mu = |c: Config| cands.get(c).unwrap().mu.clone();
        let mut station = Station::new(&mu(start), Semantics::Dynamic).unwrap();
        let mut sched =
            Scheduler::new(cands.clone(), start, SchedulerOptions::default(), secs(0.0)).unwrap();
        let mut out = Vec::with_capacity(arrivals.len());
        for &t in arrivals {
            station.advance(t, &mut out);
            if fixed.is_none() {
                sched.record_arrival(secs(t));
                if let Some(sw) = sched.poll(secs(t)) {
                    station.set_profile(&mu(sw.to)).unwrap();
                }
            }
            station.arrive(t, 1.0, &mut out);
        }
        station.drain(&mut out);
        out
    }

    fn mean_latency(done: &[Completed], from: f64, to: f64) -> f64 {
        let sel: Vec<f64> = done
            .iter()
            .filter(|c| c.arrival >= from && c.arrival < to)
            .map(|c| c.latency())
            .collect();
        sel.iter().sum::<f64>() / sel.len() as f64
    }

    #[test]
    fn s4_dynamic_load_tracks_best_fixed_configuration() {
        // Moderate (7.5/s) → low (2/s) → moderate, 1500 s each, same arrivals for every run.
        let phases = [(7.5, 1500.0), (2.0, 1500.0), (7.5, 1500.0)];
        let mut rng = StdRng::seed_from_u64(4);
        let mut arrivals = Vec::new();
        let (mut t, mut bounds) = (0.0, vec![0.0]);
        for (lambda, len) in phases {
            let end = t + len;
            let exp = Exp::new(lambda).unwrap();
            let mut next = t + exp.sample(&mut rng);
            while next < end {
                arrivals.push(next);
                next += exp.sample(&mut rng);
            }
            t = end;
            bounds.push(end);
        }
        let cands = two_core();
        let serf = replay(&cands, &arrivals, None);
        let fixed: Vec<(Config, Vec<Completed>)> = cands
            .as_slice()
            .iter()
            .map(|c| (c.config, replay(&cands, &arrivals, Some(c.config))))
            .collect();
        // Per phase, after the estimator has converged (window + hold + margin = 10 s).
        for p in 0..3 {
            let (from, to) = (bounds[p] + 10.0, bounds[p + 1]);
            let serf_mean = mean_latency(&serf, from, to);
            let best = fixed
                .iter()
                .map(|(_, d)| mean_latency(d, from, to))
                .fold(f64::INFINITY, f64::min);
            assert!(
                serf_mean <= best * 1.05,
                "phase {p}: SERF {serf_mean} vs best fixed {best}"
            );
        }
        // Over the whole run SERF beats every fixed configuration.
        let serf_all = mean_latency(&serf, 0.0, f64::INFINITY);
        for (cfg, d) in &fixed {
            let m = mean_latency(d, 0.0, f64::INFINITY);
            assert!(serf_all <= m, "SERF {serf_all} vs fixed {cfg} {m}");
        }
    }
}
