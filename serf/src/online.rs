//! Online re-profiling: the service rates `μ_i` a node measures while it serves, blended into its offline
//! profile, so the decision follows the machine as it is now rather than as it was during `weir profile`.
//!
//! Why: the offline profile is a few dozen requests per tuple taken once. On a shared machine it can be far
//! off (a two-at-once tuple measured at half speed during a burst of outside load ranks that configuration
//! last at every load, and the scheduler never tries it). The executor already times every call; this module
//! turns those times into per-tuple estimates.
//!
//! Decisions (none are in the paper, which profiles once, §IV-B):
//! - **Unit.** Estimates are kept per *tuple* `(i, C_inter, t)` (i requests running, t intra-op threads each),
//!   the same unit the profile file stores, so serving `(2, 1)` also updates `(1, 1)`'s `μ_1`. The caller
//!   attributes a call to the tuple of its time-weighted mean concurrency (rounded), see weir's executor.
//! - **Estimator.** A mean whose samples weigh `exp(−age/memory)` (default `memory` 10 s): the plain mean
//!   of the samples so far while they all are recent, then an exponentially weighted mean over about the
//!   last `memory` of serving, however many samples that holds, so it starts unbiased and then tracks
//!   drift. A memory counted in samples instead would, at hundreds of requests a second, hold only the
//!   last fraction of a second of each configuration's stint; the scheduler compares configurations
//!   every few seconds, each on the estimate of its last stint, and two such fragments rank on noise —
//!   enough to switch back and forth at every re-evaluation.
//! - **Override.** A tuple's measured rate replaces the offline one only once it has `min_samples` samples
//!   (default 20); below that the offline value stands. Tuples never run keep the offline value for ever,
//!   unless [`ExploreOptions`] lets the scheduler try them.
//! - Samples that are not finite and positive, or name a tuple the profile does not have, are ignored and
//!   counted as rejected.
//! - **Load bands** ([`LoadBands`], on by default). A tuple's service time depends on the load it was
//!   measured at, not only on the tuple: the process's own dataflow, I/O and load threads compete with
//!   inference for the cores, and a one-request two-thread tuple that keeps its profiled time at low load
//!   can take far longer at half the node's capacity. A rate measured at low load, blended into one
//!   number, therefore moves the scheduler to that configuration under moderate load. So each sample is
//!   also kept in a band of the arrival rate it was served at (bands a factor `ratio` wide, default
//!   1.25), and the rates the decision uses at load `λ` are those measured within one band of `λ` where a
//!   tuple has `min_samples` of them ([`OnlineProfile::candidates_at`]); elsewhere the tuple's load-blind
//!   estimate stands. A configuration whose tuples all have such samples is *evidenced* at `λ`
//!   ([`OnlineProfile::is_evidenced`]); the scheduler judges an unevidenced configuration with the
//!   slowdown the current one shows at this load (`crate::scheduler::Evidence`). Band estimates older
//!   than `stale_after` (120 s) are not used.
//! - **Idle gaps.** A call that starts on a slot idle for a gap `g` takes longer than one started back to
//!   back ([`crate::idle`]); the model adds that from the profile's curve wherever a configuration's lone
//!   tuple has no estimate near the load. Its rate there is the load-blind estimate, so that estimate is
//!   kept *back to back*: each sample with a known gap is divided by the offline curve's `S₀(g)/S₀(0)` for
//!   its thread count before it is blended in. Otherwise the load-blind estimate holds the idle slowness
//!   of the loads it was measured at and the curve adds it again, predicting nearly twice the latency
//!   served. Band estimates keep the raw times: at their own load they are what the node serves, idle
//!   starts included, and the curve is not added to them.
//! - **Settling after a switch** (`settle_after_switch`, 0.25 s). The calls of the first moments after the
//!   executor changes its configuration are not the configuration's speed: the calls of the old one still
//!   run beside them, the queue the switch found runs back to back, and threads that sat idle for seconds
//!   wake up. In bare ONNX Runtime the calls that began in the first 0.1 s after a switch took 1.4 to 2
//!   times as long as settled ones, and from 0.1 s on within 2 % of them. An exploration judges a
//!   configuration on its first one to three seconds, so that transient would be in its verdict. So the
//!   scheduler leaves out the service time of a call that began within `settle_after_switch` of a switch,
//!   or that was running when one came (`crate::scheduler::ServedCall::since_switch`), and counts it as
//!   settling. A quarter of a second is 2.5 times the transient bare ONNX Runtime shows, for the process's
//!   other threads; at 144 requests/s it leaves about 100 calls of a one-second exploration, at 52/s about
//!   40, both over `min_samples`. Within one served graph, which is what the scheduler's decisions
//!   compare, a trial then reads a configuration as a longer stint in it does.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::config::Config;
use crate::idle::IdleCurve;
use crate::slow_state::SlowStateOptions;
use crate::table::Candidates;

