//! The profile of one model node: the measured mean service time (and SCV) of every parallelism degree
//! tuple `(i, C_inter, t)` — `i` requests running at once, each with `t` intra-op threads (paper §IV-B, note
//! §2.11, requirements P1–P3) — its file format, the list of tuples to measure, the loop that measures them
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
//!   "series": [
//!     { "inter_node": 1, "threads": 1, "tuples": [
//!         { "concurrency": 1, "mean_service_s": 0.00317, "scv": 0.02, "samples": 10 },
//!         { "concurrency": 2, "mean_service_s": 0.00317, "scv": 0.03, "samples": 10 } ] },
//!     { "inter_node": 1, "threads": 2, "tuples": [
//!         { "concurrency": 1, "mean_service_s": 0.0017, "scv": 0.01, "samples": 10 } ] }
//!   ]
//! }
//! ```
//! `label` and `wall_s` (measured wall time of the whole profiling run) are optional. In each series,
//! `tuples[k]` has `concurrency = k + 1` and `concurrency · threads ≤ cores`.

use crate::config::{enumerate, Config};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The `format` value this version reads and writes.
pub const FORMAT: &str = "weir-serf-profile/1";

/// SCV above which a tuple counts as non-homogeneous (requirement P3; the paper saw 0.03–0.09).
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

    /// Whether the service times were homogeneous enough for the M/D model (`scv ≤ 0.1`, P3).
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
    /// One series per `(C_inter, t)`, sorted by `(inter_node, threads)`.
    pub series: Vec<Series>,
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
            series,
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
        Ok(())
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

    /// Tuples whose SCV exceeds [`HOMOGENEOUS_SCV`] (requirement P3), as configurations `(i, C_inter, t)`.
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

/// The tuples to measure for a machine with `cores` cores and the given inter-node degrees: every
/// configuration of [`enumerate`], read as a tuple `(i, C_inter, t)` (their number equals the number of
/// configurations, note §2.11).
pub fn plan(cores: usize, inter_set: &[usize]) -> Vec<Config> {
    enumerate(cores, inter_set)
}

/// Why a list of service times could not be summarised.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MeasurementError {
    /// No service times.
    #[error("no service times measured")]
    Empty,
    /// A service time is not finite and positive.
    #[error("service time {0} s is not finite and positive")]
    BadTime(f64),
}

/// Mean and SCV of measured service times for one tuple.
///
/// # Errors
/// [`MeasurementError`] for an empty list or a non-positive time.
pub fn summarise(
    concurrency: usize,
    service_times_s: &[f64],
) -> Result<TupleStats, MeasurementError> {
    if service_times_s.is_empty() {
        return Err(MeasurementError::Empty);
    }
    if let Some(&t) = service_times_s
        .iter()
        .find(|t| !(t.is_finite() && **t > 0.0))
    {
        return Err(MeasurementError::BadTime(t));
    }
    let n = service_times_s.len() as f64;
    let mean = service_times_s.iter().sum::<f64>() / n;
    let var = service_times_s
        .iter()
        .map(|t| (t - mean) * (t - mean))
        .sum::<f64>()
        / n;
    Ok(TupleStats {
        concurrency,
        mean_service_s: mean,
        scv: var / (mean * mean),
        samples: service_times_s.len(),
    })
}

/// How [`build_profile`] samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BuildOptions {
    /// Requests measured per tuple (the paper: 10).
    pub samples: usize,
    /// Requests for a second measurement of a tuple whose SCV exceeds [`HOMOGENEOUS_SCV`] (P3); 0 = none.
    pub retry_samples: usize,
}

impl Default for BuildOptions {
    fn default() -> Self {
        Self {
            samples: 10,
            retry_samples: 40,
        }
    }
}

/// Errors of [`build_profile`]: the caller's measurement failed, or gave unusable times.
#[derive(Debug, thiserror::Error)]
pub enum BuildError<E: std::error::Error + 'static> {
    /// The measuring closure failed for this tuple.
    #[error("measuring tuple {tuple}: {source}")]
    Measure {
        /// Tuple `(i, C_inter, t)` being measured.
        tuple: Config,
        /// The caller's error.
        source: E,
    },
    /// The closure returned unusable service times for this tuple.
    #[error("tuple {tuple}: {source}")]
    Samples {
        /// Tuple being measured.
        tuple: Config,
        /// What was wrong.
        source: MeasurementError,
    },
    /// The assembled profile broke a format rule.
    #[error(transparent)]
    Profile(#[from] ProfileError),
}

