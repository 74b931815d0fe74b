//! Online re-profiling and rates by load: calls in a switch's settling time left out, re-rankings
//! and their hysteresis, the evidence rule, and service times tagged with the load on their side of
//! a step.

use super::*;

#[test]
fn calls_that_began_while_a_switch_settled_are_left_out_of_the_profile() {
    let solo = Config::new(1, 2);
    let call = |since: Option<f64>| ServedCall {
        since_switch: since.map(secs),
        ..ServedCall::new(solo, 0.1)
    };
    let mut s = Scheduler::new(two_core(), solo, SchedulerOptions::default(), secs(0.0)).unwrap();
    // No switch yet, and a quarter of a second or more after one: kept.
    assert!(s.record_service(secs(0.1), call(None)));
    assert!(s.record_service(secs(0.2), call(Some(0.3))));
    // Across a switch, or within the settling time after it: left out and counted.
    assert!(!s.record_service(secs(0.3), call(Some(0.0))));
    assert!(!s.record_service(secs(0.4), call(Some(0.2))));
    let c = s.counters();
    assert_eq!((c.samples, c.settling), (2, 2));
    s.record_arrivals(secs(0.5), 5);
    s.poll(secs(1.01));
    let kept = s
        .online()
        .unwrap()
        .tuples()
        .find(|t| t.tuple == solo)
        .unwrap();
    assert_eq!(kept.samples, 2);
    // A settling time of zero keeps every call.
    let mut options = SchedulerOptions::default();
    if let Some(o) = options.online.as_mut() {
        o.settle_after_switch = Duration::ZERO;
    }
    let mut all = Scheduler::new(two_core(), solo, options, secs(0.0)).unwrap();
    assert!(all.record_service(secs(0.1), call(Some(0.0))));
    assert_eq!(all.counters().settling, 0);
}

#[test]
fn reprofile_flips_the_ranking_and_the_switch_still_waits_out_the_hold() {
    // The machine is slower than profiled for two threads: (1, 2) takes 0.3 s, not 0.12 s. Without
    // load bands (so without the evidence rule, tested below) the measured rate alone decides.
    let truth = Candidates::two_core_from_times(0.20, 0.30, 0.30);
    let opts = SchedulerOptions {
        load_margin_sigmas: 0.0,
        online: Some(OnlineOptions {
            explore: None,
            load_bands: None,
            ..Default::default()
        }),
        ..Default::default()
    };
    let a = Config::new(1, 2);
    let mut s = Scheduler::new(pessimistic(), a, opts, secs(0.0)).unwrap();
    assert_eq!(s.decider().target(3.0), a);
    let mut rng = StdRng::seed_from_u64(1);
    let switches = serve(&mut s, &truth, 3.0, 0.0, 30.0, &mut rng);
    let flips = s.take_reprofiles();
    assert_eq!(flips.len(), 1, "{flips:?}");
    let flip = &flips[0];
    assert_eq!(flip.before[0], a);
    assert_eq!(flip.after[0], Config::new(2, 1));
    assert_eq!(flip.measured_tuples, 1);
    // The log's reasons: every configuration in the new order, fastest first, the measured
    // (1, 2) with its slowdown (0.3 s against 0.12 s profiled) and the others not measured.
    let order: Vec<Config> = flip.standings.iter().map(|s| s.config).collect();
    assert_eq!(order, flip.after);
    let latency = |i: usize| flip.standings[i].estimate.map(|e| e.latency);
    assert!(latency(0) <= latency(1), "{:?}", flip.standings);
    let two_threads = flip.standings.iter().find(|s| s.config == a).unwrap();
    assert!(two_threads.slowdown.is_none(), "no load bands, no evidence");
    assert!(
        (two_threads.utilisation - 3.0 * 0.3).abs() < 0.02,
        "{two_threads:?}"
    );
    let line = two_threads.to_string();
    assert!(line.contains("/ cap 0.50, not measured here"), "{line}");
    // Re-evaluated every 5 updates, and not before 20 samples (at 3/s: the update at 10 s).
    assert_eq!(flip.at.as_secs(), 10);
    assert_eq!(switches.len(), 1, "{switches:?}");
    let sw = switches[0];
    assert_eq!(
        (sw.from, sw.to, sw.reason),
        (a, Config::new(2, 1), SwitchReason::Better)
    );
    // Hysteresis: adopted on the second consecutive update that prefers it.
    assert_eq!(sw.at.as_secs(), 11);
    assert!(s.take_reprofiles().is_empty());
    let c = s.counters();
    assert_eq!(c.ranking_changes, 1);
    // At the first update, then every 5.
    assert_eq!(c.reevaluations, 6);
    assert_eq!(c.explorations, 0);
    assert_eq!(c.samples, 90);
    // Without online re-profiling the same service times change nothing.
    let opts = SchedulerOptions {
        online: None,
        ..opts
    };
    let mut s = Scheduler::new(pessimistic(), a, opts, secs(0.0)).unwrap();
    assert!(serve(&mut s, &truth, 3.0, 0.0, 30.0, &mut rng).is_empty());
    assert_eq!(s.counters(), OnlineCounters::default());
}

