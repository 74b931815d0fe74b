//! What a set-up measured: its trials per offered rate, the largest rate that meets the target,
//! goodput at the fixed rate, and which types served its jobs.

use crate::overhead::median;

use super::setup::Setup;

/// One trial.
#[derive(Debug, Clone, Copy)]
pub struct Trial {
    /// p50 latency, ms.
    pub p50_ms: f64,
    /// p99 latency, ms (infinite when nothing was answered).
    pub p99_ms: f64,
    /// Queries not answered with outputs.
    pub errors: usize,
    /// Queries answered within the QoS target per second.
    pub goodput: f64,
    /// CPU time of the graph process and every executor over the trial, per second of it (cores).
    pub cpu_cores: f64,
}

impl Trial {
    /// Its p99 as the sweep judges it: infinite when a request went unanswered.
    pub fn judged_p99(&self) -> f64 {
        if self.errors > 0 {
            f64::INFINITY
        } else {
            self.p99_ms
        }
    }
}

/// One rate of a sweep.
#[derive(Debug, Clone)]
pub struct RatePoint {
    /// Offered rate, requests/s.
    pub rate: f64,
    /// The trials at this rate.
    pub trials: Vec<Trial>,
}

impl RatePoint {
    /// Median over the trials of the judged p99.
    pub fn median_p99(&self) -> f64 {
        median(self.trials.iter().map(Trial::judged_p99).collect())
    }
}

/// One set-up's results.
#[derive(Debug, Clone)]
pub struct SetupResult {
    /// The set-up.
    pub setup: Setup,
    /// Pool price, $/h.
    pub cost_per_hour: f64,
    /// The sweep, lowest rate first.
    pub points: Vec<RatePoint>,
    /// Largest rate whose median p99 meets QoS (0 when none does).
    pub max_rate: f64,
    /// Each trial index's own largest passing rate (the spread of `max_rate`).
    pub max_rate_per_trial: Vec<f64>,
    /// The goodput trials at the fixed rate.
    pub goodput: Vec<Trial>,
    /// Share of jobs each type served over the whole set-up.
    pub type_share: Vec<f64>,
    /// Executor calls (jobs) per query over the whole set-up: below 1 when Kairos batches queued
    /// queries, above 1 when a query was split.
    pub jobs_per_query: f64,
}

impl SetupResult {
    /// Median goodput, requests/s.
    pub fn median_goodput(&self) -> f64 {
        median(self.goodput.iter().map(|t| t.goodput).collect())
    }
}

/// The largest rate of the sweep whose median p99 (or trial `k`'s own p99) meets `qos_ms`.
pub fn max_passing(points: &[RatePoint], qos_ms: f64, k: Option<usize>) -> f64 {
    points
        .iter()
        .filter(|p| {
            let p99 = match k {
                None => p.median_p99(),
                Some(k) => p.trials.get(k).map_or(f64::INFINITY, Trial::judged_p99),
            };
            p99 <= qos_ms
        })
        .map(|p| p.rate)
        .fold(0.0, f64::max)
}

/// What a run used: the heterogeneous pool, how Kairos knew latencies, and the real time per call.
#[derive(Debug, Clone)]
pub struct RunInfo {
    /// The heterogeneous pool, instances per type.
    pub hetero: Vec<usize>,
    /// Whether `weir plan` chose it (else it was given).
    pub planned: bool,
    /// Per type, the share of the trace's queries over its QoS limit.
    pub over_limit: Vec<f64>,
    /// Real ONNX Runtime ms per call at some row counts.
    pub real_call_ms: Vec<(usize, f64)>,
    /// Per type, its mean query latency measured through weir at each of `PROFILE_ROWS`.
    pub measured_ms: Vec<Vec<f64>>,
}