/// Measures every tuple of [`plan`]`(cores, inter_set)` through `measure` and assembles the profile
/// (requirement P1, P3).
///
/// `measure(tuple, samples)` must run `tuple.concurrency` request streams concurrently, each request with
/// `tuple.threads` intra-op threads, warm up (e.g. 2 requests per stream, not returned), and return the service
/// times in seconds of at least `samples` measured requests. Tuples are measured in [`Config`] order. A tuple
/// whose SCV exceeds [`HOMOGENEOUS_SCV`] is measured once more with `retry_samples` and the second result
/// kept (it stays flagged by [`Profile::non_homogeneous`] if still above). The caller sets
/// [`Profile::wall_s`] and [`Profile::label`] afterwards.
///
/// # Errors
/// [`BuildError::Measure`] with the caller's error, [`BuildError::Samples`] for unusable times.
///
/// # Examples
/// ```
/// use weir_serf::profile::{build_profile, BuildOptions};
/// // A fake machine: 10 ms per request alone, 5% slower per extra concurrent request, t threads speed 1.6×.
/// let profile = build_profile(2, &[1], BuildOptions::default(), |tuple, samples| {
///     let s = 0.010 * (1.0 + 0.05 * (tuple.concurrency - 1) as f64) / (1.0 + 0.6 * (tuple.threads - 1) as f64);
///     Ok::<_, std::io::Error>(vec![s; samples])
/// })
/// .unwrap();
/// assert_eq!(profile.candidates().len(), 3);
/// ```
pub fn build_profile<E, F>(
    cores: usize,
    inter_set: &[usize],
    options: BuildOptions,
    mut measure: F,
) -> Result<Profile, BuildError<E>>
where
    E: std::error::Error + 'static,
    F: FnMut(Config, usize) -> Result<Vec<f64>, E>,
{
    let mut series: Vec<Series> = Vec::new();
    for tuple in plan(cores, inter_set) {
        let mut run = |samples: usize| {
            let times =
                measure(tuple, samples).map_err(|source| BuildError::Measure { tuple, source })?;
            summarise(tuple.concurrency, &times)
                .map_err(|source| BuildError::Samples { tuple, source })
        };
        let mut stats = run(options.samples.max(1))?;
        if !stats.is_homogeneous() && options.retry_samples > 0 {
            stats = run(options.retry_samples)?;
        }
        match series
            .iter_mut()
            .find(|s| s.inter_node == tuple.inter_node && s.threads == tuple.threads)
        {
            Some(s) => s.tuples.push(stats),
            None => series.push(Series {
                inter_node: tuple.inter_node,
                threads: tuple.threads,
                tuples: vec![stats],
            }),
        }
    }
    Ok(Profile::new(cores, series)?)
}

/// Profiling cost of SERF's plan against exhaustive profiling (Table II, requirement P2).
///
/// Both sides are costed the way Table II is: requests × mean service time, run back to back. SERF runs one
/// experiment per tuple with the samples actually taken; exhaustive profiling runs every configuration at
/// every load level with `requests_per_experiment` requests (the paper: ≥ 5000), each costed at the
/// configuration's full-concurrency service time `1/μ_c`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ProfilingCost {
    /// SERF experiments (one per tuple).
    pub serf_experiments: usize,
    /// Requests SERF measured.
    pub serf_requests: usize,
    /// SERF's cost in seconds (Σ samples × mean service time).
    pub serf_seconds: f64,
    /// Measured wall time of the profiling run ([`Profile::wall_s`]), when recorded; it includes warm-up
    /// and set-up that `serf_seconds` leaves out.
    pub serf_wall_s: Option<f64>,
    /// Exhaustive experiments (configurations × load levels).
    pub exhaustive_experiments: usize,
    /// Requests exhaustive profiling would need.
    pub exhaustive_requests: usize,
    /// Exhaustive cost in seconds.
    pub exhaustive_seconds: f64,
    /// `exhaustive_seconds / serf_seconds` (the paper: ≈ 5000).
    pub ratio: f64,
}

