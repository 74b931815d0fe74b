//! The SERF accuracy experiment in-process at toy size: what every point records.

use weir::profile::ProfileOptions;
use weir_bench::serf::{serf_bench, SecondProfile, SerfBenchConfig};

use crate::common::model;

/// `weir-bench serf` at toy size on the small MLP: every configuration it runs yields a point whose
/// latency splits at the model node (the node's share never above the whole, the path outside it
/// never negative); with a second profile taken before each configuration's loads, each is
/// profiled again and its point also predicted from that profile; the arrivals at the node are
/// recorded. How close the figures are is the benchmark's question.
#[test]
fn the_serf_bench_splits_each_point_at_the_model_node() {
    let config = SerfBenchConfig {
        models: vec![("mlp".into(), model("mlp_a.onnx"))],
        requests: 30,
        min_requests: 30,
        point_seconds: 1.0,
        loads: 1,
        // Low enough that every configuration is stable even where a small profile reads
        // `(2, 1)` many times faster than `(1, 1)` (at 0.2 such a profile can leave `(1, 1)`
        // unstable, without a point).
        headroom: 0.05,
        profile: ProfileOptions {
            cores: 2,
            // Three rounds of two calls, each tuple keeping its median round: one slow round does
            // not make a configuration unstable.
            samples: 6,
            retry_samples: 0,
            rounds: 3,
            warmup: 1,
            progress: false,
            ..ProfileOptions::default()
        },
        second_profile: Some(SecondProfile::BeforeEachConfiguration),
    };
    let results = serf_bench(&config).unwrap();
    let points = &results[0].points;
    assert!(!points.is_empty());
    for p in points {
        assert_eq!(p.level, 1);
        let node = p.measured_node_ms.unwrap();
        assert!(node > 0.0 && node <= p.measured_ms, "{p:?}");
        let (_, outside) = p.outside_the_node_ms().unwrap();
        assert!(outside >= 0.0, "{p:?}");
        assert!(
            p.predicted_node_ms > 0.0 && p.predicted_node_ms <= p.predicted_ms,
            "{p:?}"
        );
    }
    // Cores 2: configurations (1, 1), (1, 2) and (2, 1), each at the one load.
    assert_eq!(points.len(), 3, "{points:?}");
    let configs: Vec<_> = points.iter().map(|p| p.config).collect();
    let (kind, seconds) = results[0].second_profiles.as_ref().unwrap();
    assert_eq!(*kind, SecondProfile::BeforeEachConfiguration);
    let reprofiled: Vec<_> = seconds.iter().map(|f| f.0).collect();
    assert_eq!(
        reprofiled, configs,
        "one fresh profile per configuration run"
    );
    assert_eq!(results[0].second_profile_drift().len(), 3);
    for p in points {
        let second = p.second_predicted_ms.unwrap_or(0.0);
        assert!(second > 0.0 && p.second_error().is_some(), "{p:?}");
        // 30 answered jobs: 29 gaps between their arrivals at the node.
        assert!(p.node_arrival_scv.is_some_and(|v| v >= 0.0), "{p:?}");
        assert!(p.online_predicted_ms.is_some_and(|m| m > 0.0), "{p:?}");
    }
    // SERF's online view: nothing served before (1, 1)'s point, and (1, 2)'s tuple was never
    // served, so both are predicted from the profile alone; (2, 1) shares its `i = 1` tuple with
    // (1, 1), whose 30 calls now stand in for the profile's.
    for p in &points[..2] {
        let online = p.online_predicted_ms.unwrap_or(0.0);
        assert!(
            (online - p.predicted_ms).abs() <= 1e-9 * p.predicted_ms,
            "{p:?}"
        );
    }
}
