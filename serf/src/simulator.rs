//! A discrete-event simulator of the M/D_interf/c queue, used to check [`crate::model`] against the exact
//! process and to replay load changes against the scheduler. The paper has no simulator; this one follows
//! the paper's definition of the queue (§IV-C).
//!
//! **The process.** Requests arrive by a Poisson process (or at given times), wait in one FIFO queue, and are
//! admitted in arrival order while fewer than `c` run. Every request brings one unit of work (deterministic:
//! homogeneous requests), or a Gamma-distributed amount with mean 1 and a chosen SCV. A profile `μ_1..μ_c`
//! says how fast work is done with `k` requests in service. Two semantics:
//!
//! - [`Semantics::Dynamic`] (default, "dyn"): while `k` requests are in service each running
//!   request's remaining work decreases at rate `μ_k` per second, re-evaluated at every arrival, start and
//!   completion. A request alone for its whole run takes exactly `1/μ_1`; one that always shares with `k−1`
//!   others takes `1/μ_k`. This is the physical reading of "service rate with `i` running".
//! - [`Semantics::FrozenAtStart`] ("start"): a request's service time is fixed when it starts to
//!   `work/μ_k`, `k` = number in service including itself. This is what the model's PASTA step assumes.
//!
//! **Switching.** [`Station::set_profile`] changes the profile (and so the admission limit `c` = its length)
//! at a point in time. Requests already running keep the profile they were admitted under (in weir they keep
//! their intra-op threads); their rate still follows the current number in service `k`, clamped to their
//! profile's length. New admissions use the new profile; if `c` shrinks nothing is admitted until fewer than
//! the new `c` run.
//!
//! **Idle starts.** With an [`IdleCurve`] ([`Station::with_after_idle`], [`SimConfig::after_idle`]), a
//! request that starts on a slot that has been free for `g` seconds brings `S₀(g)/S₀(0)` units of
//! work instead of one (`S₀(0)` is the curve's back-to-back time, `1/μ_1` when measured with the
//! rates): alone it takes `S₀(g)`, the slower call after an idle gap of [`crate::idle`]. The
//! slots are tracked one by one, as weir's executor runs them: a request that arrives while some
//! slots are free takes the one free longest (the executor's session threads wait on one shared
//! queue, first come first served), and a slot that finishes while requests wait takes the next one
//! at once (no gap, back-to-back work). With one slot this is the exceptional first service of a
//! busy period; with `c ≥ 2` a request that finds some slots busy also starts on a slot that was idle.
//!
//! Randomness comes only from a seeded [`rand::rngs::StdRng`], so a run is a pure function of its inputs.

use crate::idle::IdleCurve;
use crate::model::{check_inputs, ModelError};
use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp, Gamma};
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::Arc;

/// How interference acts on a running request (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub enum Semantics {
    /// Work progresses at `μ_k` for the current number in service `k` ("dyn").
    #[default]
    Dynamic,
    /// Service time is fixed at start to `work/μ_k` ("start").
    FrozenAtStart,
}

/// Why a simulation could not run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    /// The rates or the arrival rate are invalid (same checks as the model).
    #[error(transparent)]
    Input(#[from] ModelError),
    /// Zero requests were asked for.
    #[error("no requests to measure")]
    NoRequests,
    /// The work SCV is negative or not finite.
    #[error("work SCV {0} is not a finite non-negative number")]
    InvalidScv(f64),
}

/// One finished request's timestamps, in seconds of simulated time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Completed {
    /// When it arrived.
    pub arrival: f64,
    /// When it was admitted and started running.
    pub start: f64,
    /// When it finished.
    pub finish: f64,
}

impl Completed {
    /// Waiting time in the queue.
    pub fn waiting(&self) -> f64 {
        self.start - self.arrival
    }
    /// Service (execution) time.
    pub fn service(&self) -> f64 {
        self.finish - self.start
    }
    /// Latency: waiting plus service.
    pub fn latency(&self) -> f64 {
        self.finish - self.arrival
    }
}

