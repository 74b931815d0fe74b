//! Online re-profiling: the service rates `μ_i` a node measures while it serves, blended into its offline
//! profile, so the decision follows the machine as it is now rather than as it was during `weir profile`.
//!
//! Why: the offline profile is a few dozen requests per tuple taken once. On a shared machine it can be far
//! off (a two-at-once tuple measured at half speed during a burst of outside load ranks that configuration
//! last at every load, and the scheduler never tries it). The executor already times every call; this module
//! turns those times into per-tuple estimates.
//!
//! Decisions (none are in the paper, which profiles once, note §2.11–2.12):
//! - **Unit.** Estimates are kept per *tuple* `(i, C_inter, t)` (i requests running, t intra-op threads each),
//!   the same unit the profile file stores, so serving `(2, 1)` also updates `(1, 1)`'s `μ_1`. The caller
//!   attributes a call to the tuple of its time-weighted mean concurrency (rounded), see weir's executor.
//! - **Estimator.** A mean that is the plain running mean for the first `1/weight` samples and then an
//!   exponentially weighted mean with weight `weight` per sample (default 0.05: the last ~20 samples carry
//!   two thirds of the weight), so it starts unbiased and then tracks drift.
//! - **Override.** A tuple's measured rate replaces the offline one only once it has `min_samples` samples
//!   (default 20); below that the offline value stands. Tuples never run keep the offline value for ever,
//!   unless [`ExploreOptions`] lets the scheduler try them.
//! - Samples that are not finite and positive, or name a tuple the profile does not have, are ignored and
//!   counted as rejected.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::config::Config;
use crate::table::Candidates;

/// How measured service times are blended into the profile and how often the scheduler re-evaluates.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct OnlineOptions {
    /// Weight of one new sample in the exponentially weighted mean once past the warm-up (0.05).
    pub weight: f64,
    /// Samples a tuple needs before its measured rate overrides the offline one (20).
    pub min_samples: u64,
    /// The scheduler re-evaluates its configurations with the blended rates every this many updates (5).
    pub reevaluate_periods: u32,
    /// Occasional exploration of configurations without (fresh) measurements; `None` turns it off.
    pub explore: Option<ExploreOptions>,
}

impl Default for OnlineOptions {
    fn default() -> Self {
        Self {
            weight: 0.05,
            min_samples: 20,
            reevaluate_periods: 5,
            explore: Some(ExploreOptions::default()),
        }
    }
}

/// Bounds of the exploration of a configuration whose tuples have no fresh measurement (see
/// [`crate::scheduler`] for when it happens).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ExploreOptions {
    /// Consecutive updates whose estimates stay within `steady_tolerance` of each other before exploring (3).
    pub steady_periods: u32,
    /// Largest relative spread `max/min − 1` of those estimates that still counts as steady (0.25).
    pub steady_tolerance: f64,
    /// A configuration is explored only if its predicted utilisation `λ/(c·μ_c)` at the planned load is at
    /// most this (0.8), so a trial cannot start a queue that grows without bound.
    pub max_utilisation: f64,
    /// Updates an exploration lasts at most (3); it ends at the first update at which every tuple of the
    /// configuration has a fresh measurement, and the decision is then taken again with what it measured.
    pub max_periods: u32,
    /// Least time between two explorations of any configuration (20 s).
    pub interval: Duration,
    /// Measurements older than this count as stale, and a configuration is explored at most once per this
    /// time (300 s).
    pub stale_after: Duration,
}

impl Default for ExploreOptions {
    fn default() -> Self {
        Self {
            steady_periods: 3,
            steady_tolerance: 0.25,
            max_utilisation: 0.8,
            max_periods: 3,
            interval: Duration::from_secs(20),
            stale_after: Duration::from_secs(300),
        }
    }
}

/// The state of one tuple's estimate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TupleEstimate {
    /// The tuple `(i, C_inter, t)`.
    pub tuple: Config,
    /// Mean service time from the offline profile, seconds.
    pub offline_s: f64,
    /// Measured mean service time (weighted as the module docs say), seconds; 0 before the first sample.
    pub measured_s: f64,
    /// Samples measured so far.
    pub samples: u64,
    /// When the last sample was recorded.
    pub last_sample: Option<Duration>,
}

impl TupleEstimate {
    /// The rate the model uses: measured once there are `min_samples` samples, offline before.
    pub fn rate(&self, min_samples: u64) -> f64 {
        match self.measured_rate(min_samples) {
            Some(r) => r,
            None => 1.0 / self.offline_s,
        }
    }

    /// The measured rate, once there are `min_samples` samples.
    pub fn measured_rate(&self, min_samples: u64) -> Option<f64> {
        (self.samples >= min_samples.max(1) && self.measured_s > 0.0).then(|| 1.0 / self.measured_s)
    }

    /// Whether the tuple has `min_samples` samples, the last no older than `stale_after` at `now`.
    pub fn is_fresh(&self, min_samples: u64, now: Duration, stale_after: Duration) -> bool {
        self.measured_rate(min_samples).is_some()
            && self
                .last_sample
                .is_some_and(|t| now.saturating_sub(t) <= stale_after)
    }
}

/// The offline profile of one node's configurations with the service times measured while serving.
#[derive(Debug, Clone)]
pub struct OnlineProfile {
    options: OnlineOptions,
    configs: Vec<Config>,
    tuples: BTreeMap<Config, TupleEstimate>,
    rejected: u64,
}

