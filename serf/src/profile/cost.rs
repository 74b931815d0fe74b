//! Profiling cost of SERF's plan against exhaustive profiling (paper Table II).

use super::Profile;
use serde::Serialize;

/// Profiling cost of SERF's plan against exhaustive profiling (Table II).
///
/// Both sides are costed the way Table II is: requests × mean service time, run back to back. SERF runs one
/// experiment per tuple and round (plus re-measurements) with the samples actually taken ([`Profile::effort`]
/// when recorded, else the kept tuples' samples); exhaustive profiling runs every configuration at
/// every load level with `requests_per_experiment` requests (the paper: ≥ 5000), each costed at the
/// configuration's full-concurrency service time `1/μ_c`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ProfilingCost {
    /// SERF experiments (one per tuple and round, plus re-measurements).
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
    let (serf_experiments, serf_requests, serf_seconds) = match profile.effort {
        Some(e) => (e.experiments, e.requests, e.service_s),
        None => (
            tuples.clone().count(),
            tuples.clone().map(|t| t.samples).sum(),
            tuples
                .map(|t| t.samples as f64 * t.mean_service_s)
                .sum::<f64>(),
        ),
    };
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
    use crate::profile::{build_profile, plan, BuildOptions};

    #[test]
    fn profiling_cost_vs_exhaustive() {
        // Table II accounting on 8 cores (20 configurations, the CIFAR-10 setting).
        let p = build_profile(8, &[1], BuildOptions::default(), |t, n| {
            // 4 ms alone on one thread, 10% slower per extra request, 1.7× per extra thread.
            let s = 0.004 * (1.0 + 0.1 * (t.concurrency - 1) as f64)
                / (1.0 + 0.7 * (t.threads - 1) as f64);
            Ok::<_, std::io::Error>(vec![s; n])
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
}
