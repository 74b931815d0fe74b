use super::*;

fn types() -> Vec<EmulatedType> {
    ["gpu:26:0.05:0.5", "cpu:3:0.33:0.15"]
        .iter()
        .map(|t| EmulatedType::parse(t).unwrap())
        .collect()
}

#[test]
fn emulated_types_parse_and_refuse_bad_text() {
    let t = &types()[1];
    assert_eq!(t.name, "cpu");
    assert!((t.latency_ms(100) - 36.0).abs() < 1e-9);
    assert_eq!(t.latency.to_string(), "3,0.33");
    for bad in [
        "gpu:1:2",
        "gpu:a:0.1:1",
        ":1:0.1:1",
        "gpu:1:0.1:0",
        "gpu:0:0:1",
        "g:-1:1:1",
    ] {
        assert!(EmulatedType::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn only_types_that_serve_the_largest_query_in_time_get_a_homogeneous_pool() {
    let config = KairosLiveConfig {
        types: types(),
        hetero: None,
        budget_per_hour: 1.0,
        qos_ms: 140.0,
        hidden: 64,
        kairos_latency: KairosLatency::Measured,
        start_rate: 10.0,
        rate_step: 1.2,
        max_rate: 20.0,
        seconds_per_trial: 1.0,
        min_queries: 10,
        trials: 1,
        goodput_rate: 10.0,
        policies: vec![Policy::Kairos, Policy::LeastOutstanding],
    };
    let s = setups(&config, &[1, 3]);
    let pools: Vec<&[usize]> = s.iter().map(|s| s.pool.as_slice()).collect();
    // cpu takes 333 ms at 1000 rows: no homogeneous cpu pool; gpu: 2 for $1/h.
    assert_eq!(pools, vec![&[1, 3][..], &[1, 3], &[2, 0], &[2, 0]]);
    assert!(s[2].homogeneous() && !s[0].homogeneous());
    // 413 rows is the cpu's last size within 140 ms.
    let sizes = [10, 400, 420, 1000];
    assert_eq!(share_over_limit(&config.types[1], 140.0, &sizes), 0.5);
    assert_eq!(share_over_limit(&config.types[0], 140.0, &sizes), 0.0);
}

#[test]
fn the_nominal_profile_is_the_types_linear_latencies() {
    let t = types();
    let p = emulated_profile(&t, 140.0, |i, n| t[i].latency_ms(n)).unwrap();
    assert_eq!(p.types[p.base].instance.name, "gpu");
    assert!((p.latency_ms(1, 500) - t[1].latency_ms(500)).abs() < 1e-9);
    assert!(Policy::KairosOnePerCall
        .yaml(140.0, KairosLatency::Measured)
        .contains("batch_queued_jobs: false"));
    assert!(!Policy::Kairos
        .yaml(140.0, KairosLatency::Learned)
        .contains("profiles"));
}

#[test]
fn every_trial_is_one_tab_separated_line() {
    let trial = |p99_ms: f64| Trial {
        p50_ms: 10.0,
        p99_ms,
        errors: 1,
        goodput: 79.96,
        cpu_cores: 1.5,
    };
    let result = SetupResult {
        setup: Setup {
            pool_label: "2×gpu".into(),
            pool: vec![2, 0],
            policy: Policy::RoundRobin,
        },
        cost_per_hour: 1.0,
        points: vec![RatePoint {
            rate: 57.6,
            trials: vec![trial(20.0), trial(30.5)],
        }],
        max_rate: 0.0,
        max_rate_per_trial: vec![],
        goodput: vec![trial(40.0)],
        type_share: vec![1.0, 0.0],
        jobs_per_query: 1.0,
    };
    assert_eq!(
        kairos_live_points(&[result]),
        "set-up\trate\ttrial\tp50_ms\tp99_ms\terrors\tgoodput\tcpu_cores\n\
         2×gpu · round robin\t57.6\t0\t10.00\t20.00\t1\t80.0\t1.500\n\
         2×gpu · round robin\t57.6\t1\t10.00\t30.50\t1\t80.0\t1.500\n\
         2×gpu · round robin\tgoodput\t0\t10.00\t40.00\t1\t80.0\t1.500\n"
    );
}
