//! The SERF accuracy experiment on real ONNX Runtime (note §5.2 X5, X6; paper Figs. 11, 12): profile
//! a model with [`crate::serf::profile_node`], then run a one-node graph with every fixed
//! configuration `(c, t)` (c sessions × t intra-op threads) under open-loop Poisson load at each of
//! `loads` levels `λ_k = k/loads · 0.9 · max(c·μ_c)`, and compare the measured mean latency with
//! the M/D_interf/c prediction from the profile.
//!
//! Decisions: a configuration is run at a load only when the model says `ρ < 0.9` (nearer
//! saturation a few thousand requests do not give a stable mean); requests per point grow with
//! the load (`requests · k/loads`, at least [`SerfBenchConfig::min_requests`], at most
//! `point_seconds · λ`), because latency varies little at low load and idle gaps make low loads
//! slow. The measured latency is weir's (scheduled send to answer), so it includes weir's fixed
//! per-request cost, which the profile of bare sessions does not; the table reports it as error.
//!
//! To tell the two sources of error apart, every point also records the mean time of an ONNX Runtime
//! call while it ran (the executor's busy time over its calls) next to the mean service time the model
//! expects there (Eq. 12 with the slower calls of requests that start on an idle slot,
//! `weir_serf::idle`), and an *in-situ* prediction: the paper's model with every `μ_i` scaled so
//! that its mean service time (Eq. 12) is the one measured. The in-situ error is what remains
//! once the service level is right: the queueing model's own error plus weir's path.
//!
//! The node's calls are also timed one by one during each point, and their squared coefficient
//! of variation (SCV) gives a second in-situ prediction whose queue is that of service times as
//! spread as the calls were (`Prediction::waiting_with_scv`: Pollaczek–Khinchine for one slot,
//! the two-moment interpolation between the deterministic and the exponential wait for several).
//! The profile measures calls back to back, where their SCV is near 0; on the 16-core host
//! squeezenet's `(1, 2)` queued 15 % longer than the model where its mean call time held, and
//! this column says how much of such a gap the calls' spread under load explains.
//!
//! Two more readings test what could make a queue longer than the model's at a right service
//! level, both from the executor's call log (`weir_operators::model::RecordedCalls`): the service
//! level moving *during* a point (the calls cut into [`SPEED_WINDOW`]s, the windows' spread of
//! mean call time as a CV, and an in-situ prediction per window averaged — latency is convex in
//! the service time, so slow stretches cost more than fast ones give back), and the arrivals at
//! the node coming in clumps after the serving path (the SCV of the gaps between the jobs'
//! arrivals there, and an in-situ prediction at the node with Kingman's two-moment waiting,
//! `Prediction::waiting_with_scvs`). On this VM the windows held (CVs 0.001–0.24) and squeezenet's
//! arrivals at the node were Poisson-like (SCVs 0.85–1.11); only the 1 ms MLP at 1000+/s clumped
//! (SCV up to 1.9), and there Kingman's term takes a fifth off the error at the node
//! (`benchmarks/SERF.md`, *Layers of the error*). The table also gives the in-situ error at the
//! node alone — the queueing model with its service level set to the calls measured, against the
//! node's own queue wait plus call: what is left for the model itself.
//!
//! With [`SerfBenchConfig::second_profile`] every point is also predicted from a second profile
//! ([`SecondProfile`]): one taken just before each configuration's loads (is the error the
//! profile's age?) or one whose rounds are spread over minutes (is it that a profile measures one
//! moment?). Decision: the profile taken once stays the table's prediction (the paper's method,
//! and what `weir profile` writes by default); the second is a column.
//!
//! Every point also splits the measured latency at the model node: the executor counts each job's
//! time from queued to answered (its wait in the node's queue plus the call), which is exactly what
//! the queueing model predicts, so the table shows the model's error at the node apart from the path
//! outside it (weir's ingress and egress and the load generator's lateness), and the summary gives
//! the error against the latency from the actual send as well (the generator's lateness, a cost of
//! sharing two cores with the served model, taken out).
//!
//! Every point is also predicted the way a live node running `parallelism: auto` sees it: from the
//! profile blended with the calls the node served before the point ([`weir_serf::online`], its
//! default options, one [`OnlineProfile`] for the model's whole run, as a node that serves every
//! configuration in turn keeps one). Each call counts for the tuple of the number of calls that ran
//! with it on average ([`calls_running_with`], what the live executor attributes) at the point's
//! nominal arrival rate. A configuration's first point is predicted from what earlier
//! configurations measured of its tuples, or the profile; later ones from its own calls at lower
//! loads. Decision: a column beside the profile's prediction, not instead of it — the paper's
//! figure is a profile's prediction, this one is what SERF's live choice acts on.
//!
//! A second causal column carries the *service level* instead of the rates: the last point served
//! ran `f` = measured over predicted mean service (Eq. 12 with the idle starts) times slower than
//! the profile says, and the next point is predicted on the profile slowed by `f`
//! ([`weir_serf::table::Candidate::slowed`]: every service time, after idle gaps too). Unlike
//! measured rates it does not count a low load's idle-gap slowness twice at a higher one, and a
//! configuration's first point takes the level of the configuration before (the host's speed).
//!
//! The prediction includes what requests that start after an idle gap add (`weir_serf::idle`, from
//! the profile's `after_idle`) and the path time for arrivals at that load
//! (`weir_serf::profile::Profile::path_after`); every point also records the paper's prediction
//! from the same profile (plus the back-to-back path time), so one run shows what the terms
//! change. The load generator's own lateness (how long after its arrival
//! time each request was sent, counted in the measured latency) is a column of its own.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};
use plotters::prelude::*;
use weir_engine::onnx::{ElementType, TensorInfo};
use weir_serf::baseline::Predictor;
use weir_serf::config::Config;
use weir_serf::model::{predict, Estimate};
use weir_serf::online::{OnlineOptions, OnlineProfile};
use weir_serf::profile::Profile;
use weir_serf::table::Candidates;

