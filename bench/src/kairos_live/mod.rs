//! The live Kairos experiment: real `weir executor` processes of emulated instance types, at the
//! same budget, under open-loop Poisson load of queries with trace-like sizes.
//!
//! Instance types are emulated with `weir executor --emulate-latency BASE_MS,PER_ROW_MS` (real
//! ONNX Runtime inference, the call then held until `BASE + PER_ROW × rows` ms have passed since it
//! could start) and priced by the graph's `cost_per_hour` labels. The default types follow the
//! Kairos paper's DIEN fits ×4 in time: a GPU-like type (g4dn: large fixed cost, small
//! per-row cost, expensive) and a CPU-like one (r5n: the opposite, cheap), so each has the batch
//! sizes it is best at, which uniform slowdowns cannot give. The model is a small 64 → W → W → 10
//! MLP with seeded weights (well under a millisecond of real inference per call, so the emulated
//! time dominates and the machine's cores stay far from saturated; the bench measures
//! and reports the CPU its processes use).
//!
//! Workload: queries of several rows (one graph request per row, submitted together so they reach
//! the model node as one job), with sizes drawn from the paper artifact's replay of the DeepRecSys
//! production trace (`weir_kairos::workload::BatchDist::Trace`: 10..1000 rows, mean ≈ 244, heavy
//! tail), Poisson arrivals. A query's latency is from its scheduled send to its last row's answer.
//!
//! Kairos gets the emulated types' batch → latency profile the way a user gives it: a profile YAML
//! (`routing: {kairos: {qos_ms, profiles: profile.yaml}}`), or, with `learned`, nothing (latencies
//! learned online). The heterogeneous pool is the one `weir plan` picks for the profile and budget
//! (or given). Set-ups: that pool and every homogeneous pool the budget buys of a type that meets
//! the QoS target at the largest query (the paper's homogeneous baseline; a type that cannot serve
//! the largest queries in time cannot meet a p99 when more than 1 % of queries are that large),
//! each under every routing policy. Metric, per set-up: a sweep up a fixed grid of offered rates
//! (×`rate_step` from `start_rate`), `trials` runs of `seconds_per_trial` at each rate, and the
//! largest rate whose **median p99 over the trials** (a trial with an unanswered query counts as a
//! miss) meets the QoS target; the sweep stops after two rates in a row miss. Then the goodput
//! (queries answered within the target per second) of `trials` runs at one fixed offered rate.
//!
//! The modules: `types` the instance types and their profile, `setup` the pools and policies,
//! `run` running them, `results` what each measured, `table` and `plot` the report.

mod plot;
mod results;
mod run;
mod setup;
mod table;
#[cfg(test)]
mod tests;
mod types;

use std::path::{Path, PathBuf};

pub use plot::plot_kairos_live;
pub use results::{max_passing, RatePoint, RunInfo, SetupResult, Trial};
pub use run::{kairos_live, real_call_ms};
pub use setup::{setups, share_over_limit, Policy, Setup};
pub use table::{kairos_live_points, kairos_live_table};
pub use types::{emulated_profile, planned_pool, EmulatedType, KairosLatency};

/// Rows of the largest query (the trace's largest batch, the paper's 1000).
pub const MAX_QUERY_ROWS: usize = 1000;

/// Rows at which profiles are measured and written.
const PROFILE_ROWS: [usize; 6] = [10, 100, 250, 500, 750, MAX_QUERY_ROWS];

/// The profile file beside each set-up's graph.
const PROFILE_FILE: &str = "profile.yaml";

/// The experiment's settings.
#[derive(Debug, Clone)]
pub struct KairosLiveConfig {
    /// Instance types.
    pub types: Vec<EmulatedType>,
    /// Instances per type of the heterogeneous pool (`None`: the pool `weir plan` picks).
    pub hetero: Option<Vec<usize>>,
    /// Budget in $/h every pool must fit.
    pub budget_per_hour: f64,
    /// p99 latency target, ms.
    pub qos_ms: f64,
    /// MLP hidden width.
    pub hidden: usize,
    /// Where Kairos's latencies come from.
    pub kairos_latency: KairosLatency,
    /// First offered rate of each sweep, queries/s.
    pub start_rate: f64,
    /// Factor between consecutive rates of the sweep.
    pub rate_step: f64,
    /// Highest rate of the sweep.
    pub max_rate: f64,
    /// Seconds of load per trial (at least `min_queries` queries).
    pub seconds_per_trial: f64,
    /// Fewest queries per trial (so a p99 rests on a few queries over it).
    pub min_queries: usize,
    /// Trials per rate; medians over them are reported.
    pub trials: usize,
    /// Offered rate of the goodput runs, queries/s.
    pub goodput_rate: f64,
    /// Policies to run (every pool is run under each).
    pub policies: Vec<Policy>,
}

impl KairosLiveConfig {
    /// Queries per trial at `rate`.
    pub fn queries_at(&self, rate: f64) -> usize {
        ((rate * self.seconds_per_trial) as usize).clamp(self.min_queries.max(1), 20_000)
    }

    /// The sweep's rates.
    pub fn rates(&self) -> Vec<f64> {
        let mut v = Vec::new();
        let mut r = self.start_rate.max(1.0);
        while r <= self.max_rate * (1.0 + 1e-9) && v.len() < 64 {
            v.push((r * 10.0).round() / 10.0);
            r *= self.rate_step.max(1.01);
        }
        v
    }
}

/// The model file the experiment writes and serves, under `.weir/models/`.
pub fn default_model(weir_home: &Path, hidden: usize) -> PathBuf {
    weir_home
        .join("models")
        .join(format!("kairos_mlp_{hidden}.onnx"))
}