/// How measured service times are blended into the profile and how often the scheduler re-evaluates.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct OnlineOptions {
    /// Time over which measured service times are averaged: a sample's weight is `exp(−age/memory)`
    /// (10 s).
    pub memory: Duration,
    /// Samples a tuple needs before its measured rate overrides the offline one (20).
    pub min_samples: u64,
    /// The scheduler re-evaluates its configurations with the blended rates every this many updates (5).
    pub reevaluate_periods: u32,
    /// Occasional exploration of configurations without (fresh) measurements; `None` turns it off.
    pub explore: Option<ExploreOptions>,
    /// Service times kept apart by the load they were measured at; `None` blends all loads into one
    /// estimate per tuple.
    pub load_bands: Option<LoadBands>,
    /// Calls that began this soon after a switch of configuration (or ran across one) are left out
    /// (0.25 s; module docs, *Settling after a switch*). Zero keeps every call.
    pub settle_after_switch: Duration,
    /// The slowest level each tuple's calls ran at lately ([`crate::slow_state`]); a configuration
    /// whose slowest level could not carry the planned load, or that has none yet, earns no headroom
    /// there ([`crate::scheduler`], *Slow states*). `None` turns the rule off.
    pub slow_states: Option<SlowStateOptions>,
}

impl Default for OnlineOptions {
    fn default() -> Self {
        Self {
            memory: Duration::from_secs(10),
            min_samples: 20,
            reevaluate_periods: 5,
            explore: Some(ExploreOptions::default()),
            load_bands: Some(LoadBands::default()),
            settle_after_switch: Duration::from_millis(250),
            slow_states: Some(SlowStateOptions::default()),
        }
    }
}

/// How service times are grouped by the arrival rate they were measured at (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LoadBands {
    /// Width of one band as a ratio of its upper to its lower arrival rate (1.25). A sample taken at `λ'`
    /// informs the estimate at `λ` when their bands are at most one apart.
    pub ratio: f64,
    /// Band estimates whose last sample is older than this are not used (120 s).
    pub stale_after: Duration,
}

impl Default for LoadBands {
    fn default() -> Self {
        Self {
            ratio: 1.25,
            stale_after: Duration::from_secs(120),
        }
    }
}

impl LoadBands {
    /// The band of arrival rate `lambda` (`None` when it is not finite and positive).
    pub fn band(&self, lambda: f64) -> Option<i64> {
        (lambda.is_finite() && lambda > 0.0).then(|| (lambda.ln() / self.ratio.ln()).floor() as i64)
    }