use super::overhead::{first_input_output, median};
use crate::loadgen::{run_load, Arrival, LoadSpec};
use crate::serf::in_graph::{one_node_graph, NODE};
use crate::serf::{profile_node, ProfileOptions};
use crate::RunningGraph;

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
    /// ([`crate::serf::in_graph::GraphProfiler::without_queue`]): is the error the waiting
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
    fn options(&self, first: &ProfileOptions) -> ProfileOptions {
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

/// One configuration at one load.
#[derive(Debug, Clone, PartialEq)]
pub struct SerfPoint {
    /// Configuration run.
    pub config: Config,
    /// Load level `k` (1-based).
    pub level: usize,
    /// Arrival rate, requests per second.
    pub lambda: f64,
    /// Predicted utilisation.
    pub rho: f64,
    /// Predicted mean latency, ms (with what requests after idle gaps add, where profiled).
    pub predicted_ms: f64,
    /// Predicted mean latency without weir's terms (service and path after idle gaps): the
    /// paper's model on the profile's rates plus the back-to-back path time, ms.
    pub back_to_back_ms: f64,
    /// Predicted mean latency as [`Self::predicted_ms`], from the second profile
    /// ([`SerfBenchConfig::second_profile`]) instead of the first, ms (`None`: none asked for, or
    /// unstable at `λ` on it).
    pub second_predicted_ms: Option<f64>,
    /// Predicted mean latency as [`Self::predicted_ms`], from the profile blended with the calls
    /// served before this point (module docs; `None`: unstable at `λ` on those rates), ms.
    pub online_predicted_ms: Option<f64>,
    /// Predicted mean latency as [`Self::predicted_ms`], on the profile slowed to the service
    /// level of the last point served (module docs; `None`: unstable at `λ` there), ms.
    pub carried_predicted_ms: Option<f64>,
    /// Measured mean latency, ms.
    pub measured_ms: f64,
    /// How late the load generator sent each request after its Poisson arrival time, on average,
    /// ms (part of the measured latency; [`crate::loadgen::LoadReport::mean_send_lateness`]).
    pub send_late_ms: f64,
    /// Requests measured.
    pub requests: usize,
    /// Mean service time the model expects at this load (Eq. 12 with the idle starts), ms.
    pub predicted_service_ms: f64,
    /// Mean ONNX Runtime call time measured during the point, ms (`None`: no call recorded).
    pub measured_service_ms: Option<f64>,
    /// Mean latency predicted with the service rates scaled to the measured service time, ms (`None`:
    /// no service time, or the scaled rates cannot keep up with `λ`).
    pub in_situ_ms: Option<f64>,
    /// Squared coefficient of variation of the node's calls during the point (`None`: fewer than
    /// two calls recorded); the profile's, back to back, is near 0.
    pub measured_service_scv: Option<f64>,
    /// [`Self::in_situ_ms`] with the queue of service times as spread as the calls measured
    /// ([`weir_serf::model::Prediction::waiting_with_scv`]) instead of deterministic, ms (`None`
    /// as for the in-situ prediction, or no SCV).
    pub in_situ_scv_ms: Option<f64>,
    /// Squared coefficient of variation of the gaps between the jobs' arrivals at the node
    /// ([`arrival_scv`]; `None`: fewer than three): the load generator sends a Poisson stream, and
    /// what reaches the node after the serving path may come in clumps.
    pub node_arrival_scv: Option<f64>,
    /// The in-situ prediction at the node (no path outside it) with the waiting of the measured
    /// arrival and call SCVs ([`in_situ_latency_with_scvs`]), ms (`None` as for the in-situ
    /// prediction, or either SCV missing).
    pub in_situ_node_spread_ms: Option<f64>,
    /// Coefficient of variation of the mean call time across the point's [`SPEED_WINDOW`]s
    /// ([`window_cv`]; `None`: fewer than two windows).
    pub window_service_cv: Option<f64>,
    /// The in-situ prediction per [`SPEED_WINDOW`], averaged ([`windowed_in_situ_latency`]), ms
    /// (`None`: no calls, or a window where the scaled rates cannot keep up).
    pub windowed_in_situ_ms: Option<f64>,
    /// The part of [`Self::predicted_ms`] spent at the model node (waiting in its queue, then the
    /// call): the queueing model's own prediction, ms.
    pub predicted_node_ms: f64,
    /// Measured mean time from a request's job being queued at the node to its answer there, ms
    /// (`None`: no job answered); the rest of the measured latency is the path outside the node.
    pub measured_node_ms: Option<f64>,
}

impl SerfPoint {
    /// `(predicted − measured) / measured`.
    pub fn error(&self) -> f64 {
        relative_error(self.predicted_ms, self.measured_ms)
    }

    /// The error of the prediction without weir's terms.
    pub fn back_to_back_error(&self) -> f64 {
        relative_error(self.back_to_back_ms, self.measured_ms)
    }

    /// The error of the prediction from the second profile.
    pub fn second_error(&self) -> Option<f64> {
        self.against_latency(self.second_predicted_ms)
    }

    /// The error of the prediction from the calls served before the point.
    pub fn online_error(&self) -> Option<f64> {
        self.against_latency(self.online_predicted_ms)
    }

    /// The error of the prediction at the service level of the last point served.
    pub fn carried_error(&self) -> Option<f64> {
        self.against_latency(self.carried_predicted_ms)
    }

    /// The same for the in-situ prediction.
    pub fn in_situ_error(&self) -> Option<f64> {
        self.against_latency(self.in_situ_ms)
    }

    /// The same for the in-situ prediction with the calls' measured spread.
    pub fn in_situ_scv_error(&self) -> Option<f64> {
        self.against_latency(self.in_situ_scv_ms)
    }

    /// The in-situ prediction's error at the node alone: the queueing model, its service level set
    /// to the calls measured, against the node's measured queue wait plus call — what remains for
    /// the model itself.
    pub fn node_in_situ_error(&self) -> Option<f64> {
        let path = self.predicted_path_ms();
        self.against_node(self.in_situ_ms.map(|p| p - path))
    }

    /// The same with the waiting of the measured arrival and call spreads.
    pub fn node_in_situ_spread_error(&self) -> Option<f64> {
        self.against_node(self.in_situ_node_spread_ms)
    }

    /// The same for the in-situ prediction per window.
    pub fn windowed_in_situ_error(&self) -> Option<f64> {
        self.against_latency(self.windowed_in_situ_ms)
    }

    /// The error against the latency from when the load generator actually sent each request
    /// (its lateness, a harness cost of sharing the cores with the served model, taken out).
    pub fn from_send_error(&self) -> f64 {
        relative_error(self.predicted_ms, self.measured_ms - self.send_late_ms)
    }

    /// The error of the time at the node alone: the queueing model against the node's measured
    /// queue wait plus call, without the path outside it.
    pub fn node_error(&self) -> Option<f64> {
        self.against_node(Some(self.predicted_node_ms))
    }

    /// The error of a prediction of the whole latency, if there is one.
    fn against_latency(&self, predicted_ms: Option<f64>) -> Option<f64> {
        predicted_ms.map(|p| relative_error(p, self.measured_ms))
    }

    /// The error of a prediction of the time at the node, if there is one and the node's time was
    /// measured.
    fn against_node(&self, predicted_ms: Option<f64>) -> Option<f64> {
        predicted_ms
            .zip(self.measured_node_ms.filter(|&m| m > 0.0))
            .map(|(p, m)| relative_error(p, m))
    }

    /// The predicted time outside the node (the serving path), ms.
    fn predicted_path_ms(&self) -> f64 {
        self.predicted_ms - self.predicted_node_ms
    }

    /// Predicted and measured time outside the node (the serving path and the load generator's
    /// lateness), ms.
    pub fn outside_the_node_ms(&self) -> Option<(f64, f64)> {
        self.measured_node_ms
            .map(|m| (self.predicted_path_ms(), self.measured_ms - m))
    }
}

/// `(predicted − measured) / measured`.
fn relative_error(predicted: f64, measured: f64) -> f64 {
    (predicted - measured) / measured
}

/// The mean latency (seconds) the model predicts at `lambda` with the rates `mu` scaled so that its mean
/// service time is `measured_service_s` instead of `predicted_service_s` (module docs); `None` when the
/// inputs are not positive or the scaled configuration is unstable at `lambda`.
pub fn in_situ_latency(
    lambda: f64,
    mu: &[f64],
    predicted_service_s: f64,
    measured_service_s: f64,
) -> Option<f64> {
    in_situ_prediction(lambda, mu, predicted_service_s, measured_service_s).map(|p| p.latency)
}

/// [`in_situ_latency`] with the waiting of arrivals and service times whose squared coefficients
/// of variation are `(arrival_scv, service_scv)`
/// ([`weir_serf::model::Prediction::waiting_with_scvs`]; arrival SCV 1 is Poisson).
pub fn in_situ_latency_with_scvs(
    lambda: f64,
    mu: &[f64],
    predicted_service_s: f64,
    measured_service_s: f64,
    (arrival_scv, service_scv): (f64, f64),
) -> Option<f64> {
    in_situ_prediction(lambda, mu, predicted_service_s, measured_service_s)
        .map(|p| p.service + p.waiting_with_scvs(arrival_scv, service_scv))
}

/// Squared coefficient of variation of the gaps between consecutive `arrivals` (sorted; `None`:
/// fewer than three): 1 for a Poisson stream, above 1 when they come in clumps.
pub fn arrival_scv(arrivals: &[std::time::Instant]) -> Option<f64> {
    let gaps: Vec<std::time::Duration> = arrivals
        .windows(2)
        .map(|w| w[1].saturating_duration_since(w[0]))
        .collect();
    scv(&gaps)
}

/// The paper's prediction with the rates `mu` scaled to the measured mean service time.
fn in_situ_prediction(
    lambda: f64,
    mu: &[f64],
    predicted_service_s: f64,
    measured_service_s: f64,
) -> Option<weir_serf::model::Prediction> {
    if !(predicted_service_s > 0.0 && measured_service_s > 0.0) {
        return None;
    }
    let scale = predicted_service_s / measured_service_s;
    let scaled: Vec<f64> = mu.iter().map(|m| m * scale).collect();
    predict(lambda, &scaled).ok()
}

/// Squared coefficient of variation of `times` (`None`: fewer than two, or a zero mean).
pub fn scv(times: &[std::time::Duration]) -> Option<f64> {
    if times.len() < 2 {
        return None;
    }
    let n = times.len() as f64;
    let secs = || times.iter().map(std::time::Duration::as_secs_f64);
    let mean = secs().sum::<f64>() / n;
    let variance = secs().map(|t| (t - mean).powi(2)).sum::<f64>() / n;
    (mean > 0.0).then(|| variance / (mean * mean))
}

/// For each of `calls`, how many calls ran with it on average over its span, itself included
/// (time-weighted, rounded, at least 1): the tuple `i` a live node's executor counts the call for
/// (`weir_operators::model::parallelism`), here from the call log after the fact.
pub fn calls_running_with(calls: &[weir_operators::model::CallRecord]) -> Vec<usize> {
    let spans: Vec<(std::time::Instant, std::time::Instant)> = calls
        .iter()
        .map(|c| {
            let start = c.ended_at.checked_sub(c.duration).unwrap_or(c.ended_at);
            (start, c.ended_at)
        })
        .collect();
    spans
        .iter()
        .map(|&(start, end)| {
            let own = end.saturating_duration_since(start).as_secs_f64();
            if own <= 0.0 {
                return 1;
            }
            let together: f64 = spans
                .iter()
                .map(|&(s, e)| {
                    e.min(end)
                        .saturating_duration_since(s.max(start))
                        .as_secs_f64()
                })
                .sum();
            ((together / own).round() as usize).max(1)
        })
        .collect()
}

/// Feeds a point's `calls` of a configuration `config` served at arrival rate `lambda` into
/// `online` as a live node would (each for the tuple of [`calls_running_with`], at most `c`, with
/// its session thread's idle gap before it), in the order they ended, timed from `origin`.
fn record_served_calls(
    online: &mut OnlineProfile,
    config: Config,
    lambda: f64,
    calls: &[weir_operators::model::CallRecord],
    origin: std::time::Instant,
) {
    let running = calls_running_with(calls);
    let mut ordered: Vec<(&weir_operators::model::CallRecord, usize)> =
        calls.iter().zip(running).collect();
    ordered.sort_by_key(|(c, _)| c.ended_at);
    for (call, i) in ordered {
        online.record(
            call.ended_at.saturating_duration_since(origin),
            config.tuple(i.min(config.concurrency)),
            call.duration.as_secs_f64(),
            Some(lambda),
            call.idle_before.map(|d| d.as_secs_f64()),
        );
    }
}

/// Length of the windows [`windowed_service`] cuts a point's calls into: the VM's speed states
/// last seconds (`benchmarks/SERF.md`, *serf phases*), a queue at `ρ ≤ 0.8` forgets its past
/// in tens of calls, and half a second holds at least fifteen calls at every load run.
pub const SPEED_WINDOW: std::time::Duration = std::time::Duration::from_millis(500);

/// A point's calls cut by their end times into consecutive windows of `window`: per window with
/// calls, how many and their mean duration (seconds), in time order.
pub fn windowed_service(
    calls: &[weir_operators::model::CallRecord],
    window: std::time::Duration,
) -> Vec<(usize, f64)> {
    let Some(first) = calls.iter().map(|c| c.ended_at).min() else {
        return Vec::new();
    };
    let mut windows: std::collections::BTreeMap<u64, (usize, f64)> = Default::default();
    let width = window.as_secs_f64().max(1e-6);
    for c in calls {
        let at = c.ended_at.saturating_duration_since(first).as_secs_f64();
        let slot = windows.entry((at / width) as u64).or_default();
        slot.0 += 1;
        slot.1 += c.duration.as_secs_f64();
    }
    windows
        .into_values()
        .map(|(n, total)| (n, total / n as f64))
        .collect()
}

/// Coefficient of variation of the windows' mean call time, each window weighted by its calls
/// (`None`: fewer than two windows): how much the service level itself moved during a point, apart
/// from the calls' spread within a window.
pub fn window_cv(windows: &[(usize, f64)]) -> Option<f64> {
    if windows.len() < 2 {
        return None;
    }
    let n: f64 = windows.iter().map(|w| w.0 as f64).sum();
    let mean = windows.iter().map(|&(k, m)| k as f64 * m).sum::<f64>() / n;
    let variance = windows
        .iter()
        .map(|&(k, m)| k as f64 * (m - mean).powi(2))
        .sum::<f64>()
        / n;
    (mean > 0.0).then(|| variance.sqrt() / mean)
}

/// The mean latency (seconds) the model predicts at `lambda` for a host whose speed moves slowly
/// (a quasi-static reading of a service level that drifts): in each window the rates `mu` are
/// scaled to that window's mean call time as [`in_situ_latency`] does, and the windows'
/// predictions are averaged weighted by their calls. Because latency is convex in the service
/// time, slow stretches cost more than fast ones give back, which one mean service level cannot
/// show. `None` when there is no window, or a window's scaled rates cannot keep up with `lambda`
/// (the quasi-static reading does not hold there: the queue of such a stretch outlives it).
pub fn windowed_in_situ_latency(
    lambda: f64,
    mu: &[f64],
    predicted_service_s: f64,
    windows: &[(usize, f64)],
) -> Option<f64> {
    let mut weighted = 0.0;
    let mut calls = 0usize;
    for &(n, mean_s) in windows {
        weighted += n as f64 * in_situ_latency(lambda, mu, predicted_service_s, mean_s)?;
        calls += n;
    }
    (calls > 0).then(|| weighted / calls as f64)
}

/// Best-configuration identification at one load (X6).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BestAtLoad {
    /// Load level `k`.
    pub level: usize,
    /// Arrival rate.
    pub lambda: f64,
    /// The configuration with the lowest predicted latency among those run.
    pub predicted: Config,
    /// The configuration with the lowest measured latency.
    pub measured: Config,
    /// Measured latency of the predicted best over the measured best (1 when they agree).
    pub ratio: f64,
}

