//! The profile of one model node: the measured mean service time (and SCV) of every parallelism degree
//! tuple `(i, C_inter, t)` — `i` requests running at once, each with `t` intra-op threads (paper §IV-B) —
//! its file format, the list of tuples to measure, the loop that measures them
//! through a caller-supplied closure, and the profiling-cost accounting against exhaustive profiling
//! (Table II).
//!
//! This module does not run models: the caller (weir's `profile` command, over ONNX Runtime) measures. A
//! tuple `(i, C_inter, t)` with `i ≤ c` is itself a configuration, so a configuration `(c, C_inter, t)` reads
//! its `μ_1..μ_c` from the series of `(C_inter, t)`; the number of experiments equals the number of
//! configurations and does not grow with the number of load levels.
//!
//! # File format (JSON, `*.serf.json`)
//!
//! JSON was chosen over YAML because the file is machine-written, and `serde_json` writes floats in their
//! shortest round-trip form, so saving the same profile twice gives the same bytes. Unknown fields are
//! rejected. Times are in seconds.
//!
//! ```json
//! {
//!   "format": "weir-serf-profile/1",
//!   "cores": 2,
//!   "label": "squeezenet",
//!   "wall_s": 1.9,
//!   "spinning": true,
//!   "series": [
//!     { "inter_node": 1, "threads": 1, "tuples": [
//!         { "concurrency": 1, "mean_service_s": 0.00317, "scv": 0.02, "samples": 10 },
//!         { "concurrency": 2, "mean_service_s": 0.00317, "scv": 0.03, "samples": 10 } ] },
//!     { "inter_node": 1, "threads": 2, "tuples": [
//!         { "concurrency": 1, "mean_service_s": 0.0017, "scv": 0.01, "samples": 10 } ] }
//!   ]
//! }
//! ```
//! `label`, `wall_s` (measured wall time of the whole profiling run), `measured_in` (`"graph"`:
//! the node's executor inside a running one-node graph, fed through the serving path, weir's
//! default; `"sessions"`: bare sessions back to back, the paper's way), `path_s` (the serving
//! path's time per request outside the model call, seconds, added to every predicted latency),
//! `spinning` (whether the
//! runtime's intra-op threads spun while idle during the measurement; absent when unknown) and
//! `effort` (what measuring took over every round and re-measurement: `{"experiments": 9,
//! "requests": 120, "service_s": 0.7}`; without it the cost is reckoned from the kept tuples) are
//! optional. `spinning` matters for `t > 1`: without it every parallel section of a call wakes
//! sleeping threads, which can cost as much as the parallelism gains when requests arrive with
//! gaps, so a profile only describes a node that runs with the same setting. `after_idle` (absent when not measured) holds, per thread count
//! `t`, the mean service time of requests that started alone after the node had been idle for a
//! few gaps: `[{"threads": 2, "points": [{"gap_s": 0.002, "mean_service_s": 0.0048, "samples": 10},
//! …]}]`, gaps ascending; see [`crate::idle`] for what the prediction does with it. Measured in a
//! graph, a point also holds `mean_path_s`, the serving path's time outside the call for those
//! requests ([`Profile::path_after`]). In each series,
//! `tuples[k]` has `concurrency = k + 1` and `concurrency · threads ≤ cores`.

use crate::config::Config;
use crate::idle::{AfterIdle, IdleCurve, IdlePoint};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The `format` value this version reads and writes.
pub const FORMAT: &str = "weir-serf-profile/1";

/// SCV above which a tuple counts as non-homogeneous (the paper saw 0.03–0.09).
pub const HOMOGENEOUS_SCV: f64 = 0.1;

/// Errors reading, writing or checking a profile.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The file could not be read or written.
    #[error("profile {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The text is not valid profile JSON.
    #[error("profile is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// The `format` field names another format or version.
    #[error("profile format `{found}` is not `{FORMAT}`")]
    Format {
        /// The value found.
        found: String,
    },
    /// The content breaks a rule of the format.
    #[error("invalid profile: {0}")]
    Invalid(String),
}

/// Measured service statistics of one tuple.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TupleStats {
    /// Requests running at once, `i`.
    pub concurrency: usize,
    /// Mean service time of one request, seconds (`1/μ_i`).
    pub mean_service_s: f64,
    /// Squared coefficient of variation of the service time.
    pub scv: f64,
    /// Requests the mean is over.
    pub samples: usize,
}

impl TupleStats {
    /// Per-request service rate `μ_i` (requests per second).
    pub fn rate(&self) -> f64 {
        1.0 / self.mean_service_s
    }