#[test]
fn an_unmeasured_configuration_is_judged_with_the_measured_slowdown_and_explored() {
    // The same machine as above, with load bands (the default): (1, 2) is measured 2.5× slower than
    // profiled at this load and (2, 1) is not measured here at all, so the rule assumes it slows down
    // as much (then it cannot keep up with 3/s) and keeps (1, 2).
    let truth = Candidates::two_core_from_times(0.20, 0.30, 0.30);
    let (a, b) = (Config::new(1, 2), Config::new(2, 1));
    let no_explore = SchedulerOptions {
        load_margin_sigmas: 0.0,
        ..without_exploration()
    };
    let mut s = Scheduler::new(pessimistic(), a, no_explore, secs(0.0)).unwrap();
    let mut rng = StdRng::seed_from_u64(1);
    assert!(serve(&mut s, &truth, 3.0, 0.0, 60.0, &mut rng).is_empty());
    // The ranking by the rates alone did flip, and says which configuration was measured here.
    let flips = s.take_reprofiles();
    assert_eq!(flips.last().map(|f| f.after[0]), Some(b), "{flips:?}");
    assert_eq!(flips.last().map(|f| f.evidenced.clone()), Some(vec![a]));
    // Exploration (on by default) is how the assumption is checked: the configurations are tried
    // while the load is steady (at 3/s a trial of 3 periods gathers too few samples at first, so the
    // first trial ends back in (1, 2)), and once (2, 1) has been measured here it is kept.
    let explore = SchedulerOptions {
        load_margin_sigmas: 0.0,
        ..cap_at_six_tenths()
    };
    let mut s = Scheduler::new(pessimistic(), a, explore, secs(0.0)).unwrap();
    let switches = serve(&mut s, &truth, 3.0, 0.0, 60.0, &mut rng);
    let last = switches.last().copied();
    assert_eq!(
        last.map(|w| (w.to, w.reason)),
        Some((b, SwitchReason::Explored)),
        "{switches:?}"
    );
    assert!(switches.len() <= 4, "{switches:?}");
    assert!(last.is_some_and(|w| w.at < secs(40.0)), "{switches:?}");
    assert_eq!(s.current(), b);
    assert!(s.online().unwrap().is_evidenced(b, 3.0, secs(60.0)));
}

#[test]
fn a_rate_measured_at_another_load_does_not_move_the_choice_under_moderate_load() {
    // Squeezenet on two cores: profiled alone, (1, 2) takes 4.4 ms and (2, 1) 7.5/7.8 ms. Under
    // 140/s every call is slower because the process's other threads compete for the cores:
    // (2, 1) 7.8/9.6 ms, and (1, 2) 6.8 ms (it then barely keeps up). At low load the profile
    // holds.
    let profiled = Candidates::two_core_from_times(0.0075, 0.0078, 0.0044);
    let moderate = Candidates::two_core_from_times(0.0078, 0.0096, 0.0068);
    let (a, b) = (Config::new(1, 2), Config::new(2, 1));
    let opts = without_exploration();
    let run = |opts: SchedulerOptions| {
        let mut s = Scheduler::new(profiled.clone(), b, opts, secs(0.0)).unwrap();
        let mut rng = StdRng::seed_from_u64(9);
        let mut switches = serve(&mut s, &moderate, 140.0, 0.0, 30.0, &mut rng);
        let low = serve(&mut s, &profiled, 25.0, 30.0, 30.0, &mut rng);
        switches.extend(low);
        switches.extend(serve(&mut s, &moderate, 140.0, 60.0, 30.0, &mut rng));
        switches
    };
    // Load-blind (no load bands): once (2, 1)'s measured rate puts it beyond the 0.6 cap, the
    // offline (1, 2) has the most capacity and is taken under moderate load.
    let blind = run(SchedulerOptions {
        online: Some(OnlineOptions {
            explore: None,
            load_bands: None,
            ..Default::default()
        }),
        ..opts
    });
    assert!(
        blind.iter().any(|w| w.to == a && w.at < secs(30.0)),
        "{blind:?}"
    );
    // With load bands: (2, 1) stays through the first moderate phase ((1, 2)'s capacity, cut by
    // the slowdown (2, 1) shows there, does not win), (1, 2) is taken at low load, and after the step
    // back up (2, 1) is back at once, on the surge of arrivals before the next update, and stays.
    let banded = run(opts);
    let moves: Vec<_> = banded.iter().map(|w| (w.to, w.at.as_secs())).collect();
    assert_eq!(banded.len(), 2, "{moves:?}");
    assert_eq!(banded[0].to, a);
    assert!(
        banded[0].at > secs(30.0) && banded[0].at < secs(40.0),
        "{moves:?}"
    );
    assert_eq!(banded[1].to, b);
    assert!(
        banded[1].at > secs(60.0) && banded[1].at < secs(60.5),
        "{:?}",
        banded[1]
    );
    assert_eq!(banded[1].reason, SwitchReason::Surge);
}

