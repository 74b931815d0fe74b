//! Choosing a configuration from predictions: online evaluation of every configuration at one load, and the
//! paper's configuration reference table, the best configuration per load level (paper §IV-A, §IV-D).
//!
//! Decisions made where the paper is silent:
//! - Load levels are `λ_k = (k/L)·headroom·max_capacity` for `k = 1..L`, with `L = 10`, `headroom = 0.95` and
//!   `max_capacity` the largest `c·μ_c` among the configurations.
//! - Configurations with `ρ ≥ 1` at a level are excluded; ties in predicted latency go to the configuration
//!   first in [`Config`] order (smaller `c`, then smaller `C_inter`, then smaller `t`).
//! - [`ConfigTable::lookup`] takes the row with the smallest `λ_k ≥ λ̂` (conservative); above the last row
//!   it returns the configuration with the most capacity.
//!
//! The table is a pure function of the profile and the options, built in a fixed order with no hashing, and
//! its JSON is byte-identical across rebuilds.

use crate::baseline::Predictor;
use crate::config::Config;
use crate::idle::{predict_after_idle, IdleCurve};
use crate::model::{Estimate, ModelError};
use crate::profile::Profile;
use serde::{Deserialize, Serialize};

/// The `format` value of a serialised table.
pub const TABLE_FORMAT: &str = "weir-serf-table/1";

/// Errors building a table.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TableError {
    /// The profile yields no configuration.
    #[error("no configurations to choose from")]
    NoCandidates,
    /// `levels` is 0 or `headroom` is not in (0, 1].
    #[error("table options need levels ≥ 1 and 0 < headroom ≤ 1 (got {levels}, {headroom})")]
    BadOptions {
        /// Levels asked for.
        levels: usize,
        /// Headroom asked for.
        headroom: f64,
    },
}

/// One configuration and its profiled rates `μ_1..μ_c`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    /// The configuration.
    pub config: Config,
    /// Its service rates `μ_1..μ_c` (length `config.concurrency`).
    pub mu: Vec<f64>,
    /// Service of a request that starts after an idle gap, when the profile measured it
    /// ([`crate::idle`]); SERF's prediction adds what those requests cost.
    pub after_idle: Option<IdleCurve>,
}

impl Candidate {
    /// The candidate's predicted times at `lambda`: `predictor`'s; for [`Predictor::Serf`] with a
    /// curve, the model in which every request that starts on a free slot takes the service after
    /// that slot's idle gap ([`crate::idle`]).
    ///
    /// # Errors
    /// The predictor's errors (an unstable load, bad rates).
    pub fn estimate(&self, lambda: f64, predictor: Predictor) -> Result<Estimate, ModelError> {
        match (&self.after_idle, predictor) {
            (Some(curve), Predictor::Serf) => {
                predict_after_idle(lambda, &self.mu, curve).map(|p| p.estimate)
            }
            _ => predictor.estimate(lambda, &self.mu),
        }
    }

    /// The same configuration on a host `factor` times slower (every service time, after idle
    /// gaps too, multiplied by `factor`; `factor` 1 is the candidate itself): how a service level
    /// measured while serving carries to loads and configurations not yet measured. A factor that
    /// is not finite and positive leaves the candidate as it is.
    pub fn slowed(&self, factor: f64) -> Candidate {
        if !(factor.is_finite() && factor > 0.0) {
            return self.clone();
        }
        Candidate {
            config: self.config,
            mu: self.mu.iter().map(|m| m / factor).collect(),
            after_idle: self.after_idle.as_ref().map(|c| c.scaled(factor)),
        }
    }

    /// Capacity `c·μ_c` in requests per second.
    pub fn capacity(&self) -> f64 {
        self.mu.len() as f64 * self.mu[self.mu.len() - 1]
    }
}

/// The configurations one decision chooses among, in [`Config`] order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidates(Vec<Candidate>);

impl Candidates {
    /// Every configuration the profile covers, with the profile's service after idle gaps for its
    /// thread count where measured.
    pub fn from_profile(profile: &Profile) -> Self {
        Self(
            profile
                .candidates()
                .into_iter()
                .map(|(config, mu)| Candidate {
                    after_idle: (config.inter_node == 1)
                        .then(|| profile.idle_curve(config.threads))
                        .flatten(),
                    config,
                    mu,
                })
                .collect(),
        )
    }