    /// Whether the service times were homogeneous enough for the M/D model (`scv ≤ 0.1`).
    pub fn is_homogeneous(&self) -> bool {
        self.scv <= HOMOGENEOUS_SCV
    }
}

/// The tuples `(1..=n, C_inter, t)` of one per-request parallelism `(C_inter, t)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Series {
    /// Inter-node parallelism `C_inter` (1 in weir).
    pub inter_node: usize,
    /// Intra-op threads per request `t`.
    pub threads: usize,
    /// `tuples[k]` is concurrency `k + 1`.
    pub tuples: Vec<TupleStats>,
}

/// What measuring a profile took: every call of the measuring closure, over all rounds and
/// re-measurements (the tuples keep only the round each one's rates come from).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeasurementEffort {
    /// Measurements (one per tuple and round, plus re-measurements).
    pub experiments: usize,
    /// Requests measured.
    pub requests: usize,
    /// Their service time summed, seconds.
    pub service_s: f64,
}

/// Where a profile's service times were measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MeasuredIn {
    /// Bare runtime sessions called back to back, one stream per session (the paper's profile).
    Sessions,
    /// The node's executor inside a running one-node graph, requests fed through the serving path.
    Graph,
}

/// The measured profile of one model node on one machine type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Always [`FORMAT`].
    pub format: String,
    /// Cores `F` of the machine; every tuple has `concurrency · threads ≤ cores`.
    pub cores: usize,
    /// Free text naming what was profiled (model, node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Measured wall time of the whole profiling run, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_s: Option<f64>,
    /// Whether the runtime's intra-op threads spun while idle during the measurement, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spinning: Option<bool>,
    /// What measuring took, over every round and re-measurement, when recorded
    /// ([`build_profile`] records it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<MeasurementEffort>,
    /// Where the service times were measured, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_in: Option<MeasuredIn>,
    /// The serving path's own time per request outside the model call (admission, dataflow,
    /// answer), seconds, when measured: a request's latency is this plus its time in the queueing
    /// model ([`Profile::predicted_latency`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_s: Option<f64>,
    /// One series per `(C_inter, t)`, sorted by `(inter_node, threads)`.
    pub series: Vec<Series>,
    /// Service after idle gaps, per thread count, when measured ([`crate::idle`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after_idle: Vec<AfterIdle>,
}

impl Profile {
    /// A profile from known rates (synthetic profiles, tests, or rates measured elsewhere): one entry per
    /// `(threads, [μ_1, …, μ_n])` on a single machine, SCV 0 and `samples` 10.
    ///
    /// # Errors
    /// [`ProfileError::Invalid`] if the result breaks a format rule (see [`Profile::validate`]).
    pub fn from_rates(cores: usize, rates: &[(usize, Vec<f64>)]) -> Result<Self, ProfileError> {
        let series = rates
            .iter()
            .map(|(threads, mu)| Series {
                inter_node: 1,
                threads: *threads,
                tuples: mu
                    .iter()
                    .enumerate()
                    .map(|(k, m)| TupleStats {
                        concurrency: k + 1,
                        mean_service_s: 1.0 / m,
                        scv: 0.0,
                        samples: 10,
                    })
                    .collect(),
            })
            .collect();
        Self::new(cores, series)
    }

    /// A profile from measured series (sorted here); checked with [`Profile::validate`].
    ///
    /// # Errors
    /// [`ProfileError::Invalid`] if a format rule is broken.
    pub fn new(cores: usize, mut series: Vec<Series>) -> Result<Self, ProfileError> {
        series.sort_by_key(|s| (s.inter_node, s.threads));
        let p = Self {
            format: FORMAT.to_string(),
            cores,
            label: None,
            wall_s: None,
            spinning: None,
            effort: None,
            measured_in: None,
            path_s: None,
            series,
            after_idle: Vec::new(),
        };
        p.validate()?;
        Ok(p)
    }

