use weir_operators::model::ParallelismSnapshot;
use weir_serf::profile::Profile;

use super::plan::{with_threads_only, Plan};
use super::table::{online_summary, phase_conditions_table};
use super::*;
use crate::conditions::Conditions;
use crate::overhead::median;

#[test]
fn schedule_follows_the_phase_rates() {
    let times = schedule(&[(200.0, 10.0), (20.0, 10.0), (200.0, 10.0)], 1);
    let count = |a: f64, b: f64| times.iter().filter(|t| **t >= a && **t < b).count() as f64;
    assert!((count(0.0, 10.0) / 2000.0 - 1.0).abs() < 0.1);
    assert!((count(10.0, 20.0) / 200.0 - 1.0).abs() < 0.3);
    assert!((count(20.0, 30.0) / 2000.0 - 1.0).abs() < 0.1);
    assert!(times.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(
        times,
        schedule(&[(200.0, 10.0), (20.0, 10.0), (200.0, 10.0)], 1)
    );
}

/// `setup` having answered `n` requests, sent at 1.0, 1.5, … s, each in `ms`.
fn served(setup: Setup, n: usize, ms: f64) -> SetupRun {
    SetupRun {
        setup,
        latencies: (0..n).map(|k| (1.0 + 0.5 * k as f64, ms)).collect(),
        failed: vec![],
        configs: vec![],
        serf: None,
        conditions: Conditions::default(),
        calls: Vec::new(),
        phase_conditions: Vec::new(),
    }
}

#[test]
fn the_call_trace_gives_each_call_the_configuration_it_began_in() {
    let call = |began_s: f64, ms: f64, idle: Option<f64>| TracedCall {
        began_s,
        ms,
        idle_before_ms: idle,
    };
    let serf = SetupRun {
        configs: vec![(0.0, Config::new(2, 1)), (3.0, Config::new(1, 2))],
        calls: vec![call(0.5, 5.5, None), call(3.25, 3.5, Some(1.25))],
        ..served(Setup::Serf, 0, 0.0)
    };
    assert_eq!(serf.config_at(0.5), (Some(Config::new(2, 1)), 0.5));
    assert_eq!(serf.config_at(3.25), (Some(Config::new(1, 2)), 0.25));
    let fixed = served(Setup::Fixed(Config::new(1, 2)), 0, 0.0);
    assert_eq!(fixed.config_at(7.0), (Some(Config::new(1, 2)), 7.0));
    let dir = std::env::temp_dir().join(format!("weir-trace-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("run1-{}.csv", serf.setup.slug()));
    write_call_trace(&serf, &path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        text,
        "began_s,since_switch_s,ms,idle_before_ms,concurrency,threads\n\
         0.500000,0.500,5.5000,,2,1\n\
         3.250000,0.250,3.5000,1.250,1,2\n"
    );
    assert_eq!(Setup::SerfCapped(600).slug(), "serf-cap-600");
    assert_eq!(Setup::Fixed(Config::new(1, 2)).slug(), "fixed-1x2");
}

/// A run of one phase (0–2 s) in which SERF and the fixed `(1, 2)` and `(2, 1)` each answered
/// `n` requests, each set-up's in its own latency (ms).
fn one_phase_run(n: usize, serf: f64, fixed_1_2: f64, fixed_2_1: f64) -> PhasesRun {
    PhasesRun {
        profile: Profile::from_rates(2, &[(1, vec![1.0])]).unwrap(),
        phases: vec![(1.0, 0.0, 2.0)],
        setups: vec![
            served(Setup::Serf, n, serf),
            served(Setup::Fixed(Config::new(1, 2)), n, fixed_1_2),
            served(Setup::Fixed(Config::new(2, 1)), n, fixed_2_1),
        ],
        order: vec![0, 1, 2],
        settle_seconds: 0.0,
        skipped: vec![],
        left_out: vec![],
    }
}

#[test]
fn the_ratio_over_all_runs_compares_with_the_configuration_best_on_average() {
    let b = Config::new(2, 1);
    let run = |serf, fa, fb| one_phase_run(1, serf, fa, fb);
    // (1, 2) is lucky once (5 ms) but otherwise 14–15 ms; (2, 1) is steadily about 10 ms.
    let runs = vec![
        run(10.0, 5.0, 10.0),
        run(10.5, 14.0, 9.5),
        run(9.8, 15.0, 10.2),
    ];
    // Per run: 2.0, 1.105, 0.98 → median 1.105.
    let per_run = median(
        runs.iter()
            .map(|r| r.ratio_to_best(Some(0), false).0)
            .collect(),
    );
    assert!((per_run - 10.5 / 9.5).abs() < 1e-12);
    // Over all runs: SERF 10.1 against (2, 1)'s 9.9 ((1, 2): 11.33).
    let (ratio, best) = ratio_over_all_runs(&runs, Compared::Serf, Some(0), false).unwrap();
    assert_eq!(best, b);
    assert!((ratio - 30.3 / 29.7).abs() < 1e-12, "{ratio}");
    assert_eq!(ratio_over_all_runs(&[], Compared::Serf, None, false), None);
}

#[test]
fn the_interval_resolves_a_steady_margin_and_not_a_margin_within_the_run_to_run_spread() {
    let run = |serf, fb| one_phase_run(2, serf, 50.0, fb);
    // The machine's speed moves both set-ups of a run by up to 20 %, SERF is 5 % faster in each
    // run: every resample is below 1.
    let steady: Vec<PhasesRun> = [1.0, 1.2, 0.9, 1.1, 1.0, 0.85]
        .iter()
        .map(|speed| run(9.5 * speed, 10.0 * speed))
        .collect();
    let (lo, hi) = ratio_interval(&steady, Compared::Serf, None, false, 1).unwrap();
    assert!(lo <= hi && hi < 1.0, "{lo}–{hi}");
    let (ratio, _) = ratio_over_all_runs(&steady, Compared::Serf, None, false).unwrap();
    assert!(lo <= ratio && ratio <= hi);
    // The same mean margin made of ±15 % swings from run to run is not resolved.
    let swinging: Vec<PhasesRun> = [0.8, 1.1, 0.8, 1.1, 0.8, 1.1]
        .iter()
        .map(|r| run(10.0 * r, 10.0))
        .collect();
    let (lo, hi) = ratio_interval(&swinging, Compared::Serf, None, false, 1).unwrap();
    assert!(lo < 1.0 && hi > 1.0, "{lo}–{hi}");
    // Reproducible, and undefined for a single run.
    assert_eq!(
        ratio_interval(&swinging, Compared::Serf, None, false, 1),
        Some((lo, hi))
    );
    assert_eq!(
        ratio_interval(&steady[..1], Compared::Serf, None, false, 1),
        None
    );
}

fn plan_config(rates: Option<(f64, f64)>, fixed: Vec<Config>) -> PhasesConfig {
    PhasesConfig {
        model: ("m".into(), PathBuf::from("m.onnx")),
        phase_seconds: 60.0,
        moderate: 0.55,
        low: 0.2,
        rates,
        fixed,
        settle_seconds: 8.0,
        burn_in_seconds: 0.0,
        bin_seconds: 2.0,
        runs: 1,
        seed: 1,
        profile: ProfileOptions::default(),
        control_threads: None,
        also_cap: None,
        calls_dir: None,
    }
}

/// The profile the plan tests share: capacities c·μ_c (1, 1) 100/s, (1, 2) 160/s, (2, 1)
/// 2 × 90 = 180/s.
fn two_core_profile() -> Profile {
    Profile::from_rates(2, &[(1, vec![100.0, 90.0]), (2, vec![160.0])]).unwrap()
}

/// An auto set-up beside SERF, `extra` (compared as `compared`): `config` plans SERF, `extra`
/// and fixed (1, 2) and (2, 1). In one phase where SERF takes 10 ms, `extra` 8 ms, fixed (1, 2)
/// 9 ms and fixed (2, 1) 10 ms, `extra` is never SERF's "best fixed", is itself compared with
/// `with` (ratio `ratio`), and the table lists both set-ups' configurations and holds
/// `heading` and `row`.
fn an_auto_set_up_beside_serf_is_judged_apart(
    config: &PhasesConfig,
    extra: Setup,
    compared: Compared,
    (with, ratio): (Config, f64),
    [heading, row, listed]: [&str; 3],
) {
    let (c12, c21) = (Config::new(1, 2), Config::new(2, 1));
    let plan = Plan::from_profile(config, &two_core_profile()).unwrap();
    assert_eq!(
        plan.setups,
        vec![Setup::Serf, extra, Setup::Fixed(c12), Setup::Fixed(c21)]
    );

    let mut run = one_phase_run(4, 10.0, 9.0, 10.0);
    run.setups[0].configs = vec![(0.0, c21), (3.0, c12)];
    run.setups.insert(
        1,
        SetupRun {
            configs: vec![(0.0, c12)],
            ..served(extra, 4, 8.0)
        },
    );
    // The extra set-up is never SERF's "best fixed" ...
    assert_eq!(run.ratio_to_best(Some(0), false), (10.0 / 9.0, c12));
    let runs = [run];
    let (serf, best) = ratio_over_all_runs(&runs, Compared::Serf, Some(0), false).unwrap();
    assert_eq!(best, c12);
    assert!((serf - 10.0 / 9.0).abs() < 1e-12);
    // ... and is itself compared with `with`.
    let (got, got_with) = ratio_over_all_runs(&runs, compared, Some(0), false).unwrap();
    assert_eq!(got_with, with);
    assert!((got - ratio).abs() < 1e-12);
    let table = phases_table(&runs);
    for part in [
        heading,
        row,
        "SERF's configurations: c=2 t=1 at 0.0 s → c=1 t=2 at 3.0 s",
        listed,
    ] {
        assert!(table.contains(part), "{part} in {table}");
    }
}

/// `--also-max-utilisation`: a second SERF set-up with that cap runs in the same plan, is never
/// anyone's "best fixed", is compared with every fixed configuration, and gets its own table.
#[test]
fn a_second_cap_runs_beside_serf_and_is_compared_with_every_fixed_configuration() {
    let config = PhasesConfig {
        also_cap: Some(0.6),
        ..plan_config(
            Some((150.0, 40.0)),
            vec![Config::new(1, 2), Config::new(2, 1)],
        )
    };
    assert_eq!(Setup::SerfCapped(600).to_string(), "SERF auto, cap 0.600");
    // The 0.6 cap's 8 ms against (1, 2)'s 9 ms.
    an_auto_set_up_beside_serf_is_judged_apart(
        &config,
        Setup::SerfCapped(600),
        Compared::Capped(600),
        (Config::new(1, 2), 8.0 / 9.0),
        [
            "SERF auto with utilisation cap 0.600 / the best fixed",
            "| 1 moderate | 0.889 (c=1 t=2) |",
            "Also (SERF auto, cap 0.600) configurations: c=1 t=2 at 0.0 s",
        ],
    );
}

#[test]
fn the_control_runs_auto_over_one_thread_count_and_is_compared_only_with_its_own() {
    let profile = two_core_profile();
    let cut = with_threads_only(&profile, 1).unwrap();
    let configs: Vec<Config> = cut.candidates().into_iter().map(|(c, _)| c).collect();
    assert_eq!(configs, vec![Config::new(1, 1), Config::new(2, 1)]);
    assert!(cut.validate().is_ok());
    let err = with_threads_only(&profile, 3).unwrap_err().to_string();
    assert!(
        err.contains("no configuration with 3 intra-op threads"),
        "{err}"
    );

    let config = PhasesConfig {
        control_threads: Some(1),
        ..plan_config(
            Some((150.0, 40.0)),
            vec![Config::new(1, 2), Config::new(2, 1)],
        )
    };
    // The control's 8 ms against (2, 1)'s 10 ms: (2, 1) is the only fixed configuration of one
    // thread.
    an_auto_set_up_beside_serf_is_judged_apart(
        &config,
        Setup::SerfThreads(1),
        Compared::Control(1),
        (Config::new(2, 1), 0.8),
        [
            "the control: SERF auto with t=1 only",
            "| 1 moderate | 0.800 (c=2 t=1) |",
            "The control's (SERF auto, t=1 only) configurations: c=1 t=2 at 0.0 s",
        ],
    );
    let config = PhasesConfig {
        control_threads: Some(4),
        ..config
    };
    assert!(Plan::from_profile(&config, &profile).is_err());
}

#[test]
fn the_plan_takes_given_rates_and_runs_only_the_fixed_set_ups_asked_for() {
    let profile = two_core_profile();
    let by_fraction = Plan::from_profile(&plan_config(None, vec![]), &profile).unwrap();
    assert!((by_fraction.moderate - 99.0).abs() < 1e-9);
    assert!((by_fraction.low - 36.0).abs() < 1e-9);
    assert_eq!(by_fraction.skipped.len(), 1, "(1,1) at 0.99 is unstable");
    assert_eq!(by_fraction.setups.len(), 3);
    assert!(by_fraction.left_out.is_empty());

    let (c11, c12, c21) = (Config::new(1, 1), Config::new(1, 2), Config::new(2, 1));
    let given =
        Plan::from_profile(&plan_config(Some((150.0, 40.0)), vec![c21, c11]), &profile).unwrap();
    assert_eq!((given.moderate, given.low), (150.0, 40.0));
    assert_eq!(given.setups, vec![Setup::Serf, Setup::Fixed(c21)]);
    assert_eq!(given.left_out, vec![c12]);
    assert_eq!(
        given.skipped.len(),
        1,
        "(1,1) is asked for but unstable at 150/s"
    );
    assert_eq!(given.widest, Some(c21));

    let err = Plan::from_profile(&plan_config(None, vec![Config::new(3, 1)]), &profile)
        .unwrap_err()
        .to_string();
    assert!(err.contains("c=3 t=1 is not in the profile"), "{err}");
}

#[test]
fn the_order_rotates_so_every_set_up_runs_once_in_every_position() {
    assert_eq!(run_order(3, 0), vec![0, 1, 2]);
    assert_eq!(run_order(3, 1), vec![1, 2, 0]);
    assert_eq!(run_order(3, 2), vec![2, 0, 1]);
    assert_eq!(run_order(3, 3), run_order(3, 0));
    for position in 0..3 {
        let mut firsts: Vec<usize> = (0..3).map(|r| run_order(3, r)[position]).collect();
        firsts.sort_unstable();
        assert_eq!(firsts, vec![0, 1, 2], "position {position}");
    }
    assert_eq!(run_order(2, 1), vec![1, 0]);
}

#[test]
fn online_summary_shows_offline_and_measured_times() {
    use weir_operators::model::{LoadServiceRate, ServiceRate};
    let p = ParallelismSnapshot {
        concurrency: 2,
        threads: 1,
        switches: 3,
        arrival_rate: 80.0,
        profile_updates: 12,
        ranking_changes: 2,
        explorations: 1,
        backlog_switches: 0,
        samples_dropped: 0,
        samples_settling: 0,
        reads_admission: true,
        waiting: 0,
        service_rates: vec![
            ServiceRate {
                running: 1,
                threads: 1,
                samples: 40,
                measured: Some(100.0),
                offline: 125.0,
            },
            ServiceRate {
                running: 1,
                threads: 2,
                samples: 3,
                measured: None,
                offline: 200.0,
            },
        ],
        service_by_load: vec![
            LoadServiceRate {
                running: 1,
                threads: 1,
                load: (20.0, 25.0),
                samples: 30,
                mean_s: 0.0085,
            },
            LoadServiceRate {
                running: 1,
                threads: 1,
                load: (100.0, 125.0),
                samples: 10,
                mean_s: 0.012,
            },
        ],
        standings: Vec::new(),
    };
    let s = online_summary(&p);
    assert!(
        s.contains("12 re-evaluations, 2 ranking changes, 1 explorations, 0 backlog switches"),
        "{s}"
    );
    assert!(
        s.contains("| 1 × 1 | 40 | 8.000 | 10.000 | 20–25: 8.500, 30 |"),
        "{s}"
    );
    assert!(s.contains("| 1 × 2 | 3 | 5.000 | – | – |"), "{s}");
}

#[test]
fn the_phase_table_gives_each_set_ups_calls_and_busy_share_per_phase() {
    let mut run = one_phase_run(4, 5.0, 6.0, 7.0);
    run.setups[0].phase_conditions = vec![Conditions {
        calls: 4,
        rows: 4,
        call_seconds: 0.02,
        busy: Some(0.5),
        steal: Some(0.0),
    }];
    let s = phase_conditions_table(&run);
    assert!(s.contains("| set-up | 1 moderate |"), "{s}");
    assert!(s.contains("| SERF auto | 5.000 / 50 % |"), "{s}");
    // A set-up without readings shows none rather than zeros.
    assert!(s.contains("| fixed c=1 t=2 | – |"), "{s}");
}

#[test]
fn ratios_compare_serf_with_the_best_fixed_per_phase() {
    let run = |setup, lat: [f64; 2]| SetupRun {
        latencies: vec![(1.0, lat[0]), (3.0, lat[1])],
        ..served(setup, 0, 0.0)
    };
    let r = PhasesRun {
        profile: Profile::from_rates(2, &[(1, vec![1.0])]).unwrap(),
        phases: vec![(1.0, 0.0, 2.0), (1.0, 2.0, 4.0)],
        setups: vec![
            run(Setup::Serf, [10.0, 10.0]),
            run(Setup::Fixed(Config::new(1, 1)), [20.0, 9.0]),
            run(Setup::Fixed(Config::new(2, 1)), [8.0, 40.0]),
        ],
        order: vec![0, 1, 2],
        settle_seconds: 0.0,
        skipped: vec![],
        left_out: vec![],
    };
    let (c11, c21) = (Config::new(1, 1), Config::new(2, 1));
    for (scope, best) in [
        (Some(0), (10.0 / 8.0, c21)),
        (Some(1), (10.0 / 9.0, c11)),
        (None, (10.0 / 14.5, c11)),
    ] {
        assert_eq!(r.ratio_to_best(scope, false), best, "{scope:?}");
    }

    // A configuration that shed load in a phase is no candidate there (nor over the whole run),
    // however fast the requests it did answer; elsewhere it still is.
    let mut shed = r.clone();
    shed.setups[2].failed = vec![0.5, 1.5];
    assert_eq!(shed.failed(2, Some(0), false), 2);
    assert_eq!(shed.failed(2, Some(1), false), 0);
    for (scope, best) in [(Some(0), (10.0 / 20.0, c11)), (None, (10.0 / 14.5, c11))] {
        assert_eq!(shed.ratio_to_best(scope, false), best, "{scope:?}");
    }
    shed.setups[1].failed = vec![1.0];
    assert!(shed.ratio_to_best(Some(0), false).0.is_nan());
    assert_eq!(
        ratio_over_all_runs(&[shed], Compared::Serf, Some(1), false),
        Some((10.0 / 9.0, Config::new(1, 1)))
    );
}