    /// From explicit configurations and rates (sorted here; later duplicates of a configuration dropped).
    /// Entries whose rates are empty or whose length differs from `config.concurrency` are dropped.
    pub fn new(list: Vec<(Config, Vec<f64>)>) -> Self {
        let mut v: Vec<Candidate> = list
            .into_iter()
            .filter(|(c, mu)| !mu.is_empty() && mu.len() == c.concurrency)
            .map(|(config, mu)| Candidate {
                config,
                mu,
                after_idle: None,
            })
            .collect();
        v.sort_by_key(|c| c.config);
        v.dedup_by_key(|c| c.config);
        Self(v)
    }

    /// The same candidates, each with the idle curve `curve` gives for its configuration (replacing
    /// any it had).
    pub fn with_after_idle(mut self, curve: impl Fn(Config) -> Option<IdleCurve>) -> Self {
        for c in &mut self.0 {
            c.after_idle = curve(c.config);
        }
        self
    }

    /// The candidates, in [`Config`] order.
    pub fn as_slice(&self) -> &[Candidate] {
        &self.0
    }

    /// The configurations, in [`Config`] order.
    pub fn configs(&self) -> impl Iterator<Item = Config> + '_ {
        self.0.iter().map(|c| c.config)
    }

    /// The candidate for `config`, if present.
    pub fn get(&self, config: Config) -> Option<&Candidate> {
        self.0.iter().find(|c| c.config == config)
    }

    /// The candidate with the largest capacity `c·μ_c` (first in order on ties).
    pub fn max_capacity(&self) -> Option<&Candidate> {
        self.0
            .iter()
            .fold(None, |best: Option<&Candidate>, c| match best {
                Some(b) if b.capacity() >= c.capacity() => Some(b),
                _ => Some(c),
            })
    }

    /// Predicted estimate of every candidate at arrival rate `lambda`; an unstable one carries its error.
    pub fn evaluate(
        &self,
        lambda: f64,
        predictor: Predictor,
    ) -> Vec<(Config, Result<Estimate, ModelError>)> {
        self.0
            .iter()
            .map(|c| (c.config, c.estimate(lambda, predictor)))
            .collect()
    }

    /// The stable candidate with the lowest predicted mean latency at `lambda` (ties: first in order), or
    /// `None` when every candidate is unstable.
    pub fn best(&self, lambda: f64, predictor: Predictor) -> Option<(Config, Estimate)> {
        self.best_within(lambda, predictor, f64::INFINITY)
    }

    /// As [`Candidates::best`], among the candidates whose utilisation `λ/(c·μ_c)` at `lambda` is at most
    /// `max_utilisation`; `None` when there is none.
    pub fn best_within(
        &self,
        lambda: f64,
        predictor: Predictor,
        max_utilisation: f64,
    ) -> Option<(Config, Estimate)> {
        self.best_within_caps(lambda, predictor, |_| max_utilisation)
    }

    /// As [`Candidates::best_within`], with a utilisation cap of its own for each configuration.
    pub fn best_within_caps(
        &self,
        lambda: f64,
        predictor: Predictor,
        cap: impl Fn(Config) -> f64,
    ) -> Option<(Config, Estimate)> {
        let mut best: Option<(Config, Estimate)> = None;
        for c in &self.0 {
            if lambda > cap(c.config) * c.capacity() {
                continue;
            }
            if let Ok(e) = c.estimate(lambda, predictor) {
                if best.is_none_or(|(_, b)| e.latency < b.latency) {
                    best = Some((c.config, e));
                }
            }
        }
        best
    }
}

/// How to build a [`ConfigTable`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableOptions {
    /// Number of load levels `L` (the paper: 10).
    pub levels: usize,
    /// Fraction of the largest capacity the top level sits at (0.95).
    pub headroom: f64,
    /// The predictor filling the table (SERF; baselines for comparison).
    pub predictor: Predictor,
}

impl Default for TableOptions {
    fn default() -> Self {
        Self {
            levels: 10,
            headroom: 0.95,
            predictor: Predictor::Serf,
        }
    }
}

/// One row: the best configuration at load `lambda`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Row {
    /// Arrival rate of this level (requests per second).
    pub lambda: f64,
    /// The best configuration at this level.
    pub best: Config,
    /// Its predicted mean latency, seconds.
    pub latency_s: f64,
}