    /// Checks every rule of the format (module docs).
    ///
    /// # Errors
    /// [`ProfileError::Format`] for another format, [`ProfileError::Invalid`] naming the first broken rule.
    pub fn validate(&self) -> Result<(), ProfileError> {
        if self.format != FORMAT {
            return Err(ProfileError::Format {
                found: self.format.clone(),
            });
        }
        let bad = |m: String| Err(ProfileError::Invalid(m));
        if self.cores == 0 {
            return bad("cores must be at least 1".into());
        }
        for (n, s) in self.series.iter().enumerate() {
            let at = format!(
                "series[{n}] (inter_node {}, threads {})",
                s.inter_node, s.threads
            );
            if s.inter_node == 0 || s.threads == 0 {
                return bad(format!("{at}: inter_node and threads must be at least 1"));
            }
            if s.tuples.is_empty() {
                return bad(format!("{at}: no tuples"));
            }
            if n > 0
                && (self.series[n - 1].inter_node, self.series[n - 1].threads)
                    >= (s.inter_node, s.threads)
            {
                return bad(format!(
                    "{at}: series must be sorted by (inter_node, threads) without duplicates"
                ));
            }
            for (k, t) in s.tuples.iter().enumerate() {
                if t.concurrency != k + 1 {
                    return bad(format!(
                        "{at}: tuples[{k}] has concurrency {}, expected {}",
                        t.concurrency,
                        k + 1
                    ));
                }
                if t.concurrency * s.threads > self.cores {
                    return bad(format!(
                        "{at}: concurrency {} × threads exceeds {} cores",
                        t.concurrency, self.cores
                    ));
                }
                if !(t.mean_service_s.is_finite() && t.mean_service_s > 0.0) {
                    return bad(format!(
                        "{at}: tuples[{k}].mean_service_s must be finite and positive"
                    ));
                }
                if !(t.scv.is_finite() && t.scv >= 0.0) || t.samples == 0 {
                    return bad(format!(
                        "{at}: tuples[{k}] needs a finite scv ≥ 0 and samples ≥ 1"
                    ));
                }
            }
        }
        if let Some(w) = self.wall_s {
            if !(w.is_finite() && w >= 0.0) {
                return bad("wall_s must be finite and non-negative".into());
            }
        }
        if let Some(p) = self.path_s {
            if !(p.is_finite() && p >= 0.0) {
                return bad("path_s must be finite and non-negative".into());
            }
        }
        for (n, a) in self.after_idle.iter().enumerate() {
            let at = format!("after_idle[{n}] (threads {})", a.threads);
            if !self
                .series
                .iter()
                .any(|s| s.inter_node == 1 && s.threads == a.threads)
            {
                return bad(format!(
                    "{at}: no series with inter_node 1 and these threads"
                ));
            }
            if self.after_idle[..n].iter().any(|b| b.threads == a.threads) {
                return bad(format!("{at}: threads listed twice"));
            }
            if a.points.is_empty() {
                return bad(format!("{at}: no points"));
            }
            for (k, p) in a.points.iter().enumerate() {
                let positive = |x: f64| x.is_finite() && x > 0.0;
                if !(positive(p.gap_s) && positive(p.mean_service_s)) || p.samples == 0 {
                    return bad(format!(
                        "{at}: points[{k}] needs a finite gap_s > 0, mean_service_s > 0 and samples ≥ 1"
                    ));
                }
                if p.mean_path_s.is_some_and(|x| !(x.is_finite() && x >= 0.0)) {
                    return bad(format!(
                        "{at}: points[{k}].mean_path_s must be finite and non-negative"
                    ));
                }
                if k > 0 && a.points[k - 1].gap_s >= p.gap_s {
                    return bad(format!(
                        "{at}: points must be sorted by gap_s without duplicates"
                    ));
                }
            }
        }
        Ok(())
    }

    /// The back-to-back time of the lone tuple `(1, 1, threads)`, as measured.
    fn alone_back_to_back(&self, threads: usize) -> Option<f64> {
        self.series
            .iter()
            .find(|s| s.inter_node == 1 && s.threads == threads)?
            .tuples
            .first()
            .map(|t| t.mean_service_s)
    }

    /// The measured points after idle gaps of `threads`, empty when not measured.
    fn idle_points(&self, threads: usize) -> &[IdlePoint] {
        self.after_idle
            .iter()
            .find(|a| a.threads == threads)
            .map(|a| a.points.as_slice())
            .unwrap_or(&[])
    }

    /// Service after an idle gap for requests with `threads` intra-op threads, anchored at the
    /// back-to-back time of the tuple `(1, 1, threads)`; `None` when not measured.
    pub fn idle_curve(&self, threads: usize) -> Option<IdleCurve> {
        IdleCurve::new(self.alone_back_to_back(threads)?, self.idle_points(threads))
    }