/// A running request.
#[derive(Debug, Clone)]
struct Job {
    arrival: f64,
    start: f64,
    /// Dynamic: remaining work units. FrozenAtStart: remaining seconds.
    remaining: f64,
    /// Profile it was admitted under.
    mu: Arc<[f64]>,
}

/// The queue and the `c` slots of one serving unit, advanced by explicit times.
#[derive(Debug, Clone)]
pub struct Station {
    semantics: Semantics,
    now: f64,
    mu: Arc<[f64]>,
    queue: VecDeque<(f64, f64)>,
    running: Vec<Job>,
    /// Service of a request that starts on a free slot, by how long the slot was free.
    after_idle: Option<IdleCurve>,
    /// Since when each free slot has been free (`c` minus the running requests of them; a slot
    /// never used counts as free since time 0).
    free_since: Vec<f64>,
}

impl Station {
    /// An idle station at time 0 with profile `mu = μ_1..μ_c` (admission limit `c = mu.len()`).
    ///
    /// # Errors
    /// [`SimError::Input`] if `mu` is empty or has a non-positive rate.
    pub fn new(mu: &[f64], semantics: Semantics) -> Result<Self, SimError> {
        check_inputs(0.0, mu)?;
        Ok(Self {
            semantics,
            now: 0.0,
            mu: mu.into(),
            queue: VecDeque::new(),
            running: Vec::new(),
            after_idle: None,
            free_since: vec![0.0; mu.len()],
        })
    }

    /// The same station where a request starting on a free slot takes `curve`'s time after the
    /// slot's idle gap.
    pub fn with_after_idle(mut self, curve: Option<IdleCurve>) -> Self {
        self.after_idle = curve;
        self
    }

    /// Current simulated time.
    pub fn now(&self) -> f64 {
        self.now
    }

    /// Requests waiting plus running.
    pub fn in_system(&self) -> usize {
        self.queue.len() + self.running.len()
    }

    /// Switches to profile `mu` at the current time: new admission limit `mu.len()`; running requests keep
    /// their profile. Admits waiting requests if the limit grew.
    ///
    /// # Errors
    /// [`SimError::Input`] if `mu` is empty or has a non-positive rate.
    pub fn set_profile(&mut self, mu: &[f64]) -> Result<(), SimError> {
        check_inputs(0.0, mu)?;
        self.mu = mu.into();
        let free = mu.len().saturating_sub(self.running.len());
        // Slots a larger `c` adds are fresh (free since the start); a smaller `c` gives up the slots
        // free longest first.
        self.free_since.resize(self.free_since.len().max(free), 0.0);
        self.free_since.sort_by(|a, b| b.total_cmp(a));
        self.free_since.truncate(free);
        self.admit();
        Ok(())
    }

    /// Rate at which a job's `remaining` decreases with `k` jobs in service.
    fn rate(semantics: Semantics, job: &Job, k: usize) -> f64 {
        match semantics {
            Semantics::Dynamic => job.mu[k.min(job.mu.len()) - 1],
            Semantics::FrozenAtStart => 1.0,
        }
    }

    fn admit(&mut self) {
        while self.running.len() < self.mu.len() {
            let Some((arrival, work)) = self.queue.pop_front() else {
                break;
            };
            let k = self.running.len() + 1;
            let work = work * self.start_on_free_slot();
            let remaining = match self.semantics {
                Semantics::Dynamic => work,
                Semantics::FrozenAtStart => work / self.mu[k - 1],
            };
            self.running.push(Job {
                arrival,
                start: self.now,
                remaining,
                mu: self.mu.clone(),
            });
        }
    }