/// The configuration reference table (paper Fig. 8).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigTable {
    /// Always [`TABLE_FORMAT`].
    pub format: String,
    /// The options it was built with.
    pub options: TableOptions,
    /// The configuration with the largest capacity, used above the last row.
    pub max_capacity: Config,
    /// Its capacity `c·μ_c`, requests per second.
    pub capacity: f64,
    /// Rows in increasing `lambda`.
    pub rows: Vec<Row>,
}

impl ConfigTable {
    /// Builds the table for `candidates`.
    ///
    /// # Errors
    /// [`TableError::NoCandidates`] or [`TableError::BadOptions`].
    pub fn build(candidates: &Candidates, options: TableOptions) -> Result<Self, TableError> {
        if options.levels == 0 || !(options.headroom > 0.0 && options.headroom <= 1.0) {
            return Err(TableError::BadOptions {
                levels: options.levels,
                headroom: options.headroom,
            });
        }
        let top = candidates.max_capacity().ok_or(TableError::NoCandidates)?;
        let capacity = top.capacity();
        let rows = (1..=options.levels)
            .filter_map(|k| {
                let lambda = k as f64 / options.levels as f64 * options.headroom * capacity;
                candidates
                    .best(lambda, options.predictor)
                    .map(|(best, e)| Row {
                        lambda,
                        best,
                        latency_s: e.latency,
                    })
            })
            .collect();
        Ok(Self {
            format: TABLE_FORMAT.to_string(),
            options,
            max_capacity: top.config,
            capacity,
            rows,
        })
    }

    /// The configuration for an observed arrival rate: the row with the smallest `λ_k ≥ lambda`, or the
    /// largest-capacity configuration above the last row.
    pub fn lookup(&self, lambda: f64) -> Config {
        self.rows
            .iter()
            .find(|r| r.lambda >= lambda)
            .map_or(self.max_capacity, |r| r.best)
    }

    /// The table as pretty JSON, byte-identical for identical inputs.
    pub fn to_json(&self) -> String {
        // Plain structs of numbers and strings always serialise.
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }
}