    /// The serving path's mean time outside the call for Poisson arrivals at `lambda` per
    /// second: [`Profile::path_s`] (measured back to back) when nothing else is known; with the
    /// path times measured after idle gaps on the `(1, 1)` graph ([`IdlePoint::mean_path_s`] of
    /// `after_idle` for one thread), their curve from `path_s` at no gap, averaged over the
    /// exponential gap before an arrival ([`IdleCurve::moments_after_poisson_gap`]); 0 when the
    /// path was not measured.
    ///
    /// Why: a sparse arrival finds the serving path's threads parked (the dataflow worker, the
    /// executor's thread; their idle cores possibly halted) and waits for each to wake, which a
    /// back-to-back path measurement never sees; with the call time measured in place, that part
    /// alone put a small model's latency 15–30 % above the model at every load. The curve depends
    /// on the load only, not on the configuration, so it never changes which configuration is best.
    pub fn path_after(&self, lambda: f64) -> f64 {
        let Some(back_to_back) = self.path_s else {
            return 0.0;
        };
        let points: Vec<(f64, f64)> = self
            .idle_points(1)
            .iter()
            .filter_map(|p| p.mean_path_s.map(|x| (p.gap_s, x)))
            .collect();
        IdleCurve::from_times(back_to_back, &points)
            .map_or(back_to_back, |c| c.moments_after_poisson_gap(lambda).0)
    }

    /// The latency a request sees when the queueing model gives `model_latency_s` for its
    /// configuration at `lambda` requests per second: that plus [`Profile::path_after`].
    pub fn predicted_latency(&self, model_latency_s: f64, lambda: f64) -> f64 {
        model_latency_s + self.path_after(lambda)
    }

    /// The profiled rates `μ_1..μ_c` of `config`, or `None` if a tuple it needs was not profiled.
    pub fn mu(&self, config: Config) -> Option<Vec<f64>> {
        let s = self
            .series
            .iter()
            .find(|s| s.inter_node == config.inter_node && s.threads == config.threads)?;
        if config.concurrency == 0 || config.concurrency > s.tuples.len() {
            return None;
        }
        Some(
            s.tuples[..config.concurrency]
                .iter()
                .map(TupleStats::rate)
                .collect(),
        )
    }

    /// Every configuration this profile can predict, with its rates, in [`Config`] order.
    pub fn candidates(&self) -> Vec<(Config, Vec<f64>)> {
        let mut out: Vec<(Config, Vec<f64>)> = self
            .series
            .iter()
            .flat_map(|s| {
                (1..=s.tuples.len()).map(move |c| Config {
                    concurrency: c,
                    inter_node: s.inter_node,
                    threads: s.threads,
                })
            })
            .filter_map(|cfg| self.mu(cfg).map(|mu| (cfg, mu)))
            .collect();
        out.sort_by_key(|(c, _)| *c);
        out
    }

    /// Tuples whose SCV exceeds [`HOMOGENEOUS_SCV`], as configurations `(i, C_inter, t)`.
    pub fn non_homogeneous(&self) -> Vec<Config> {
        self.series
            .iter()
            .flat_map(|s| {
                s.tuples
                    .iter()
                    .filter(|t| !t.is_homogeneous())
                    .map(move |t| Config {
                        concurrency: t.concurrency,
                        inter_node: s.inter_node,
                        threads: s.threads,
                    })
            })
            .collect()
    }

    /// The profile as pretty JSON (deterministic: same profile, same bytes).
    pub fn to_json(&self) -> String {
        // Serialising plain structs of numbers and strings cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }

    /// Parses and validates profile JSON.
    ///
    /// # Errors
    /// [`ProfileError::Json`], [`ProfileError::Format`] or [`ProfileError::Invalid`].
    pub fn from_json(text: &str) -> Result<Self, ProfileError> {
        let p: Profile = serde_json::from_str(text)?;
        p.validate()?;
        Ok(p)
    }

    /// Reads and validates a profile file.
    ///
    /// # Errors
    /// [`ProfileError::Io`] and the errors of [`Profile::from_json`].
    pub fn load(path: &Path) -> Result<Self, ProfileError> {
        let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_json(&text)
    }

    /// Validates and writes the profile to `path`.
    ///
    /// # Errors
    /// [`ProfileError::Io`], or the validation errors.
    pub fn save(&self, path: &Path) -> Result<(), ProfileError> {
        self.validate()?;
        std::fs::write(path, self.to_json()).map_err(|source| ProfileError::Io {
            path: path.to_path_buf(),
            source,
        })
    }
}

mod cost;
mod measure;

pub use cost::{profiling_cost, ProfilingCost};
pub use measure::{build_profile, plan, summarise, BuildError, BuildOptions, MeasurementError};

#[cfg(test)]
mod tests;