    /// Takes the slot free longest for a request starting now; returns the factor its work grows by
    /// after that slot's idle gap (1 without an idle curve, or on a slot freed just now).
    fn start_on_free_slot(&mut self) -> f64 {
        let longest = self
            .free_since
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(b.1))
            .map(|(i, _)| i);
        let Some(slot) = longest else {
            return 1.0;
        };
        let gap = self.now - self.free_since.swap_remove(slot);
        self.after_idle.as_ref().map_or(1.0, |curve| {
            curve.service_after(gap) / curve.service_after(0.0)
        })
    }

    /// Time of the next completion if nothing else happens, or `None` when idle.
    pub fn next_completion(&self) -> Option<f64> {
        let k = self.running.len();
        self.running
            .iter()
            .map(|j| self.now + j.remaining / Self::rate(self.semantics, j, k))
            .min_by(|a, b| a.total_cmp(b))
    }

    /// Runs the station up to time `until` (times before now count as now), appending every request that
    /// finishes on the way (including at `until`) to `out` and admitting waiting ones as slots free up.
    pub fn advance(&mut self, until: f64, out: &mut Vec<Completed>) {
        let until = until.max(self.now);
        loop {
            let k = self.running.len();
            let next = self
                .running
                .iter()
                .enumerate()
                .map(|(i, j)| (i, j.remaining / Self::rate(self.semantics, j, k)))
                .min_by(|a, b| a.1.total_cmp(&b.1));
            let Some((idx, dt)) = next else {
                self.now = until;
                return;
            };
            // Same expression as `next_completion`, so draining to that time completes the job.
            let finish = self.now + dt;
            let ends = finish <= until;
            let step = if ends { dt } else { until - self.now };
            let semantics = self.semantics;
            for j in self.running.iter_mut() {
                j.remaining -= step * Self::rate(semantics, j, k);
            }
            if !ends {
                self.now = until;
                return;
            }
            self.now = finish.max(self.now);
            let job = self.running.swap_remove(idx);
            out.push(Completed {
                arrival: job.arrival,
                start: job.start,
                finish: self.now,
            });
            if self.running.len() + self.free_since.len() < self.mu.len() {
                self.free_since.push(self.now);
            }
            self.admit();
        }
    }

    /// A request with `work` units (1.0 for a homogeneous request) arrives at time `at` (clamped to now);
    /// the station is advanced to `at` first.
    pub fn arrive(&mut self, at: f64, work: f64, out: &mut Vec<Completed>) {
        self.advance(at, out);
        self.queue.push_back((self.now, work));
        self.admit();
    }

    /// Runs until every request in the system has finished.
    pub fn drain(&mut self, out: &mut Vec<Completed>) {
        while let Some(t) = self.next_completion() {
            self.advance(t, out);
        }
    }
}

/// Summary statistics of a set of finished requests, in seconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencyStats {
    /// Number of requests summarised.
    pub requests: usize,
    /// Mean latency.
    pub mean_latency: f64,
    /// Mean waiting time.
    pub mean_waiting: f64,
    /// Mean service time.
    pub mean_service: f64,
    /// Median latency.
    pub p50: f64,
    /// 90th percentile latency.
    pub p90: f64,
    /// 95th percentile latency.
    pub p95: f64,
    /// 99th percentile latency.
    pub p99: f64,
    /// Half-width of a ≈95% confidence interval of the mean latency from 20 batch means (in order).
    pub ci95_half_width: f64,
}

impl LatencyStats {
    /// Statistics of `done` (in the order given, which matters only for the batch means); `None` if empty.
    pub fn of(done: &[Completed]) -> Option<Self> {
        let n = done.len();
        if n == 0 {
            return None;
        }
        let mean = |f: fn(&Completed) -> f64| done.iter().map(f).sum::<f64>() / n as f64;
        let mut lat: Vec<f64> = done.iter().map(Completed::latency).collect();
        let batches = 20.min(n);
        let per = n / batches;
        let means: Vec<f64> = (0..batches)
            .map(|b| lat[b * per..(b + 1) * per].iter().sum::<f64>() / per as f64)
            .collect();
        let bm = means.iter().sum::<f64>() / batches as f64;
        let var =
            means.iter().map(|m| (m - bm) * (m - bm)).sum::<f64>() / (batches.max(2) - 1) as f64;
        // Student t, 19 degrees of freedom, two-sided 95%.
        let ci95_half_width = 2.093 * (var / batches as f64).sqrt();
        lat.sort_by(|a, b| a.total_cmp(b));
        let pct = |q: f64| lat[((q * n as f64).ceil() as usize).clamp(1, n) - 1];
        Some(Self {
            requests: n,
            mean_latency: mean(Completed::latency),
            mean_waiting: mean(Completed::waiting),
            mean_service: mean(Completed::service),
            p50: pct(0.50),
            p90: pct(0.90),
            p95: pct(0.95),
            p99: pct(0.99),
            ci95_half_width,
        })
    }
}

