//! The SERF accuracy experiment on real ONNX Runtime (SERF, Figs. 11 and 12): profile a model
//! with [`weir::profile::profile_node`], then run a one-node graph with every fixed configuration
//! `(c, t)` (c sessions × t intra-op threads) under open-loop Poisson load at each of `loads`
//! levels `λ_k = k/loads · 0.9 · max(c·μ_c)`, and compare the measured mean latency with the
//! M/D_interf/c prediction from the profile.
//!
//! Decisions: a configuration is run at a load only when the model says `ρ < 0.9` (nearer
//! saturation a few thousand requests do not give a stable mean); requests per point grow with
//! the load (`requests · k/loads`, at least [`SerfBenchConfig::min_requests`], at most
//! `point_seconds · λ`), because latency varies little at low load and idle gaps make low loads
//! slow. The measured latency is weir's (scheduled send to answer), so it includes weir's fixed
//! per-request cost; the prediction adds the path time the profile measured
//! ([`weir_serf::profile::Profile::path_after`]) and what requests that start after an idle gap
//! add (`weir_serf::idle`), and every point also records the paper's prediction from the same
//! profile (plus the back-to-back path time), so one run shows what those terms change.
//!
//! The error is taken apart in layers, each a column of the table:
//! - *At the node.* The executor counts each job's time from queued to answered (its wait in the
//!   node's queue plus the call), which is exactly what the queueing model predicts, so the model's
//!   error at the node shows apart from the path outside it (weir's ingress and egress and the
//!   load generator's lateness, a column of its own).
//! - *In situ.* Every point records the mean ONNX Runtime call while it ran next to the mean
//!   service time the model expects there (Eq. 12 with the slower calls of requests that start
//!   on an idle slot), and predicts again with every `μ_i` scaled so that the model's mean service
//!   time is the one measured. What remains is the queueing model's own error plus
//!   weir's path.
//! - *Spread.* The profile measures calls back to back, where their squared coefficient of
//!   variation (SCV) is near 0; under load they spread, the service level can move during a point,
//!   and the arrivals at the node can come in clumps after the serving path. Each has its reading
//!   from the executor's call log (`weir_operators::model::RecordedCalls`) and its in-situ
//!   prediction: the queue of service times as spread as the calls were
//!   (`Prediction::waiting_with_scv`), the prediction per [`SPEED_WINDOW`] averaged (latency is
//!   convex in the service time, so slow stretches cost more than fast ones give back), and
//!   Kingman's two-moment waiting with the measured arrival and call SCVs
//!   (`Prediction::waiting_with_scvs`).
//!
//! Three more predictions test why a profile taken once can miss the service level the loads
//! see, each a column beside the profile's (which stays the table's prediction: the paper's
//! method, and what `weir profile` writes):
//! - [`SerfBenchConfig::second_profile`]: a second profile ([`SecondProfile`]) taken just before
//!   each configuration's loads (the profile's age), with its rounds spread over minutes (one
//!   moment against several), or without a waiting client (the queue's path work).
//! - *SERF online*: the profile blended with the calls the node served before the point
//!   ([`weir_serf::online`], its default options, one [`weir_serf::online::OnlineProfile`] for the
//!   model's whole run, as a node that serves every configuration in turn keeps one). Each call
//!   counts for the tuple of the number of calls that ran with it on average
//!   ([`calls_running_with`], what the live executor attributes) at the point's nominal arrival
//!   rate: what SERF's live choice acts on.
//! - *Carried service level*: the last point served ran `f` = measured over predicted mean service
//!   times slower than the profile says, and the next point is predicted on the profile slowed by
//!   `f` ([`weir_serf::table::Candidate::slowed`]). Unlike measured rates it does not count a low
//!   load's idle-gap slowness twice at a higher one, and a configuration's first point takes the
//!   level of the configuration before (the host's speed).
//!
//! What these layers measured on real hosts is in `benchmarks/serf/README.md`.

mod in_situ;
mod measure;
mod plot;
mod point;
mod table;
#[cfg(test)]
mod tests;