/// Computes [`ProfilingCost`] for `profile` with `load_levels` levels (the paper: 10) and
/// `requests_per_experiment` requests per exhaustive experiment (the paper: 5000).
pub fn profiling_cost(
    profile: &Profile,
    load_levels: usize,
    requests_per_experiment: usize,
) -> ProfilingCost {
    let tuples = profile.series.iter().flat_map(|s| s.tuples.iter());
    let serf_experiments = tuples.clone().count();
    let serf_requests = tuples.clone().map(|t| t.samples).sum();
    let serf_seconds = tuples
        .map(|t| t.samples as f64 * t.mean_service_s)
        .sum::<f64>();
    let candidates = profile.candidates();
    let exhaustive_experiments = candidates.len() * load_levels;
    let exhaustive_requests = exhaustive_experiments * requests_per_experiment;
    let per_request: f64 = candidates
        .iter()
        .map(|(_, mu)| 1.0 / mu[mu.len() - 1])
        .sum();
    let exhaustive_seconds = (load_levels * requests_per_experiment) as f64 * per_request;
    ProfilingCost {
        serf_experiments,
        serf_requests,
        serf_seconds,
        serf_wall_s: profile.wall_s,
        exhaustive_experiments,
        exhaustive_requests,
        exhaustive_seconds,
        ratio: exhaustive_seconds / serf_seconds,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_time(tuple: Config) -> f64 {
        0.004 * (1.0 + 0.1 * (tuple.concurrency - 1) as f64)
            / (1.0 + 0.7 * (tuple.threads - 1) as f64)
    }

    #[test]
    fn p1_build_profile_measures_every_tuple_once() {
        let mut calls = Vec::new();
        let p = build_profile(8, &[1], BuildOptions::default(), |tuple, samples| {
            calls.push((tuple, samples));
            Ok::<_, std::io::Error>(vec![fake_time(tuple); samples])
        })
        .unwrap();
        assert_eq!(calls.len(), 20);
        assert!(calls.iter().all(|(_, s)| *s == 10));
        assert_eq!(p.candidates().len(), 20);
        assert_eq!(p.series.len(), 8);
        let mu = p.mu(Config::new(4, 2)).unwrap();
        assert_eq!(mu.len(), 4);
        assert!((1.0 / mu[3] - fake_time(Config::new(4, 2))).abs() < 1e-15);
        assert!(p.mu(Config::new(5, 2)).is_none());
        assert!(p.non_homogeneous().is_empty());
        // Errors carry the tuple.
        let err = build_profile(2, &[1], BuildOptions::default(), |tuple, _| {
            if tuple.threads == 2 {
                Err(std::io::Error::other("ort failed"))
            } else {
                Ok(vec![0.01])
            }
        })
        .unwrap_err();
        assert!(
            err.to_string().contains("c=1 t=2") && err.to_string().contains("ort failed"),
            "{err}"
        );
        let err = build_profile(2, &[1], BuildOptions::default(), |_, _| {
            Ok::<_, std::io::Error>(vec![])
        });
        assert!(matches!(
            err,
            Err(BuildError::Samples {
                source: MeasurementError::Empty,
                ..
            })
        ));
    }

    #[test]
    fn p1_summarise_mean_and_scv() {
        let s = summarise(2, &[1.0, 3.0]).unwrap();
        assert_eq!(
            (s.mean_service_s, s.scv, s.samples, s.concurrency),
            (2.0, 0.25, 2, 2)
        );
        assert_eq!(
            summarise(1, &[1.0, -1.0]),
            Err(MeasurementError::BadTime(-1.0))
        );
    }

    #[test]
    fn p2_profiling_cost_vs_exhaustive() {
        // Table II accounting on 8 cores (20 configurations, the CIFAR-10 setting).
        let p = build_profile(8, &[1], BuildOptions::default(), |t, n| {
            Ok::<_, std::io::Error>(vec![fake_time(t); n])
        })
        .unwrap();
        let cost = profiling_cost(&p, 10, 5000);
        assert_eq!(cost.serf_experiments, 20);
        assert_eq!(cost.serf_requests, 200);
        assert_eq!(cost.exhaustive_experiments, 200);
        assert_eq!(cost.exhaustive_requests, 1_000_000);
        // Tuples = configurations and each costs its own mean: exactly 5000/10 × 10 levels.
        assert!((cost.ratio - 5000.0).abs() < 1e-6, "{}", cost.ratio);
        assert!(cost.ratio >= 100.0);
        // 40 configurations with inter-node degrees {1, 2}.
        assert_eq!(plan(8, &[1, 2]).len(), 40);
        assert_eq!(cost.serf_wall_s, None);
        // Table II, ImageNet-22K row: 80 configurations at 0.414 s per request → 27600 min vs 5.52 min.
        let mut p22k = build_profile(8, &[1, 2, 3, 4], BuildOptions::default(), |_, n| {
            Ok::<_, std::io::Error>(vec![0.414; n])
        })
        .unwrap();
        p22k.wall_s = Some(400.0);
        let cost = profiling_cost(&p22k, 10, 5000);
        assert_eq!(
            (cost.serf_experiments, cost.exhaustive_experiments),
            (80, 800)
        );
        assert!((cost.exhaustive_seconds / 60.0 - 27600.0).abs() < 1e-6);
        assert!((cost.serf_seconds / 60.0 - 5.52).abs() < 1e-9);
        assert_eq!(cost.serf_wall_s, Some(400.0));
    }

    #[test]
    fn p3_non_homogeneous_tuples_are_remeasured_and_flagged() {
        let mut calls = 0;
        let p = build_profile(
            2,
            &[1],
            BuildOptions {
                samples: 10,
                retry_samples: 40,
            },
            |t, n| {
                calls += 1;
                // (2,1) is noisy: alternating 1 and 3 ms gives SCV 0.25.
                Ok::<_, std::io::Error>(if t == Config::new(2, 1) {
                    (0..n)
                        .map(|i| if i % 2 == 0 { 0.001 } else { 0.003 })
                        .collect()
                } else {
                    vec![0.002; n]
                })
            },
        )
        .unwrap();
        assert_eq!(calls, 4);
        assert_eq!(p.non_homogeneous(), vec![Config::new(2, 1)]);
        assert_eq!(p.series[0].tuples[1].samples, 40);
    }

    #[test]
    fn profile_json_round_trip_and_rules() {
        let mut p = Profile::from_rates(2, &[(2, vec![580.0]), (1, vec![315.0, 315.0])]).unwrap();
        p.label = Some("squeezenet".into());
        p.wall_s = Some(0.5);
        assert_eq!(p.series[0].threads, 1);
        let text = p.to_json();
        let back = Profile::from_json(&text).unwrap();
        assert_eq!(back, p);
        assert_eq!(back.to_json(), text);
        let dir = std::env::temp_dir().join(format!("weir-serf-profile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("p.serf.json");
        p.save(&file).unwrap();
        assert_eq!(Profile::load(&file).unwrap(), p);
        assert!(matches!(
            Profile::load(&dir.join("missing.json")),
            Err(ProfileError::Io { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
        // Rule violations.
        assert!(matches!(
            Profile::from_json("{"),
            Err(ProfileError::Json(_))
        ));
        let wrong = text.replace(FORMAT, "weir-serf-profile/9");
        assert!(matches!(
            Profile::from_json(&wrong),
            Err(ProfileError::Format { .. })
        ));
        assert!(Profile::from_rates(2, &[(2, vec![1.0, 1.0])]).is_err()); // 2 × 2 > 2 cores
        assert!(Profile::from_rates(2, &[(1, vec![1.0]), (1, vec![1.0])]).is_err()); // duplicate
        assert!(Profile::from_rates(2, &[(1, vec![0.0])]).is_err());
        let extra = text.replacen("\"cores\"", "\"bogus\": 1, \"cores\"", 1);
        assert!(matches!(
            Profile::from_json(&extra),
            Err(ProfileError::Json(_))
        ));
    }
}