impl BestAtLoad {
    /// The model's choice is the measured best, or within 5 % of it.
    pub fn acceptable(&self) -> bool {
        self.predicted == self.measured || self.ratio <= 1.05
    }
}

/// Everything measured for one model.
#[derive(Debug, Clone)]
pub struct SerfModelResult {
    /// Model name.
    pub model: String,
    /// Its profile.
    pub profile: Profile,
    /// Every point run, by configuration then load.
    pub points: Vec<SerfPoint>,
    /// Best configuration per load.
    pub best: Vec<BestAtLoad>,
    /// Wall time of the load runs, seconds.
    pub load_seconds: f64,
    /// A second profile taken after the load runs: how far the machine drifted meanwhile.
    pub profile_after: Profile,
    /// The second profile, if any, and which: by configuration (the same one for every
    /// configuration when it is taken once).
    pub second_profiles: Option<(SecondProfile, Vec<(Config, Profile)>)>,
}

impl SerfModelResult {
    /// Per configuration, the relative change of its capacity `c·μ_c` from the profile before the
    /// load runs to the one after (noise indicator on a shared machine).
    pub fn drift(&self) -> Vec<(Config, f64)> {
        let after = Candidates::from_profile(&self.profile_after);
        Candidates::from_profile(&self.profile)
            .as_slice()
            .iter()
            .filter_map(|c| {
                after
                    .get(c.config)
                    .map(|a| (c.config, a.capacity() / c.capacity() - 1.0))
            })
            .collect()
    }