#[cfg(test)]
impl Candidates {
    /// A 2-core profile for tests, from service times in seconds: one request on one thread,
    /// each of two requests on one thread, one request on two threads.
    pub(crate) fn two_core_from_times(one: f64, pair: f64, two_threads: f64) -> Self {
        Self::from_profile(
            &Profile::from_rates(
                2,
                &[
                    (1, vec![1.0 / one, 1.0 / pair]),
                    (2, vec![1.0 / two_threads]),
                ],
            )
            .expect("a valid profile"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 2-core illustration, (1,2) against (2,1), plus (1,1).
    fn two_core() -> Profile {
        Profile::from_rates(
            2,
            &[(1, vec![1.0 / 0.20, 1.0 / 0.22]), (2, vec![1.0 / 0.12])],
        )
        .unwrap()
    }

    #[test]
    fn a_slowed_candidate_is_the_same_queue_on_a_slower_clock() {
        let plain = Candidate {
            config: Config::new(2, 1),
            mu: vec![1.0 / 0.20, 1.0 / 0.22],
            after_idle: None,
        };
        // Every time `f` longer at `λ / f`: the same queue, its latency `f` times longer.
        let f = 1.3;
        let at = |c: &Candidate, lambda: f64| c.estimate(lambda, Predictor::Serf).unwrap();
        let (base, slow) = (at(&plain, 6.0), at(&plain.slowed(f), 6.0 / f));
        assert!((slow.latency - f * base.latency).abs() < 1e-9 * slow.latency);
        assert!((slow.service - f * base.service).abs() < 1e-9 * slow.service);
        // The service after an idle gap slows alike; the gaps themselves are real time.
        let curve = IdleCurve::from_times(0.20, &[(0.01, 0.26), (0.05, 0.30)]).unwrap();
        let idle = Candidate {
            after_idle: Some(curve.clone()),
            ..plain.clone()
        };
        let slowed = idle.slowed(f);
        let after = |c: &Candidate, gap: f64| c.after_idle.as_ref().unwrap().service_after(gap);
        for gap in [0.0, 0.005, 0.03, 1.0] {
            assert!((after(&slowed, gap) - f * curve.service_after(gap)).abs() < 1e-12);
        }
        assert!(at(&slowed, 2.0).latency > at(&idle, 2.0).latency);
        // Factor 1 and factors that are no speed leave the candidate as it is.
        assert_eq!(idle.slowed(1.0), idle);
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(idle.slowed(bad), idle);
        }
    }

    #[test]
    fn table_best_rows_and_byte_identical_rebuild() {
        let p = two_core();
        let cands = Candidates::from_profile(&p);
        assert_eq!(cands.as_slice().len(), 3);
        let t = ConfigTable::build(&cands, TableOptions::default()).unwrap();
        assert_eq!(t.rows.len(), 10);
        assert_eq!(t.max_capacity, Config::new(2, 1));
        assert!((t.capacity - 2.0 / 0.22).abs() < 1e-12);
        // Each row is the argmin over stable configurations.
        for r in &t.rows {
            for (cfg, est) in cands.evaluate(r.lambda, Predictor::Serf) {
                if let Ok(e) = est {
                    assert!(r.latency_s <= e.latency, "{cfg} beats row at {}", r.lambda);
                }
            }
        }
        // Crossover A = (1,2) → B = (2,1) at λ ≈ 6.5/s.
        for r in &t.rows {
            let want = if r.lambda < 6.5 {
                Config::new(1, 2)
            } else {
                Config::new(2, 1)
            };
            assert_eq!(r.best, want, "at λ = {}", r.lambda);
        }
        // Byte-identical rebuild, also from a profile that went through its file format.
        let again =
            ConfigTable::build(&Candidates::from_profile(&p), TableOptions::default()).unwrap();
        assert_eq!(t.to_json(), again.to_json());
        let reloaded = Profile::from_json(&p.to_json()).unwrap();
        let third = ConfigTable::build(
            &Candidates::from_profile(&reloaded),
            TableOptions::default(),
        )
        .unwrap();
        assert_eq!(t.to_json().as_bytes(), third.to_json().as_bytes());
        let parsed: ConfigTable = serde_json::from_str(&t.to_json()).unwrap();
        assert_eq!(parsed, t);
    }

    #[test]
    fn ties_prefer_smaller_c_then_t_and_unstable_excluded() {
        // Identical rates everywhere: (1,1) and (1,2) tie at every load; the smaller t wins.
        let c = Candidates::new(vec![
            (Config::new(1, 2), vec![1.0]),
            (Config::new(1, 1), vec![1.0]),
            (Config::new(2, 1), vec![0.1, 0.1]),
        ]);
        assert_eq!(c.best(0.5, Predictor::Serf).unwrap().0, Config::new(1, 1));
        // At λ = 1.5 only... none is stable: (1,x) capacity 1, (2,1) capacity 0.2.
        assert!(c.best(1.5, Predictor::Serf).is_none());
        assert_eq!(c.max_capacity().unwrap().config, Config::new(1, 1));
        // Dropped: wrong length.
        assert_eq!(
            Candidates::new(vec![(Config::new(2, 1), vec![1.0])])
                .as_slice()
                .len(),
            0
        );
        assert_eq!(
            ConfigTable::build(&Candidates::new(vec![]), TableOptions::default()),
            Err(TableError::NoCandidates)
        );
        let bad = TableOptions {
            levels: 0,
            ..TableOptions::default()
        };
        assert!(matches!(
            ConfigTable::build(&c, bad),
            Err(TableError::BadOptions { .. })
        ));
    }

    #[test]
    fn unit_above_capacity_is_excluded() {
        // A unit is unstable when its rate reaches c·μ_c: that configuration drops out of the choice.
        let c = Candidates::new(vec![
            (Config::new(1, 2), vec![10.0]),
            (Config::new(2, 1), vec![6.0, 6.0]),
        ]);
        let evals = c.evaluate(10.0, Predictor::Serf);
        assert!(matches!(evals[0].1, Err(ModelError::Unstable { .. })));
        assert_eq!(c.best(10.0, Predictor::Serf).unwrap().0, Config::new(2, 1));
    }

    #[test]
    fn lookup_is_conservative() {
        let t = ConfigTable::build(
            &Candidates::from_profile(&two_core()),
            TableOptions::default(),
        )
        .unwrap();
        assert_eq!(t.lookup(0.0), t.rows[0].best);
        assert_eq!(t.lookup(t.rows[3].lambda), t.rows[3].best);
        assert_eq!(t.lookup(t.rows[3].lambda + 1e-9), t.rows[4].best);
        assert_eq!(t.lookup(1e9), Config::new(2, 1));
    }
}