impl OnlineProfile {
    /// Starts from the offline rates of `candidates` (a tuple shared by several configurations takes the
    /// first one's value; they come from one profile, so they agree).
    pub fn new(candidates: &Candidates, options: OnlineOptions) -> Self {
        let mut tuples = BTreeMap::new();
        for c in candidates.as_slice() {
            for (k, mu) in c.mu.iter().enumerate() {
                let tuple = c.config.tuple(k + 1);
                tuples.entry(tuple).or_insert(TupleEstimate {
                    tuple,
                    offline_s: 1.0 / mu,
                    measured_s: 0.0,
                    samples: 0,
                    last_sample: None,
                });
            }
        }
        Self {
            options,
            configs: candidates.as_slice().iter().map(|c| c.config).collect(),
            tuples,
            rejected: 0,
        }
    }

    /// The options in use.
    pub fn options(&self) -> &OnlineOptions {
        &self.options
    }

    /// Records one request's service time `seconds`, measured at `now` with `tuple.concurrency` requests
    /// running. Returns whether it was used.
    pub fn record(&mut self, now: Duration, tuple: Config, seconds: f64) -> bool {
        let weight = self.options.weight;
        let Some(t) = self.tuples.get_mut(&tuple) else {
            self.rejected += 1;
            return false;
        };
        if !(seconds.is_finite() && seconds > 0.0) {
            self.rejected += 1;
            return false;
        }
        t.samples += 1;
        let w = (1.0 / t.samples as f64).max(weight);
        t.measured_s += w * (seconds - t.measured_s);
        t.last_sample = Some(now);
        true
    }

    /// Samples ignored so far (unknown tuple, or not a finite positive time).
    pub fn rejected(&self) -> u64 {
        self.rejected
    }

    /// Every tuple's estimate, in tuple order.
    pub fn tuples(&self) -> impl Iterator<Item = &TupleEstimate> {
        self.tuples.values()
    }

    /// The estimate of one tuple.
    pub fn tuple(&self, tuple: Config) -> Option<&TupleEstimate> {
        self.tuples.get(&tuple)
    }

    /// The rates `μ_1..μ_c` of `config` the model should use now.
    pub fn mu(&self, config: Config) -> Option<Vec<f64>> {
        (1..=config.concurrency)
            .map(|i| {
                self.tuples
                    .get(&config.tuple(i))
                    .map(|t| t.rate(self.options.min_samples))
            })
            .collect()
    }

    /// The configurations with the blended rates.
    pub fn candidates(&self) -> Candidates {
        Candidates::new(
            self.configs
                .iter()
                .filter_map(|&c| self.mu(c).map(|mu| (c, mu)))
                .collect(),
        )
    }

    /// Tuples whose measured rate is in use.
    pub fn measured_tuples(&self) -> usize {
        self.tuples
            .values()
            .filter(|t| t.measured_rate(self.options.min_samples).is_some())
            .count()
    }

    /// Whether every tuple of `config` has a fresh measurement at `now`.
    pub fn is_fresh(&self, config: Config, now: Duration, stale_after: Duration) -> bool {
        (1..=config.concurrency).all(|i| {
            self.tuples
                .get(&config.tuple(i))
                .is_some_and(|t| t.is_fresh(self.options.min_samples, now, stale_after))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{rngs::StdRng, Rng, SeedableRng};

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    fn two_core() -> Candidates {
        Candidates::two_core_from_times(0.20, 0.40, 0.12)
    }

    #[test]
    fn estimate_converges_to_injected_service_times() {
        let mut p = OnlineProfile::new(&two_core(), OnlineOptions::default());
        let solo = Config::new(1, 1);
        let pair = Config::new(2, 1);
        // Offline until min_samples.
        assert_eq!(p.mu(pair).unwrap(), vec![5.0, 2.5]);
        let mut rng = StdRng::seed_from_u64(6);
        for k in 0..19 {
            assert!(p.record(secs(k as f64), solo, 0.1 * rng.random_range(0.9..1.1)));
        }
        assert_eq!(p.mu(solo).unwrap(), vec![5.0]);
        assert_eq!(p.measured_tuples(), 0);
        // From the 20th sample the measurement overrides, and it converges to the injected 0.1 s.
        for k in 19..2000 {
            p.record(secs(k as f64), solo, 0.1 * rng.random_range(0.9..1.1));
        }
        let mu = p.mu(pair).unwrap();
        assert!((mu[0] - 10.0).abs() < 0.3, "{mu:?}");
        assert_eq!(mu[1], 2.5, "μ_2 was never measured");
        // A drift is followed: the service time doubles.
        for k in 0..200 {
            p.record(secs(2000.0 + k as f64), solo, 0.2);
        }
        assert!((p.mu(solo).unwrap()[0] - 5.0).abs() < 0.01);
        // The two-at-once tuple too, and it is shared with (2, 1) only.
        for k in 0..50 {
            p.record(secs(k as f64), pair, 0.25);
        }
        assert!((p.mu(pair).unwrap()[1] - 4.0).abs() < 1e-9);
        assert_eq!(p.measured_tuples(), 2);
        // Rejected samples.
        assert!(!p.record(secs(1.0), Config::new(3, 1), 0.1));
        assert!(!p.record(secs(1.0), solo, f64::NAN));
        assert!(!p.record(secs(1.0), solo, -1.0));
        assert_eq!(p.rejected(), 3);
        // Freshness.
        let stale = secs(300.0);
        assert!(p.is_fresh(solo, secs(2199.0), stale));
        assert!(!p.is_fresh(solo, secs(2600.0), stale));
        assert!(!p.is_fresh(Config::new(1, 2), secs(0.0), stale));
        let c = p.candidates();
        assert_eq!(c.as_slice().len(), 3);
    }
}