/// One steady-state simulation run: Poisson(`lambda`) arrivals to a station with profile `mu`.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// Arrival rate (requests per second).
    pub lambda: f64,
    /// Service rates `μ_1..μ_c` (requests per second per request).
    pub mu: Vec<f64>,
    /// Interference semantics.
    pub semantics: Semantics,
    /// Requests measured after warm-up.
    pub requests: usize,
    /// Requests completed and discarded first.
    pub warmup: usize,
    /// Squared coefficient of variation of a request's work (0 = deterministic, the M/D case).
    pub work_scv: f64,
    /// RNG seed.
    pub seed: u64,
    /// Service after an idle gap for requests that start on a free slot (`None`: `1/μ_1`).
    pub after_idle: Option<IdleCurve>,
}

impl SimConfig {
    /// Deterministic work, [`Semantics::Dynamic`], 5% warm-up (at least 1000), seed 1.
    pub fn new(lambda: f64, mu: &[f64], requests: usize) -> Self {
        Self {
            lambda,
            mu: mu.to_vec(),
            semantics: Semantics::Dynamic,
            requests,
            warmup: (requests / 20).max(1000),
            work_scv: 0.0,
            seed: 1,
            after_idle: None,
        }
    }
}

/// Source of one request's work: 1, or Gamma(mean 1, SCV `scv`).
struct WorkSampler(Option<Gamma<f64>>);

impl WorkSampler {
    fn new(scv: f64) -> Result<Self, SimError> {
        if !(scv.is_finite() && scv >= 0.0) {
            return Err(SimError::InvalidScv(scv));
        }
        if scv == 0.0 {
            return Ok(Self(None));
        }
        Gamma::new(1.0 / scv, scv)
            .map(|g| Self(Some(g)))
            .map_err(|_| SimError::InvalidScv(scv))
    }
    fn sample(&self, rng: &mut StdRng) -> f64 {
        self.0.as_ref().map_or(1.0, |g| g.sample(rng))
    }
}

/// Simulates `cfg` and summarises the measured requests (completion order).
///
/// An unstable load (`λ ≥ c·μ_c`) is allowed and simply gives huge latencies; callers that compare with the
/// model should skip it.
///
/// # Errors
/// [`SimError::Input`] for invalid rates (including `λ ≤ 0`, which has no arrivals),
/// [`SimError::NoRequests`] for `requests == 0`, [`SimError::InvalidScv`].
pub fn simulate(cfg: &SimConfig) -> Result<LatencyStats, SimError> {
    check_inputs(cfg.lambda, &cfg.mu)?;
    if cfg.lambda <= 0.0 {
        return Err(SimError::Input(ModelError::InvalidArrivalRate(cfg.lambda)));
    }
    if cfg.requests == 0 {
        return Err(SimError::NoRequests);
    }
    let inter = Exp::new(cfg.lambda)
        .map_err(|_| SimError::Input(ModelError::InvalidArrivalRate(cfg.lambda)))?;
    let work = WorkSampler::new(cfg.work_scv)?;
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    let mut station = Station::new(&cfg.mu, cfg.semantics)?.with_after_idle(cfg.after_idle.clone());
    let total = cfg.warmup + cfg.requests;
    let mut done = Vec::with_capacity(total + cfg.mu.len() + 1);
    let mut t = 0.0;
    while done.len() < total {
        t += inter.sample(&mut rng);
        let w = work.sample(&mut rng);
        station.arrive(t, w, &mut done);
    }
    done.truncate(total);
    LatencyStats::of(&done[cfg.warmup..]).ok_or(SimError::NoRequests)
}

#[cfg(test)]
mod tests;
