//! What to measure for a profile and how: the list of tuples for a core count, the summary of measured
//! service times, and [`build_profile`], which drives the caller's measuring closure (paper §IV-B).

use super::{MeasurementEffort, Profile, ProfileError, Series, TupleStats};
use crate::config::{enumerate, Config};

/// The tuples to measure for a machine with `cores` cores and the given inter-node degrees: every
/// configuration of [`enumerate`], read as a tuple `(i, C_inter, t)` (their number equals the number of
/// configurations, paper §IV-B).
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
    /// Requests for a second measurement of a tuple whose SCV exceeds [`HOMOGENEOUS_SCV`](super::HOMOGENEOUS_SCV); 0 = none.
    pub retry_samples: usize,
    /// Rounds over all tuples (1, the paper's plan): with more, each tuple's `samples` are split across the
    /// rounds, every round measures every tuple in turn, and each tuple keeps its median round (by mean
    /// service time; the faster middle one for an even count). Why: on a shared machine a second of
    /// disturbance during a back-to-back profile can slow every tuple measured in it, and a profile that
    /// ranks the best configuration last keeps SERF out of it; interleaved rounds put each tuple in
    /// several moments, and the median drops the disturbed one.
    pub rounds: usize,
    /// Idle time between two rounds (zero: back to back). Spreads the rounds over minutes on a host
    /// whose speed moves at that scale, so that the median round is a typical moment rather than
    /// whichever one the profile happened to catch; the service-time cost is unchanged, the wall
    /// time grows by `(rounds − 1) · round_gap`. It has not been shown to predict better than back to
    /// back rounds: an option, not the default.
    pub round_gap: std::time::Duration,
}

impl Default for BuildOptions {
    fn default() -> Self {
        Self {
            samples: 10,
            retry_samples: 40,
            rounds: 1,
            round_gap: std::time::Duration::ZERO,
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
/// (paper §IV-B).
///
/// `measure(tuple, samples)` must run `tuple.concurrency` request streams concurrently, each request with
/// `tuple.threads` intra-op threads, warm up (e.g. 2 requests per stream, not returned), and return the service
/// times in seconds of at least `samples` measured requests. Tuples are measured in [`Config`] order, in
/// [`BuildOptions::rounds`] rounds (each tuple keeps its median round). A kept tuple
/// whose SCV exceeds [`HOMOGENEOUS_SCV`](super::HOMOGENEOUS_SCV) is measured once more with `retry_samples` and the second result
/// kept (it stays flagged by [`Profile::non_homogeneous`] if still above). The caller sets
/// [`Profile::wall_s`] and [`Profile::label`] afterwards; [`Profile::effort`] counts every measurement.
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
    let tuples = plan(cores, inter_set);
    let rounds = options.rounds.max(1);
    let per_round = options.samples.max(1).div_ceil(rounds);
    let mut effort = MeasurementEffort {
        experiments: 0,
        requests: 0,
        service_s: 0.0,
    };
    let mut run = |tuple: Config, samples: usize| {
        let times =
            measure(tuple, samples).map_err(|source| BuildError::Measure { tuple, source })?;
        effort.experiments += 1;
        effort.requests += times.len();
        effort.service_s += times.iter().sum::<f64>();
        summarise(tuple.concurrency, &times).map_err(|source| BuildError::Samples { tuple, source })
    };
    let mut measured: Vec<Vec<TupleStats>> = vec![Vec::with_capacity(rounds); tuples.len()];
    for round in 0..rounds {
        if round > 0 && !options.round_gap.is_zero() {
            std::thread::sleep(options.round_gap);
        }
        for (tuple, stats) in tuples.iter().zip(measured.iter_mut()) {
            stats.push(run(*tuple, per_round)?);
        }
    }
    let mut series: Vec<Series> = Vec::new();
    for (tuple, mut stats) in tuples.into_iter().zip(measured) {
        stats.sort_by(|a, b| a.mean_service_s.total_cmp(&b.mean_service_s));
        let mut kept = stats.swap_remove((stats.len() - 1) / 2);
        if !kept.is_homogeneous() && options.retry_samples > 0 {
            kept = run(tuple, options.retry_samples)?;
        }
        match series
            .iter_mut()
            .find(|s| s.inter_node == tuple.inter_node && s.threads == tuple.threads)
        {
            Some(s) => s.tuples.push(kept),
            None => series.push(Series {
                inter_node: tuple.inter_node,
                threads: tuple.threads,
                tuples: vec![kept],
            }),
        }
    }
    let mut profile = Profile::new(cores, series)?;
    profile.effort = Some(effort);
    Ok(profile)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_time(tuple: Config) -> f64 {
        0.004 * (1.0 + 0.1 * (tuple.concurrency - 1) as f64)
            / (1.0 + 0.7 * (tuple.threads - 1) as f64)
    }

    #[test]
    fn build_profile_measures_every_tuple_once() {
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
    fn summarise_mean_and_scv() {
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
    fn non_homogeneous_tuples_are_remeasured_and_flagged() {
        let mut calls = 0;
        let p = build_profile(
            2,
            &[1],
            BuildOptions {
                samples: 10,
                retry_samples: 40,
                rounds: 1,
                ..BuildOptions::default()
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
        let effort = p.effort.unwrap();
        assert_eq!((effort.experiments, effort.requests), (4, 70));
    }

    #[test]
    fn rounds_interleave_the_tuples_and_each_keeps_its_median_round() {
        // A disturbance during the second round slows every tuple measured in it by 70 %; one tuple
        // measures implausibly fast in the third. The median round is the plain one for every tuple
        // (neither the slowest nor the fastest round).
        let mut order = Vec::new();
        let p = build_profile(
            2,
            &[1],
            BuildOptions {
                samples: 12,
                retry_samples: 40,
                rounds: 3,
                round_gap: std::time::Duration::from_millis(20),
            },
            |tuple, samples| {
                order.push((tuple, std::time::Instant::now()));
                let round = (order.len() - 1) / 3;
                let factor = match round {
                    1 => 1.7,
                    2 if tuple == Config::new(1, 2) => 0.5,
                    _ => 1.0,
                };
                let t = fake_time(tuple) * factor;
                Ok::<_, std::io::Error>(vec![t; samples])
            },
        )
        .unwrap();
        // Round-robin: all three tuples, three times, a round's first tuple at least the gap after
        // the previous round's last.
        let plan = plan(2, &[1]);
        let tuples: Vec<Config> = order.iter().map(|o| o.0).collect();
        assert_eq!(tuples, [plan.clone(), plan.clone(), plan].concat());
        for next_round in [3, 6] {
            let gap = order[next_round].1 - order[next_round - 1].1;
            assert!(gap >= std::time::Duration::from_millis(20), "{gap:?}");
        }
        for (c, mu) in p.candidates() {
            assert!((1.0 / mu[mu.len() - 1] - fake_time(c)).abs() < 1e-15, "{c}");
        }
        assert!(p
            .series
            .iter()
            .flat_map(|s| &s.tuples)
            .all(|t| t.samples == 4));
        // The cost counts every round, not only the kept one.
        let effort = p.effort.unwrap();
        assert_eq!((effort.experiments, effort.requests), (9, 36));
        let cost = super::super::profiling_cost(&p, 10, 5000);
        assert_eq!((cost.serf_experiments, cost.serf_requests), (9, 36));
    }
}