use std::path::PathBuf;

use anyhow::Result;
use weir::profile::ProfileOptions;

pub use in_situ::{
    arrival_scv, calls_running_with, in_situ_latency, in_situ_latency_with_scvs, scv, window_cv,
    windowed_in_situ_latency, windowed_service, SPEED_WINDOW,
};
pub(crate) use measure::request_signature;
pub use plot::plot_serf;
pub use point::{error_summary, median_abs_error, BestAtLoad, SerfModelResult, SerfPoint};
pub use table::serf_table;

/// Utilisation at and above which a configuration is not run at a load.
pub const MAX_RHO: f64 = 0.9;

/// The SERF experiment's settings.
#[derive(Debug, Clone)]
pub struct SerfBenchConfig {
    /// Models: display name and file.
    pub models: Vec<(String, PathBuf)>,
    /// Requests at the highest load; lower loads get proportionally fewer.
    pub requests: usize,
    /// Fewest requests at any point.
    pub min_requests: usize,
    /// Most seconds one point may take (caps its requests at `point_seconds · λ`).
    pub point_seconds: f64,
    /// Load levels.
    pub loads: usize,
    /// Top load as a fraction of the largest capacity.
    pub headroom: f64,
    /// How the models are profiled.
    pub profile: ProfileOptions,
    /// A second profile every point is also predicted from ([`SerfPoint::second_predicted_ms`]),
    /// if any.
    pub second_profile: Option<SecondProfile>,
}

/// Which second profile [`SerfBenchConfig::second_profile`] takes: each tests one reading of why
/// a profile taken once misses the service level the load runs see.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SecondProfile {
    /// The same profile again just before each configuration's loads: is the error the profile's
    /// age?
    BeforeEachConfiguration,
    /// One profile right after the first, its rounds (at least [`SPREAD_ROUNDS`]) spread over
    /// `over` ([`weir_serf::profile::BuildOptions::round_gap`]): is the error that a profile
    /// measures one moment?
    Spread {
        /// Time from the first round to the last.
        over: std::time::Duration,
    },
    /// One profile right after the first whose tuples `(i, t)` run with `i` clients, none waiting
    /// ([`weir::profile::in_graph::GraphProfiler::without_queue`]): is the error the waiting
    /// client's path work slowing one slot while the profile fills every core?
    WithoutQueue,
}

/// Fewest rounds of a [`SecondProfile::Spread`] profile.
pub const SPREAD_ROUNDS: usize = 5;

impl SecondProfile {
    /// How the report names it.
    pub fn describe(&self) -> String {
        match self {
            SecondProfile::BeforeEachConfiguration => {
                "a profile taken just before each configuration's loads".to_string()
            }
            SecondProfile::Spread { over } => format!(
                "a profile with its rounds spread over {:.0} s, taken right after the first",
                over.as_secs_f64()
            ),
            SecondProfile::WithoutQueue => {
                "a profile whose tuples ran with as many clients as slots (none waiting), taken right after the first".to_string()
            }
        }
    }

    /// The options of the second profile, from those of the first.
    pub(crate) fn options(&self, first: &ProfileOptions) -> ProfileOptions {
        let quiet = ProfileOptions {
            progress: false,
            ..*first
        };
        match self {
            SecondProfile::BeforeEachConfiguration => quiet,
            SecondProfile::Spread { over } => {
                let rounds = first.rounds.max(SPREAD_ROUNDS);
                ProfileOptions {
                    rounds,
                    samples: first.samples.max(2 * rounds),
                    round_gap: over.div_f64((rounds - 1) as f64),
                    ..quiet
                }
            }
            SecondProfile::WithoutQueue => ProfileOptions {
                without_queue: true,
                ..quiet
            },
        }
    }
}

/// Runs the experiment for every model.
///
/// # Errors
/// When a model cannot be profiled or run, or a request fails.
pub fn serf_bench(config: &SerfBenchConfig) -> Result<Vec<SerfModelResult>> {
    config
        .models
        .iter()
        .map(|(name, path)| measure::measure_model(name, path, config))
        .collect()
}