    /// Per configuration, the relative change of its capacity from the first profile to the
    /// second.
    pub fn second_profile_drift(&self) -> Vec<(Config, f64)> {
        let first = Candidates::from_profile(&self.profile);
        let Some((_, seconds)) = &self.second_profiles else {
            return Vec::new();
        };
        seconds
            .iter()
            .filter_map(|(config, second)| {
                let now = Candidates::from_profile(second);
                let (then, now) = (first.get(*config)?, now.get(*config)?);
                Some((*config, now.capacity() / then.capacity() - 1.0))
            })
            .collect()
    }
}

/// Mean, p90 and p95 of the absolute values of `errors`.
pub fn error_summary(errors: impl Iterator<Item = f64>) -> (f64, f64, f64) {
    let mut e: Vec<f64> = errors.map(f64::abs).collect();
    if e.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    e.sort_by(f64::total_cmp);
    let q = |f: f64| e[((f * e.len() as f64).ceil() as usize).clamp(1, e.len()) - 1];
    (e.iter().sum::<f64>() / e.len() as f64, q(0.9), q(0.95))
}

/// The first input, its element type and per-request shape (a dynamic dimension read as 1), and the
/// first output, of the model at `path`: what a one-node benchmark graph declares.
pub(crate) fn request_signature(
    path: &Path,
) -> Result<(TensorInfo, weir_engine::tensor::DType, Vec<i64>, TensorInfo)> {
    let (input, output) = first_input_output(path)?;
    let ElementType::Supported(dtype) = input.element else {
        return Err(anyhow!("{}: input is not f32 or i64", path.display()));
    };
    let shape: Vec<i64> = input.request_shape().iter().map(|&n| n as i64).collect();
    Ok((input, dtype, shape, output))
}

/// Requests for load level `k` of `loads` at rate `lambda` (module docs).
fn requests_at(config: &SerfBenchConfig, level: usize, lambda: f64) -> usize {
    let scaled = config.requests * level / config.loads.max(1);
    let cap = (config.point_seconds * lambda) as usize;
    scaled.min(cap).max(config.min_requests)
}

/// Profiles and measures one model.
fn measure_model(name: &str, path: &Path, config: &SerfBenchConfig) -> Result<SerfModelResult> {
    let profile = profile_node(name, path, &config.profile)?;
    let candidates = Candidates::from_profile(&profile);
    let top = candidates
        .max_capacity()
        .ok_or_else(|| anyhow!("{name}: empty profile"))?
        .capacity();
    let lambdas: Vec<f64> = (1..=config.loads)
        .map(|k| k as f64 / config.loads as f64 * config.headroom * top)
        .collect();
    let started = std::time::Instant::now();
    let mut online = OnlineProfile::new(&candidates, OnlineOptions::default());
    // Measured over predicted mean service of the last point served.
    let mut service_level = 1.0;
    let mut points = Vec::new();
    let once = match config.second_profile {
        Some(kind @ (SecondProfile::Spread { .. } | SecondProfile::WithoutQueue)) => {
            Some(profile_node(name, path, &kind.options(&config.profile))?)
        }
        _ => None,
    };
    // Taken once, the second profile stands for every configuration, run or not.
    let mut second_profiles: Vec<(Config, Profile)> = once
        .iter()
        .flat_map(|p| candidates.as_slice().iter().map(|c| (c.config, p.clone())))
        .collect();
    for candidate in candidates.as_slice() {
        // `p` is the paper's model on the profile's rates; `estimate` adds the idle-gap terms.
        let runnable: Vec<(usize, f64, weir_serf::model::Prediction, Estimate)> = lambdas
            .iter()
            .enumerate()
            .filter_map(|(i, &l)| {
                let p = predict(l, &candidate.mu).ok().filter(|p| p.rho < MAX_RHO)?;
                let estimate = candidate.estimate(l, Predictor::Serf).ok()?;
                Some((i + 1, l, p, estimate))
            })
            .collect();
        if runnable.is_empty() {
            continue;
        }
        let second = match config.second_profile {
            Some(kind @ SecondProfile::BeforeEachConfiguration) => {
                let again = profile_node(name, path, &kind.options(&config.profile))?;
                second_profiles.push((candidate.config, again.clone()));
                Some(again)
            }
            Some(SecondProfile::Spread { .. } | SecondProfile::WithoutQueue) => once.clone(),
            None => None,
        };
        let second_candidate = second
            .as_ref()
            .map(Candidates::from_profile)
            .and_then(|c| c.get(candidate.config).cloned());
        let (graph, workload) = one_node_graph(path, candidate.config, config.profile.executor())?;
        run_load(
            graph.runtime(),
            &workload,
            &LoadSpec {
                requests: 20 * candidate.config.concurrency,
                warmup: 0,
                arrival: Arrival::Closed {
                    concurrency: candidate.config.concurrency,
                },
                seed: 0,
                label_output: None,
                progress: false,
            },
        );
        let node_counters = |g: &RunningGraph| {
            g.executor_stats()
                .into_iter()
                .next()
                .map(|(_, s)| s)
                .unwrap_or_default()
        };
        for (level, lambda, prediction, estimate) in runnable {
            let latency = estimate.latency;
            let online_predicted_ms = online
                .candidates_at(lambda, started.elapsed())
                .get(candidate.config)
                .and_then(|c| c.estimate(lambda, Predictor::Serf).ok())
                .map(|e| profile.predicted_latency(e.latency, lambda) * 1e3);
            let carried_predicted_ms = candidate
                .slowed(service_level)
                .estimate(lambda, Predictor::Serf)
                .ok()
                .map(|e| profile.predicted_latency(e.latency, lambda) * 1e3);
            let requests = requests_at(config, level, lambda);
            let before = node_counters(&graph);
            let calls = graph.executor_load(NODE);
            if let Some(calls) = calls {
                calls.record_calls();
            }
            let report = run_load(
                graph.runtime(),
                &workload,
                &LoadSpec {
                    requests,
                    warmup: 0,
                    arrival: Arrival::Poisson { rate: lambda },
                    seed: level as u64,
                    label_output: None,
                    progress: false,
                },
            );
            if report.error_count() > 0 || report.ok == 0 {
                graph.shutdown();
                return Err(anyhow!(
                    "{name} {}: errors {:?}",
                    candidate.config,
                    report.errors
                ));
            }
            let call_log = calls.map(|c| c.take_calls()).unwrap_or_default();
            record_served_calls(
                &mut online,
                candidate.config,
                lambda,
                &call_log.calls,
                started,
            );
            let call_times: Vec<std::time::Duration> =
                call_log.calls.iter().map(|c| c.duration).collect();
            let measured_scv = scv(&call_times);
            let node_arrival_scv = arrival_scv(&call_log.arrivals);
            let windows = windowed_service(&call_log.calls, SPEED_WINDOW);
            let after = node_counters(&graph);
            let mean_over = |total: std::time::Duration, before: std::time::Duration, n: u64| {
                (n > 0).then(|| total.saturating_sub(before).as_secs_f64() / n as f64)
            };
            let measured_service = mean_over(
                after.busy,
                before.busy,
                after.runs.saturating_sub(before.runs),
            );
            let measured_node = mean_over(
                after.sojourn,
                before.sojourn,
                after.jobs_answered.saturating_sub(before.jobs_answered),
            );
            let in_situ_with = |spreads: (f64, f64)| {
                measured_service.and_then(|s| {
                    in_situ_latency_with_scvs(lambda, &candidate.mu, prediction.service, s, spreads)
                })
            };
            if let Some(measured) = measured_service.filter(|_| estimate.service > 0.0) {
                service_level = measured / estimate.service;
            }
            let point = SerfPoint {
                config: candidate.config,
                level,
                lambda,
                rho: prediction.rho,
                predicted_ms: profile.predicted_latency(latency, lambda) * 1e3,
                second_predicted_ms: second.as_ref().zip(second_candidate.as_ref()).and_then(
                    |(second, c)| {
                        let estimate = c.estimate(lambda, Predictor::Serf).ok()?;
                        Some(second.predicted_latency(estimate.latency, lambda) * 1e3)
                    },
                ),
                online_predicted_ms,
                carried_predicted_ms,
                back_to_back_ms: (prediction.latency + profile.path_s.unwrap_or(0.0)) * 1e3,
                measured_ms: report.latency_us.mean() / 1e3,
                send_late_ms: report.mean_send_lateness.as_secs_f64() * 1e3,
                requests,
                predicted_service_ms: estimate.service * 1e3,
                measured_service_ms: measured_service.map(|s| s * 1e3),
                in_situ_ms: measured_service
                    .and_then(|s| in_situ_latency(lambda, &candidate.mu, prediction.service, s))
                    .map(|l| profile.predicted_latency(l, lambda) * 1e3),
                measured_service_scv: measured_scv,
                in_situ_scv_ms: measured_scv
                    .and_then(|cs| in_situ_with((1.0, cs)))
                    .map(|l| profile.predicted_latency(l, lambda) * 1e3),
                node_arrival_scv,
                in_situ_node_spread_ms: node_arrival_scv
                    .zip(measured_scv)
                    .and_then(in_situ_with)
                    .map(|l| l * 1e3),
                window_service_cv: window_cv(&windows),
                windowed_in_situ_ms: windowed_in_situ_latency(
                    lambda,
                    &candidate.mu,
                    prediction.service,
                    &windows,
                )
                .map(|l| profile.predicted_latency(l, lambda) * 1e3),
                predicted_node_ms: latency * 1e3,
                measured_node_ms: measured_node.map(|s| s * 1e3),
            };
            eprintln!(
                "{name} {} λ={lambda:.1}/s ({requests} requests): predicted {:.3} ms, measured {:.3} ms ({:+.1} %); service predicted {:.3} ms, measured {}",
                point.config,
                point.predicted_ms,
                point.measured_ms,
                point.error() * 100.0,
                point.predicted_service_ms,
                point.measured_service_ms.map_or_else(|| "–".to_string(), |m| format!("{m:.3} ms"))
            );
            points.push(point);
        }
        graph.shutdown();
    }
    let best = (1..=config.loads)
        .filter_map(|level| {
            let here: Vec<&SerfPoint> = points.iter().filter(|p| p.level == level).collect();
            let by = |f: fn(&SerfPoint) -> f64| {
                here.iter().copied().min_by(|a, b| f(a).total_cmp(&f(b)))
            };
            let predicted = by(|p| p.predicted_ms)?;
            let measured = by(|p| p.measured_ms)?;
            Some(BestAtLoad {
                level,
                lambda: predicted.lambda,
                predicted: predicted.config,
                measured: measured.config,
                ratio: predicted.measured_ms / measured.measured_ms,
            })
        })
        .collect();
    let load_seconds = started.elapsed().as_secs_f64();
    let profile_after = profile_node(name, path, &config.profile)?;
    Ok(SerfModelResult {
        model: name.to_string(),
        profile,
        points,
        best,
        load_seconds,
        profile_after,
        second_profiles: config.second_profile.map(|kind| (kind, second_profiles)),
    })
}