    /// The arrival rates band `band` covers, `[low, high)`.
    pub fn range(&self, band: i64) -> (f64, f64) {
        let low = self.ratio.powf(band as f64);
        (low, low * self.ratio)
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
    /// Updates an exploration (or a trial, `crate::scheduler` docs) lasts at most (3); it ends at the
    /// first update at which every tuple of the configuration has a fresh measurement near the planned
    /// load, and the decision is then taken again with what it measured.
    pub max_periods: u32,
    /// Least time between two explorations of any configuration (20 s).
    pub interval: Duration,
    /// Measurements older than this count as stale, and a configuration is explored at most once per this
    /// time (300 s).
    pub stale_after: Duration,
    /// The same for a configuration the offline profile predicts faster than the one running at the
    /// planned load, which the measurements therefore contradict (60 s; `crate::scheduler` docs,
    /// *Exploration*).
    pub retry_after: Duration,
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
            retry_after: Duration::from_secs(60),
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
    /// Measured mean service time (weighted as the module docs say), each call after a known idle
    /// gap counted at its back-to-back time (module docs, *Idle gaps*), seconds; 0 before the first
    /// sample.
    pub measured_s: f64,
    /// Samples measured so far.
    pub samples: u64,
    /// When the last sample was recorded.
    pub last_sample: Option<Duration>,
    /// The samples' total weight at `last_sample` (each weighs `exp(−age/memory)`).
    pub weight: f64,
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

/// One tuple's service time measured within one load band.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BandEstimate {
    /// The tuple.
    pub tuple: Config,
    /// The arrival rates the band covers, `[low, high)` requests/s.
    pub load: (f64, f64),
    /// Mean service time in the band (weighted as the load-blind estimate), seconds.
    pub measured_s: f64,
    /// Samples in the band.
    pub samples: u64,
    /// When the last one was recorded.
    pub last_sample: Duration,
    /// The samples' total weight at `last_sample` (as [`TupleEstimate::weight`]).
    pub weight: f64,
}

/// The offline profile of one node's configurations with the service times measured while serving.
#[derive(Debug, Clone)]
pub struct OnlineProfile {
    options: OnlineOptions,
    configs: Vec<Config>,
    tuples: BTreeMap<Config, TupleEstimate>,
    /// Per tuple and load band (with [`LoadBands`]).
    bands: BTreeMap<(Config, i64), BandEstimate>,
    rejected: u64,
    /// The offline service after idle gaps, per thread count ([`crate::idle`]).
    after_idle: BTreeMap<usize, IdleCurve>,
}

/// The time-weighted running mean of [`OnlineProfile`] (module docs, *Estimator*): folds sample `new`
/// taken `elapsed` after the last one into `(mean, weight)`, where `weight` is the previous samples'
/// total weight at the last one; returns the new pair.
fn blend(mean: f64, weight: f64, elapsed: Duration, memory: Duration, new: f64) -> (f64, f64) {
    let decay = if memory.is_zero() {
        0.0
    } else {
        (-elapsed.as_secs_f64() / memory.as_secs_f64()).exp()
    };
    let weight = weight * decay + 1.0;
    (mean + (new - mean) / weight, weight)
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
                    weight: 0.0,
                });
            }
        }
        let after_idle = candidates
            .as_slice()
            .iter()
            .filter_map(|c| Some((c.config.threads, c.after_idle.clone()?)))
            .collect();
        Self {
            options,
            configs: candidates.as_slice().iter().map(|c| c.config).collect(),
            tuples,
            bands: BTreeMap::new(),
            rejected: 0,
            after_idle,
        }
    }

    /// The options in use.
    pub fn options(&self) -> &OnlineOptions {
        &self.options
    }

    /// Whether a sample of `seconds` for `tuple` would be used (a known tuple, a finite positive time).
    pub fn accepts(&self, tuple: Config, seconds: f64) -> bool {
        self.tuples.contains_key(&tuple) && seconds.is_finite() && seconds > 0.0
    }

    /// Records one request's service time `seconds`, measured at `now` with `tuple.concurrency` requests
    /// running while the node's arrival rate was `load` (requests/s; `None` when unknown, then only the
    /// load-blind estimate takes it), on a slot that had been idle for `idle_before` seconds before it
    /// (`None` when unknown; module docs, *Idle gaps*). Returns whether it was used.
    pub fn record(
        &mut self,
        now: Duration,
        tuple: Config,
        seconds: f64,
        load: Option<f64>,
        idle_before: Option<f64>,
    ) -> bool {
        if !self.accepts(tuple, seconds) {
            self.rejected += 1;
            return false;
        }
        let memory = self.options.memory;
        let back_to_back = seconds / self.slowdown_after(tuple.threads, idle_before);
        let Some(t) = self.tuples.get_mut(&tuple) else {
            return false;
        };
        let elapsed = t
            .last_sample
            .map_or(Duration::ZERO, |l| now.saturating_sub(l));
        t.samples += 1;
        (t.measured_s, t.weight) = blend(t.measured_s, t.weight, elapsed, memory, back_to_back);
        t.last_sample = Some(now);
        let Some(bands) = self.options.load_bands else {
            return true;
        };
        let Some(band) = load.and_then(|l| bands.band(l)) else {
            return true;
        };
        let b = self.bands.entry((tuple, band)).or_insert(BandEstimate {
            tuple,
            load: bands.range(band),
            measured_s: 0.0,
            samples: 0,
            last_sample: now,
            weight: 0.0,
        });
        let elapsed = now.saturating_sub(b.last_sample);
        // A band unused for longer than `stale_after` starts afresh rather than blending old times in.
        if elapsed > bands.stale_after {
            b.samples = 0;
            b.measured_s = 0.0;
            b.weight = 0.0;
        }
        b.samples += 1;
        (b.measured_s, b.weight) = blend(b.measured_s, b.weight, elapsed, memory, seconds);
        b.last_sample = now;
        true
    }

    /// How many times longer than back to back the offline profile says a call with `threads`
    /// intra-op threads takes after an idle gap of `idle_before` seconds (1 without a gap, or without
    /// a curve for `threads`).
    fn slowdown_after(&self, threads: usize, idle_before: Option<f64>) -> f64 {
        let gap = idle_before.filter(|g| g.is_finite() && *g > 0.0);
        gap.zip(self.after_idle.get(&threads))
            .map(|(gap, curve)| curve.slowdown_after(gap))
            .filter(|r| r.is_finite() && *r > 0.0)
            .unwrap_or(1.0)
    }

    /// The mean service time of `tuple` measured near arrival rate `load` (its band and the two beside it,
    /// fresh ones only, each weighted by its samples' weight at `now`) when they hold `min_samples` samples
    /// together.
    pub fn near_load(&self, tuple: Config, load: f64, now: Duration) -> Option<f64> {
        let bands = self.options.load_bands?;
        self.near_load_within(tuple, load, now, bands.stale_after)
    }

    /// [`Self::near_load`] with band estimates up to `stale_after` old.
    fn near_load_within(
        &self,
        tuple: Config,
        load: f64,
        now: Duration,
        stale_after: Duration,
    ) -> Option<f64> {
        let bands = self.options.load_bands?;
        let centre = bands.band(load)?;
        let memory = self.options.memory.as_secs_f64();
        let (mut samples, mut total, mut weighted) = (0u64, 0.0, 0.0);
        for b in (centre - 1..=centre + 1).filter_map(|k| self.bands.get(&(tuple, k))) {
            let age = now.saturating_sub(b.last_sample);
            if age <= stale_after {
                let w = (b.weight * (-age.as_secs_f64() / memory).exp()).max(f64::MIN_POSITIVE);
                samples += b.samples;
                total += w;
                weighted += w * b.measured_s;
            }
        }
        (samples >= self.options.min_samples.max(1) && weighted > 0.0).then(|| weighted / total)
    }

    /// Whether every tuple of `config` has been measured near arrival rate `load` ([`Self::near_load`]).
    pub fn is_evidenced(&self, config: Config, load: f64, now: Duration) -> bool {
        (1..=config.concurrency).all(|i| self.near_load(config.tuple(i), load, now).is_some())
    }

    /// Whether every tuple of `config` was measured near arrival rate `load` within `stale_after` of
    /// `now` (exploration's freshness, per load; with no load bands, [`Self::is_fresh`]).
    pub fn is_fresh_near(
        &self,
        config: Config,
        load: f64,
        now: Duration,
        stale_after: Duration,
    ) -> bool {
        if self.options.load_bands.is_none() {
            return self.is_fresh(config, now, stale_after);
        }
        (1..=config.concurrency).all(|i| {
            self.near_load_within(config.tuple(i), load, now, stale_after)
                .is_some()
        })
    }

    /// The configurations evidenced at arrival rate `load` ([`Self::is_evidenced`]), each with how much less
    /// capacity it has there than its offline profile gives (`c·μ_c` offline over measured, from the tuple
    /// with all `c` running).
    pub fn slowdowns_at(&self, load: f64, now: Duration) -> BTreeMap<Config, f64> {
        self.configs
            .iter()
            .filter(|&&c| self.is_evidenced(c, load, now))
            .filter_map(|&c| {
                let full = c.tuple(c.concurrency);
                let near = self.near_load(full, load, now)?;
                let offline = self.tuples.get(&full)?.offline_s;
                Some((c, near / offline))
            })
            .collect()
    }

    /// Every band estimate, in tuple then load order.
    pub fn band_estimates(&self) -> impl Iterator<Item = &BandEstimate> {
        self.bands.values()
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

    /// The configurations with the rates the decision should use at arrival rate `load` (module docs): per
    /// tuple, the rate measured near `load` where there is one, the load-blind blended rate elsewhere (so,
    /// without load bands, the load-blind rates throughout). A configuration with an unknown tuple is left
    /// out. The offline service after idle gaps goes with a configuration whose lone tuple `(1, t)` was
    /// not measured near `load` (its rate is then the load-blind one, kept back to back): one measured
    /// there already holds that load's first calls after a gap.
    pub fn candidates_at(&self, load: f64, now: Duration) -> Candidates {
        let rate = |tuple: Config| -> Option<f64> {
            let t = self.tuples.get(&tuple)?;
            Some(match self.near_load(tuple, load, now) {
                Some(s) => 1.0 / s,
                None => t.rate(self.options.min_samples),
            })
        };
        self.with_after_idle(
            Candidates::new(
                self.configs
                    .iter()
                    .filter_map(|&c| {
                        let mu: Option<Vec<f64>> =
                            (1..=c.concurrency).map(|i| rate(c.tuple(i))).collect();
                        mu.map(|mu| (c, mu))
                    })
                    .collect(),
            ),
            |c| self.near_load(c.tuple(1), load, now).is_none(),
        )
    }

    /// The configurations with their offline rates (what the profile said before any measurement).
    pub fn offline_candidates(&self) -> Candidates {
        self.with_after_idle(
            Candidates::new(
                self.configs
                    .iter()
                    .filter_map(|&c| {
                        let mu: Option<Vec<f64>> = (1..=c.concurrency)
                            .map(|i| self.tuples.get(&c.tuple(i)).map(|t| 1.0 / t.offline_s))
                            .collect();
                        mu.map(|mu| (c, mu))
                    })
                    .collect(),
            ),
            |_| true,
        )
    }

    /// `candidates` with the offline idle curve of their thread count where `wanted`.
    fn with_after_idle(
        &self,
        candidates: Candidates,
        wanted: impl Fn(Config) -> bool,
    ) -> Candidates {
        candidates.with_after_idle(|c| {
            wanted(c)
                .then(|| self.after_idle.get(&c.threads).cloned())
                .flatten()
        })
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
mod tests;