#[test]
fn service_times_of_the_period_with_a_load_step_are_tagged_with_the_load_on_their_side_of_it() {
    // A step of load in miniature: (1, 2) serves low load (40/s); the load steps
    // up to 200/s 0.2 s into a period, so that period's rate is a mix (168/s, in the band below
    // 200/s's) at which no call was served.
    let truth = Candidates::two_core_from_times(0.005, 0.0052, 0.003);
    let a = Config::new(1, 2);
    let run = |change_sigmas: f64| {
        let opts = SchedulerOptions {
            change_sigmas,
            ..without_exploration()
        };
        let mut s = Scheduler::new(truth.clone(), a, opts, secs(0.0)).unwrap();
        let mut rng = StdRng::seed_from_u64(3);
        assert!(serve(&mut s, &truth, 40.0, 0.0, 30.2, &mut rng).is_empty());
        serve(&mut s, &truth, 200.0, 30.2, 0.8, &mut rng);
        // The update at 31 s flushes the period of the step.
        s.poll(secs(31.0));
        s.online().cloned().unwrap()
    };
    let bands = LoadBands::default();
    let samples_at = |online: &OnlineProfile, load: f64| {
        let range = bands.range(bands.band(load).unwrap());
        online
            .band_estimates()
            .filter(|b| b.tuple == a.tuple(1) && b.load == range)
            .map(|b| b.samples)
            .sum::<u64>()
    };
    let split = run(SchedulerOptions::default().change_sigmas);
    // 30.2 s × 40/s before the step, 0.8 s × 200/s after it; nothing at the mix.
    assert_eq!(samples_at(&split, 40.0), 1208);
    assert_eq!(samples_at(&split, 168.0), 0);
    assert_eq!(samples_at(&split, 200.0), 160);
    // With the step test off, the period's calls (the update at 30 s ran at the first arrival
    // after it, 30.0125 s: 167 of them) are all tagged with the mixed rate.
    let blind = run(0.0);
    assert_eq!(samples_at(&blind, 168.0), 167);
    assert_eq!(samples_at(&blind, 40.0), 1201);
}

#[test]
fn the_step_is_placed_at_the_most_likely_hand_over() {
    let ms = |m: u64| Duration::from_millis(m);
    // 40/s before; hand-overs every 100 ms of 4 arrivals until 300 ms, then of 20.
    let arrivals: Vec<_> = (1..=10)
        .map(|k| (ms(100 * k), if k <= 3 { 4 } else { 20 }))
        .collect();
    let split = split_at_step(40.0, (ms(0), ms(1000)), &arrivals, ms(200));
    assert_eq!(split.at, ms(300));
    assert_eq!(split.before, 40.0);
    assert!(
        split.after.is_some_and(|r| (r - 200.0).abs() < 1e-9),
        "{split:?}"
    );
    // A step at the period's start puts every call after it; one at its end leaves no rate after.
    let all = [(ms(500), 100), (ms(1000), 100)];
    assert_eq!(
        split_at_step(40.0, (ms(0), ms(1000)), &all, ms(200)).at,
        ms(0)
    );
    let late = [(ms(900), 36), (ms(950), 40)];
    let split = split_at_step(40.0, (ms(0), ms(1000)), &late, ms(200));
    assert_eq!((split.at, split.after), (ms(900), None));
}

#[test]
fn a_load_step_is_a_period_rate_beyond_the_poisson_spread_of_the_last() {
    // 200 expected: ±3.5·√400 = ±70 is within the noise.
    assert!(!is_load_step(200.0, 260, 1.0, 3.5));
    assert!(!is_load_step(200.0, 140, 1.0, 3.5));
    assert!(is_load_step(200.0, 280, 1.0, 3.5));
    assert!(is_load_step(40.0, 168, 1.0, 3.5));
    // Half a period at the same rate is no step; z = 0 turns the test off; an empty span is none.
    assert!(!is_load_step(200.0, 100, 0.5, 3.5));
    assert!(!is_load_step(40.0, 400, 1.0, 0.0));
    assert!(!is_load_step(40.0, 400, 0.0, 3.5));
}