/// The back-to-back path time, in ms, and where the profile was measured.
fn path_cell(profile: &Profile) -> String {
    let place = match profile.measured_in {
        Some(weir_serf::profile::MeasuredIn::Graph) => "graph",
        Some(weir_serf::profile::MeasuredIn::Sessions) => "bare sessions",
        None => "unknown",
    };
    match profile.path_s {
        Some(p) => format!("{:.3} ({place})", p * 1e3),
        None => format!("– ({place})"),
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
        .map(|(name, path)| measure_model(name, path, config))
        .collect()
}

/// The results as Markdown: per-point table, error summary against the paper, best configuration
/// per load.
pub fn serf_table(results: &[SerfModelResult]) -> String {
    let mut s = String::from("| model | config | k | λ (1/s) | ρ | requests | predicted ms | measured ms | error | the paper's model (back to back): ms, error | service ms predicted / measured | in-situ predicted ms | in-situ error | at the node ms predicted / measured, error | outside the node ms predicted / measured | sender late µs | call SCV | in-situ with the call SCV: ms, error | window CV | arrival SCV at the node | in-situ at the node with both SCVs: ms, error | from the second profile: ms, error | from the calls served before (SERF online): ms, error | at the service level of the last point served: ms, error |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    push_rows(
        &mut s,
        results,
        |r| r.points.iter(),
        |p| {
            let dash = || "–".to_string();
            format!(
                "{} | {} | {:.1} | {:.2} | {} | {:.3} | {:.3} | {:+.1} % | {:.3}, {:+.1} % | {:.3} / {} | {} | {} | {:.3} / {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {}",
                p.config,
                p.level,
                p.lambda,
                p.rho,
                p.requests,
                p.predicted_ms,
                p.measured_ms,
                p.error() * 100.0,
                p.back_to_back_ms,
                p.back_to_back_error() * 100.0,
                p.predicted_service_ms,
                p.measured_service_ms
                    .map_or_else(dash, |m| format!("{m:.3}")),
                p.in_situ_ms
                    .map_or_else(|| "unstable".to_string(), |m| format!("{m:.3}")),
                p.in_situ_error()
                    .map_or_else(dash, |e| format!("{:+.1} %", e * 100.0)),
                p.predicted_node_ms,
                p.measured_node_ms
                    .zip(p.node_error())
                    .map_or_else(dash, |(m, e)| format!("{m:.3}, {:+.1} %", e * 100.0)),
                p.outside_the_node_ms()
                    .map_or_else(dash, |(pred, m)| format!("{pred:.3} / {m:.3}")),
                p.send_late_ms * 1e3,
                p.measured_service_scv
                    .map_or_else(dash, |v| format!("{v:.3}")),
                p.in_situ_scv_ms
                    .zip(p.in_situ_scv_error())
                    .map_or_else(dash, |(m, e)| format!("{m:.3}, {:+.1} %", e * 100.0)),
                p.window_service_cv
                    .map_or_else(dash, |v| format!("{v:.3}")),
                p.node_arrival_scv.map_or_else(dash, |v| format!("{v:.3}")),
                p.in_situ_node_spread_ms
                    .zip(p.node_in_situ_spread_error())
                    .map_or_else(dash, |(m, e)| format!("{m:.3}, {:+.1} %", e * 100.0)),
                p.second_predicted_ms
                    .zip(p.second_error())
                    .map_or_else(dash, |(m, e)| format!("{m:.3}, {:+.1} %", e * 100.0)),
                causal_cell(p.online_predicted_ms, p.online_error()),
                causal_cell(p.carried_predicted_ms, p.carried_error()),
            )
        },
    );
    s.push_str("\n| model | points | mean \\|error\\| | p90 | p95 | max | the paper's model: mean \\|error\\| / p90 | best config: same / within 5 % / wrong | load runs s | profiling wall s | back-to-back path ms (measured in) | in-situ mean \\|error\\| / p90 (points) | at the node mean \\|error\\| / p90 (points) | from send mean \\|error\\| / p90 | in-situ with the call SCV mean \\|error\\| / p90 (points) | in-situ per window mean \\|error\\| / p90 (points) | in-situ at the node mean \\|error\\| / p90 (points) | in-situ at the node with both SCVs mean \\|error\\| / p90 (points) | from the second profile: mean \\|error\\| / p90 / p95 (points) | from the calls served before (SERF online): mean \\|error\\| / p90 / p95 (points) | at the service level of the last point served: mean \\|error\\| / p90 / p95 (points) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    let all: Vec<&SerfPoint> = results.iter().flat_map(|r| r.points.iter()).collect();
    for r in results {
        let (mean, p90, p95) = error_summary(r.points.iter().map(SerfPoint::error));
        let max = r.points.iter().map(|p| p.error().abs()).fold(0.0, f64::max);
        let (b2b_mean, b2b_p90, _) =
            error_summary(r.points.iter().map(SerfPoint::back_to_back_error));
        let same = r.best.iter().filter(|b| b.predicted == b.measured).count();
        let close = r.best.iter().filter(|b| b.acceptable()).count() - same;
        let errors = |of: fn(&SerfPoint) -> Option<f64>| -> Vec<f64> {
            r.points.iter().filter_map(of).collect()
        };
        let in_situ = errors(SerfPoint::in_situ_error);
        let (in_situ_mean, in_situ_p90, _) = error_summary(in_situ.iter().copied());
        let at_node = errors(SerfPoint::node_error);
        let (node_mean, node_p90, _) = error_summary(at_node.iter().copied());
        let (sent_mean, sent_p90, _) =
            error_summary(r.points.iter().map(SerfPoint::from_send_error));
        let with_scv = errors(SerfPoint::in_situ_scv_error);
        let (scv_mean, scv_p90, _) = error_summary(with_scv.iter().copied());
        let windowed = errors(SerfPoint::windowed_in_situ_error);
        let (windowed_mean, windowed_p90, _) = error_summary(windowed.iter().copied());
        let node_in_situ = errors(SerfPoint::node_in_situ_error);
        let (node_in_situ_mean, node_in_situ_p90, _) = error_summary(node_in_situ.iter().copied());
        let node_spread = errors(SerfPoint::node_in_situ_spread_error);
        let (node_spread_mean, node_spread_p90, _) = error_summary(node_spread.iter().copied());
        let second = errors(SerfPoint::second_error);
        let online = summary_cell(&errors(SerfPoint::online_error));
        let carried = summary_cell(&errors(SerfPoint::carried_error));
        s.push_str(&format!(
            "| {} | {} | {:.1} % | {:.1} % | {:.1} % | {:.1} % | {:.1} % / {:.1} % | {same} / {close} / {} | {:.0} | {:.2} | {} | {:.1} % / {:.1} % ({}) | {:.1} % / {:.1} % ({}) | {:.1} % / {:.1} % | {:.1} % / {:.1} % ({}) | {:.1} % / {:.1} % ({}) | {:.1} % / {:.1} % ({}) | {:.1} % / {:.1} % ({}) | {} | {online} | {carried} |\n",
            r.model,
            r.points.len(),
            mean * 100.0,
            p90 * 100.0,
            p95 * 100.0,
            max * 100.0,
            b2b_mean * 100.0,
            b2b_p90 * 100.0,
            r.best.len() - same - close,
            r.load_seconds,
            r.profile.wall_s.unwrap_or(0.0),
            path_cell(&r.profile),
            in_situ_mean * 100.0,
            in_situ_p90 * 100.0,
            in_situ.len(),
            node_mean * 100.0,
            node_p90 * 100.0,
            at_node.len(),
            sent_mean * 100.0,
            sent_p90 * 100.0,
            scv_mean * 100.0,
            scv_p90 * 100.0,
            with_scv.len(),
            windowed_mean * 100.0,
            windowed_p90 * 100.0,
            windowed.len(),
            node_in_situ_mean * 100.0,
            node_in_situ_p90 * 100.0,
            node_in_situ.len(),
            node_spread_mean * 100.0,
            node_spread_p90 * 100.0,
            node_spread.len(),
            summary_cell(&second)
        ));
    }
    if results.len() > 1 {
        let (mean, p90, p95) = error_summary(all.iter().map(|p| p.error()));
        s.push_str(&format!(
            "| **all** | {} | **{:.1} %** | **{:.1} %** | **{:.1} %** | | | | | | | | | | | | | | | | |\n",
            all.len(),
            mean * 100.0,
            p90 * 100.0,
            p95 * 100.0
        ));
    }
    s.push_str("| paper (Fig. 11) | | ≤ 4 % | < 10 % | < 12 % | | | always | | | | | | | | | | | ≤ 4 % / < 10 % / < 12 % | ≤ 4 % / < 10 % / < 12 % | ≤ 4 % / < 10 % / < 12 % |\n");
    s.push_str("\nMachine drift: capacity c·μ_c in a second profile taken after the load runs, relative to the one the predictions use:\n\n| model | config | drift |\n|---|---|---|\n");
    push_rows(&mut s, results, SerfModelResult::drift, |(config, d)| {
        format!("{config} | {:+.1} %", d * 100.0)
    });
    if let Some((kind, _)) = results.iter().find_map(|r| r.second_profiles.as_ref()) {
        s.push_str(&format!(
            "\nThe same in the second profile ({}):\n\n| model | config | drift |\n|---|---|---|\n",
            kind.describe()
        ));
        push_rows(
            &mut s,
            results,
            SerfModelResult::second_profile_drift,
            |(config, d)| format!("{config} | {:+.1} %", d * 100.0),
        );
    }
    s.push_str("\n| model | k | λ (1/s) | predicted best | measured best | measured latency of predicted / best | ok |\n|---|---|---|---|---|---|---|\n");
    push_rows(
        &mut s,
        results,
        |r| r.best.iter(),
        |b| {
            format!(
                "{} | {:.1} | {} | {} | {:.3} | {}",
                b.level,
                b.lambda,
                b.predicted,
                b.measured,
                b.ratio,
                if b.predicted == b.measured {
                    "same"
                } else if b.acceptable() {
                    "within 5 %"
                } else {
                    "no"
                }
            )
        },
    );
    s
}

/// A causal prediction's cell: `ms, error`, or "unstable" where the rates could not keep up.
fn causal_cell(predicted_ms: Option<f64>, error: Option<f64>) -> String {
    predicted_ms.zip(error).map_or_else(
        || "unstable".to_string(),
        |(m, e)| format!("{m:.3}, {:+.1} %", e * 100.0),
    )
}

/// A summary cell of `errors`: `mean / p90 / p95 (points)` of their absolute values, "–" if none.
fn summary_cell(errors: &[f64]) -> String {
    if errors.is_empty() {
        return "–".to_string();
    }
    let (mean, p90, p95) = error_summary(errors.iter().copied());
    format!(
        "{:.1} % / {:.1} % / {:.1} % ({})",
        mean * 100.0,
        p90 * 100.0,
        p95 * 100.0,
        errors.len()
    )
}

/// Appends one Markdown table row per item `items` yields for each model's results: the model's
/// name, then `row`'s cells (already joined by ` | `).
fn push_rows<'a, T, I>(
    s: &mut String,
    results: &'a [SerfModelResult],
    items: impl Fn(&'a SerfModelResult) -> I,
    row: impl Fn(T) -> String,
) where
    I: IntoIterator<Item = T>,
{
    for r in results {
        for item in items(r) {
            s.push_str(&format!("| {} | {} |\n", r.model, row(item)));
        }
    }
}

/// Median of the per-point `|error|` of `results` (for quoting one figure).
pub fn median_abs_error(results: &[SerfModelResult]) -> f64 {
    median(
        results
            .iter()
            .flat_map(|r| r.points.iter().map(|p| p.error().abs()))
            .collect(),
    )
}

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
];

/// Predicted (line) and measured (dots) mean latency against load, one colour per configuration,
/// one panel per model.
///
/// # Errors
/// When the image cannot be drawn or written.
pub fn plot_serf(results: &[SerfModelResult], path: &Path) -> Result<()> {
    let e = |e: &dyn std::fmt::Display| anyhow!("{e}");
    let root =
        BitMapBackend::new(path, (640 * results.len().max(1) as u32, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let panels = root.split_evenly((1, results.len().max(1)));
    for (r, area) in results.iter().zip(&panels) {
        let right = r.points.iter().map(|p| p.lambda).fold(1.0, f64::max) * 1.05;
        let top = r
            .points
            .iter()
            .map(|p| p.predicted_ms.max(p.measured_ms))
            .fold(1.0, f64::max)
            * 1.1;
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("{}: mean latency, SERF prediction vs measured", r.model),
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..right, 0.0..top)
            .map_err(|x| e(&x))?;
        chart
            .configure_mesh()
            .x_desc("arrival rate λ (requests/s)")
            .y_desc("ms")
            .light_line_style(WHITE)
            .draw()
            .map_err(|x| e(&x))?;
        let mut configs: Vec<Config> = r.points.iter().map(|p| p.config).collect();
        configs.dedup();
        for (i, config) in configs.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let mine: Vec<&SerfPoint> = r.points.iter().filter(|p| p.config == *config).collect();
            chart
                .draw_series(LineSeries::new(
                    mine.iter().map(|p| (p.lambda, p.predicted_ms)),
                    color.stroke_width(2),
                ))
                .map_err(|x| e(&x))?
                .label(format!("{config}: predicted (line), measured (dots)"))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                });
            chart
                .draw_series(
                    mine.iter()
                        .map(|p| Circle::new((p.lambda, p.measured_ms), 4, color.filled())),
                )
                .map_err(|x| e(&x))?;
        }
        super::plot::draw_legend(&mut chart)?;
    }
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(predicted_ms: f64, measured_ms: f64) -> SerfPoint {
        SerfPoint {
            config: Config::new(1, 1),
            level: 1,
            lambda: 1.0,
            rho: 0.1,
            predicted_ms,
            back_to_back_ms: predicted_ms,
            measured_ms,
            send_late_ms: 0.0,
            requests: 1,
            predicted_service_ms: 1.0,
            measured_service_ms: None,
            in_situ_ms: None,
            measured_service_scv: None,
            in_situ_scv_ms: None,
            second_predicted_ms: None,
            online_predicted_ms: None,
            carried_predicted_ms: None,
            node_arrival_scv: None,
            in_situ_node_spread_ms: None,
            window_service_cv: None,
            windowed_in_situ_ms: None,
            predicted_node_ms: predicted_ms,
            measured_node_ms: None,
        }
    }

    #[test]
    fn the_latency_splits_into_the_node_and_the_path_outside_it() {
        // Predicted 12 ms of which 10 at the node; measured 15 ms of which 11 at the node.
        let p = SerfPoint {
            predicted_node_ms: 10.0,
            measured_node_ms: Some(11.0),
            ..point(12.0, 15.0)
        };
        assert!((p.node_error().unwrap() + 1.0 / 11.0).abs() < 1e-12);
        let (predicted, measured) = p.outside_the_node_ms().unwrap();
        assert!((predicted - 2.0).abs() < 1e-12 && (measured - 4.0).abs() < 1e-12);
        // Sent 3 ms late on average: 12 ms from the actual send, which the prediction matches.
        let late = SerfPoint {
            send_late_ms: 3.0,
            ..point(12.0, 15.0)
        };
        assert!(late.from_send_error().abs() < 1e-12);
        // Nothing measured at the node: neither split exists.
        let none = point(12.0, 15.0);
        assert_eq!(
            (none.node_error(), none.outside_the_node_ms()),
            (None, None)
        );
    }

    #[test]
    fn each_call_counts_for_the_calls_that_ran_with_it_on_average() {
        use std::time::{Duration, Instant};
        use weir_operators::model::CallRecord;
        let base = Instant::now();
        let ms = Duration::from_millis;
        let call = |start: u64, end: u64| CallRecord {
            ended_at: base + ms(end),
            duration: ms(end - start),
            idle_before: None,
        };
        let calls = [
            call(0, 10),   // beside the next one all along: 2
            call(0, 10),   // 2
            call(20, 30),  // alone: 1
            call(40, 50),  // half its span beside the next: 1.5, rounds to 2
            call(45, 50),  // all along beside the one before: 2
            call(60, 100), // a tenth of its span beside the next: 1.1, rounds to 1
            call(96, 100), // 2
        ];
        assert_eq!(calls_running_with(&calls), vec![2, 2, 1, 2, 2, 1, 2]);
        assert!(calls_running_with(&[]).is_empty());
        // A zero-length call counts for one, and divides nothing by zero.
        assert_eq!(calls_running_with(&[call(5, 5)]), vec![1]);
    }

    #[test]
    fn error_summary_mean_and_quantiles() {
        // |errors| 1 %, 2 %, …, 10 %.
        let points: Vec<SerfPoint> = (1..=10).map(|i| point(100.0 + i as f64, 100.0)).collect();
        let (mean, p90, p95) = error_summary(points.iter().map(SerfPoint::error));
        assert!((mean - 0.055).abs() < 1e-12);
        assert!((p90 - 0.09).abs() < 1e-12);
        assert!((p95 - 0.10).abs() < 1e-12);
        assert_eq!(error_summary(std::iter::empty()), (0.0, 0.0, 0.0));
        assert!((point(90.0, 100.0).error() + 0.1).abs() < 1e-12);
        assert_eq!(point(90.0, 100.0).in_situ_error(), None);
        let p = SerfPoint {
            in_situ_ms: Some(110.0),
            ..point(90.0, 100.0)
        };
        assert!((p.in_situ_error().unwrap() - 0.1).abs() < 1e-12);
    }

    #[test]
    fn in_situ_prediction_rescales_the_service_level() {
        // M/D/1 at 5 ms, λ = 100/s: measured calls take 8 ms instead, so the in-situ prediction is the
        // same model at 8 ms (ρ = 0.8), and at 12 ms it is unstable.
        let mu = [200.0];
        let at5 = predict(100.0, &mu).unwrap();
        assert!((at5.service - 0.005).abs() < 1e-12);
        let scaled = in_situ_latency(100.0, &mu, at5.service, 0.008).unwrap();
        let direct = predict(100.0, &[125.0]).unwrap().latency;
        assert!((scaled - direct).abs() < 1e-12, "{scaled} vs {direct}");
        assert!(scaled > at5.latency);
        assert_eq!(in_situ_latency(100.0, &mu, at5.service, 0.012), None);
        assert_eq!(in_situ_latency(100.0, &mu, at5.service, 0.0), None);
        // A two-slot profile keeps its interference shape: both rates scale by the same factor.
        let two = [140.0, 130.0];
        let p = predict(100.0, &two).unwrap();
        let same = in_situ_latency(100.0, &two, p.service, p.service).unwrap();
        assert!((same - p.latency).abs() < 1e-12);
    }

    /// The calls' spread: SCV from the durations, and the in-situ prediction with it — at SCV 0
    /// the plain in-situ one, at SCV 1 on one slot M/M/1 at the measured service time.
    #[test]
    fn the_in_situ_prediction_with_the_calls_scv_spans_deterministic_to_exponential() {
        use std::time::Duration;
        let ms = |v: &[u64]| {
            v.iter()
                .map(|&m| Duration::from_millis(m))
                .collect::<Vec<_>>()
        };
        assert_eq!(scv(&ms(&[5])), None);
        assert_eq!(scv(&ms(&[4, 4, 4])), Some(0.0));
        // Mean 4 ms, variance 4 ms²: SCV 0.25.
        assert!((scv(&ms(&[2, 6])).unwrap() - 0.25).abs() < 1e-12);

        let mu = [200.0];
        let at5 = predict(100.0, &mu).unwrap();
        let plain = in_situ_latency(100.0, &mu, at5.service, 0.008).unwrap();
        let with = |measured: f64, spreads: (f64, f64)| {
            in_situ_latency_with_scvs(100.0, &mu, at5.service, measured, spreads)
        };
        assert!((with(0.008, (1.0, 0.0)).unwrap() - plain).abs() < 1e-12);
        // M/M/1 at 8 ms, λ = 100/s: W = S/(1 − ρ) = 40 ms.
        let exponential = with(0.008, (1.0, 1.0)).unwrap();
        assert!((exponential - 0.040).abs() < 1e-9, "{exponential}");
        // Arrivals twice as bursty as Poisson, deterministic calls: the M/M/1 wait again (Kingman).
        assert!((with(0.008, (2.0, 0.0)).unwrap() - exponential).abs() < 1e-9);
        assert_eq!(with(0.012, (1.0, 0.5)), None);

        // Arrival gaps 1, 1, 1 ms: regular, SCV 0; gaps 1 and 3 ms: SCV 0.25.
        let start = std::time::Instant::now();
        let at = |ms: &[u64]| {
            ms.iter()
                .map(|&m| start + Duration::from_millis(m))
                .collect::<Vec<_>>()
        };
        assert_eq!(arrival_scv(&at(&[0, 1, 2, 3])), Some(0.0));
        assert!((arrival_scv(&at(&[0, 1, 4])).unwrap() - 0.25).abs() < 1e-12);
        assert_eq!(arrival_scv(&at(&[0, 1])), None);
    }

    /// The windows: calls cut by their end times; the windows' spread of service level; and the
    /// per-window prediction — one steady window is the plain in-situ one, and a slow stretch plus
    /// a fast one of the same mean predict more than their mean does (latency is convex).
    #[test]
    fn the_windowed_in_situ_prediction_averages_the_service_levels_a_point_went_through() {
        use std::time::{Duration, Instant};
        use weir_operators::model::CallRecord;
        let start = Instant::now();
        let call = |at_ms: u64, took_ms: u64| CallRecord {
            ended_at: start + Duration::from_millis(at_ms),
            duration: Duration::from_millis(took_ms),
            idle_before: None,
        };
        // Calls at 0, 100, 600 and 1700 ms: windows [0, 500) with two, [500, 1000) with one,
        // nothing in [1000, 1500), [1500, 2000) with one — empty windows are left out.
        let calls = [call(0, 4), call(100, 6), call(600, 8), call(1700, 2)];
        let windows = windowed_service(&calls, Duration::from_millis(500));
        let expected = [(2, 0.005), (1, 0.008), (1, 0.002)];
        assert_eq!(windows.len(), expected.len(), "{windows:?}");
        for ((n, m), (en, em)) in windows.iter().zip(expected) {
            assert_eq!(*n, en);
            assert!((m - em).abs() < 1e-12, "{windows:?}");
        }
        assert!(windowed_service(&[], Duration::from_millis(500)).is_empty());

        assert_eq!(window_cv(&[(3, 0.004)]), None);
        assert_eq!(window_cv(&[(3, 0.004), (5, 0.004)]), Some(0.0));
        // Equal weights at 3 and 5 ms: mean 4, standard deviation 1 → CV 0.25.
        assert!((window_cv(&[(2, 0.003), (2, 0.005)]).unwrap() - 0.25).abs() < 1e-12);

        let mu = [200.0];
        let service = predict(100.0, &mu).unwrap().service;
        let steady = windowed_in_situ_latency(100.0, &mu, service, &[(10, 0.006)]).unwrap();
        let plain = in_situ_latency(100.0, &mu, service, 0.006).unwrap();
        assert!((steady - plain).abs() < 1e-12);
        // 4 and 8 ms half the time each: the mean of M/D/1 at ρ 0.4 and 0.8, more than at 6 ms.
        let moving =
            windowed_in_situ_latency(100.0, &mu, service, &[(10, 0.004), (10, 0.008)]).unwrap();
        let halves = (in_situ_latency(100.0, &mu, service, 0.004).unwrap()
            + in_situ_latency(100.0, &mu, service, 0.008).unwrap())
            / 2.0;
        assert!((moving - halves).abs() < 1e-12);
        assert!(moving > plain * 1.1, "{moving} vs {plain}");
        // A stretch too slow to keep up has no quasi-static reading.
        assert_eq!(
            windowed_in_situ_latency(100.0, &mu, service, &[(10, 0.004), (10, 0.011)]),
            None
        );
        assert_eq!(windowed_in_situ_latency(100.0, &mu, service, &[]), None);
    }

    /// The spread second profile: at least five rounds, at least two requests a round, the
    /// rounds' gaps adding up to the span asked for; the one before each configuration is the
    /// first's options, quiet.
    #[test]
    fn the_second_profiles_take_the_first_ones_options_with_their_own_rounds() {
        use std::time::Duration;
        let first = ProfileOptions {
            samples: 10,
            rounds: 3,
            ..ProfileOptions::default()
        };
        let spread = SecondProfile::Spread {
            over: Duration::from_secs(60),
        }
        .options(&first);
        assert_eq!((spread.rounds, spread.samples), (5, 10));
        assert_eq!(spread.round_gap, Duration::from_secs(15));
        assert!(!spread.progress);
        let many = SecondProfile::Spread {
            over: Duration::from_secs(70),
        }
        .options(&ProfileOptions {
            samples: 10,
            rounds: 8,
            ..first
        });
        assert_eq!((many.rounds, many.samples), (8, 16));
        assert_eq!(many.round_gap, Duration::from_secs(10));
        let again = SecondProfile::BeforeEachConfiguration.options(&first);
        assert_eq!(
            again,
            ProfileOptions {
                progress: false,
                ..first
            }
        );
        let unqueued = SecondProfile::WithoutQueue.options(&first);
        assert_eq!(
            unqueued,
            ProfileOptions {
                without_queue: true,
                ..again
            }
        );
    }

    #[test]
    fn requests_grow_with_load_within_bounds() {
        let config = SerfBenchConfig {
            models: vec![],
            requests: 2000,
            min_requests: 200,
            point_seconds: 5.0,
            loads: 10,
            headroom: 0.9,
            profile: ProfileOptions::default(),
            second_profile: None,
        };
        assert_eq!(requests_at(&config, 10, 1000.0), 2000);
        assert_eq!(requests_at(&config, 5, 1000.0), 1000);
        assert_eq!(requests_at(&config, 1, 1000.0), 200);
        // Slow model: capped by time, floored by min_requests.
        assert_eq!(requests_at(&config, 10, 30.0), 200);
        assert_eq!(requests_at(&config, 10, 100.0), 500);
    }

    #[test]
    fn best_at_load_tolerates_five_percent() {
        let b = BestAtLoad {
            level: 1,
            lambda: 1.0,
            predicted: Config::new(1, 2),
            measured: Config::new(2, 1),
            ratio: 1.04,
        };
        assert!(b.acceptable());
        assert!(!BestAtLoad { ratio: 1.2, ..b }.acceptable());
    }
}
