//! The decision and its hysteresis: hold periods, immediate moves off an unstable configuration,
//! one decision per period, unconfirmed choices, the standings, and a replay of a dynamic load
//! against every fixed configuration in the simulator.

use super::*;
use crate::simulator::{Completed, Semantics, Station};

#[test]
fn hysteresis_holds_and_overload_is_immediate() {
    let a = Config::new(1, 2);
    let b = Config::new(2, 1);
    let mut d = Decider::new(two_core(), a, SchedulerOptions::default()).unwrap();
    assert_eq!(d.target(2.0), a);
    assert_eq!(d.target(8.0), b);
    // A one-period spike does not switch; two consecutive periods do.
    assert_eq!(d.decide(8.0), None);
    assert_eq!(d.decide(2.0), None);
    assert_eq!(d.decide(8.0), None);
    assert_eq!(d.decide(8.0), Some((b, SwitchReason::Better)));
    assert_eq!(d.current(), b);
    // Near the crossover (≈ 6.5/s) the predicted gain is below 2%: stay, however long.
    for _ in 0..5 {
        assert_eq!(d.decide(6.42), None);
    }
    // Overload: A's capacity is 8.33/s; at 9/s the switch back to B... from A is immediate.
    let mut d = Decider::new(two_core(), a, SchedulerOptions::default()).unwrap();
    assert_eq!(d.decide(9.0), Some((b, SwitchReason::Overload)));
    // Beyond every capacity: go to the largest capacity.
    let mut d = Decider::new(two_core(), Config::new(1, 1), SchedulerOptions::default()).unwrap();
    assert_eq!(d.decide(100.0), Some((b, SwitchReason::Overload)));
    // Table lookup behaves the same way on clear loads.
    let opts = SchedulerOptions {
        lookup: Lookup::Table(TableOptions::default()),
        ..Default::default()
    };
    let mut d = Decider::new(two_core(), a, opts).unwrap();
    assert_eq!(d.table().unwrap().rows.len(), 10);
    assert_eq!(d.decide(8.0), None);
    assert_eq!(d.decide(8.0), Some((b, SwitchReason::Better)));
    assert!(matches!(
        Decider::new(two_core(), Config::new(3, 1), SchedulerOptions::default()),
        Err(SchedulerError::UnknownInitial(_))
    ));
}

#[test]
fn the_scheduler_decides_once_per_period() {
    let a = Config::new(1, 2);
    let exact = SchedulerOptions {
        load_margin_sigmas: 0.0,
        ..Default::default()
    };
    let mut s = Scheduler::new(two_core(), a, exact, secs(0.0)).unwrap();
    // 8/s evenly for 10 s.
    let switches = eight_a_second(&mut s, 80);
    // Updates at 1 s (estimate 8) and 2 s (estimate 8): switch decided at the second.
    assert_eq!(switches.len(), 1);
    assert_eq!(switches[0].to, Config::new(2, 1));
    assert!(
        switches[0].at >= secs(2.0) && switches[0].at < secs(2.2),
        "{:?}",
        switches[0]
    );
    let est = s.last_estimate().unwrap();
    assert_eq!((est.rate, est.arrivals, est.span_s), (8.0, 40, 5.0));
    assert!((est.std_error - 40f64.sqrt() / 5.0).abs() < 1e-12);
    assert_eq!(s.current(), Config::new(2, 1));
    // With the default 1σ margin the first update plans for 8 + √8 > A's capacity: immediate switch.
    let mut s = Scheduler::new(two_core(), a, SchedulerOptions::default(), secs(0.0)).unwrap();
    let switches = eight_a_second(&mut s, 16);
    assert_eq!(switches.len(), 1);
    assert_eq!(switches[0].reason, SwitchReason::Overload);
    assert!((switches[0].planned_lambda - (8.0 + 8f64.sqrt())).abs() < 1e-12);
}

#[test]
fn a_choice_made_by_new_rates_alone_waits_for_the_next_reevaluation_to_confirm_it() {
    // Squeezenet-like at 40/s, both configurations far within the cap: under rates `slow`, (2, 1)
    // is the choice; one fast estimate of (1, 2)'s rate (`fast`) makes (1, 2) the choice.
    let (one_two, two_one) = (Config::new(1, 2), Config::new(2, 1));
    let slow = Candidates::two_core_from_times(0.0075, 0.0078, 0.0080);
    let fast = Candidates::two_core_from_times(0.0075, 0.0078, 0.0050);
    let lambda = 40.0;
    let none = Evidence::default;
    let mut d = Decider::new(slow.clone(), two_one, SchedulerOptions::default()).unwrap();
    assert_eq!(d.target(lambda), two_one);
    // A flip the next scheduled re-evaluation reverses never switches, however many updates pass.
    d.reevaluate(fast.clone(), none(), lambda, true).unwrap();
    assert_eq!(
        (d.target(lambda), d.unconfirmed()),
        (one_two, Some(one_two))
    );
    for _ in 0..4 {
        assert_eq!(d.decide(lambda), None);
    }
    d.reevaluate(slow.clone(), none(), lambda, true).unwrap();
    assert_eq!(d.unconfirmed(), None);
    assert_eq!(d.decide(lambda), None);
    assert_eq!(d.current(), two_one);
    // A flip the next one confirms switches at once there (the hold was served while waiting).
    d.reevaluate(fast.clone(), none(), lambda, true).unwrap();
    for _ in 0..4 {
        assert_eq!(d.decide(lambda), None);
    }
    d.reevaluate(fast.clone(), none(), lambda, true).unwrap();
    assert_eq!(d.unconfirmed(), None);
    assert_eq!(d.decide(lambda), Some((one_two, SwitchReason::Better)));
    // A re-evaluation because the load moved (not scheduled) makes no unconfirmed choice: the hold
    // alone applies.
    let mut d = Decider::new(slow.clone(), two_one, SchedulerOptions::default()).unwrap();
    d.reevaluate(fast.clone(), none(), lambda, false).unwrap();
    assert_eq!(d.unconfirmed(), None);
    assert_eq!(d.decide(lambda), None);
    assert_eq!(d.decide(lambda), Some((one_two, SwitchReason::Better)));
    // A move for capacity never waits: at 200/s (1, 2) is beyond the cap under both rates and
    // (2, 1) is the choice by capacity once its measured rate says it has enough.
    let (weak, strong) = (
        Candidates::two_core_from_times(0.0075, 0.0110, 0.0045),
        Candidates::two_core_from_times(0.0075, 0.0078, 0.0045),
    );
    let mut d = Decider::new(weak, one_two, SchedulerOptions::default()).unwrap();
    assert_eq!(d.target(200.0), one_two);
    d.reevaluate(strong, none(), 200.0, true).unwrap();
    assert_eq!(d.unconfirmed(), Some(two_one));
    assert_eq!(d.decide(200.0), None);
    assert_eq!(d.decide(200.0), Some((two_one, SwitchReason::Better)));
}

#[test]
fn the_standings_show_every_configuration_at_the_planned_load() {
    let options = SchedulerOptions {
        online: None,
        ..SchedulerOptions::default()
    };
    let (low, moderate) = (Config::new(1, 2), Config::new(2, 1));
    let mut s = Scheduler::new(squeezenet_like(), low, options, secs(0.0)).unwrap();
    assert!(
        s.standings().is_empty(),
        "nothing planned before the first update"
    );
    let switches = ticked(&mut s, &[(142.1, 12.0)], 0.1, 5);
    assert_eq!(s.current(), moderate, "{switches:?}");
    let planned = s.planned_lambda().unwrap();
    let est = s.last_estimate().unwrap();
    assert!(
        (planned - est.rate - est.std_error).abs() < 1e-9,
        "one σ of margin"
    );
    let standings = s.standings();
    let order: Vec<Config> = standings.iter().map(|x| x.config).collect();
    let configs: Vec<Config> = squeezenet_like().configs().collect();
    assert_eq!(order, configs);
    for x in &standings {
        let capacity = squeezenet_like().get(x.config).unwrap().capacity();
        assert!((x.utilisation - planned / capacity).abs() < 1e-9, "{x:?}");
        // Without online re-profiling nothing is measured: every cap is the unproven one.
        assert_eq!((x.cap, x.slowdown), (0.5, None), "{x:?}");
    }
    // The standings say why (2, 1) runs: at 142/s no configuration is within its cap, and
    // it is the least busy (the choice by capacity).
    let running = standings.iter().find(|x| x.config == moderate).unwrap();
    assert!(
        standings.iter().all(|x| x.utilisation > x.cap),
        "{standings:?}"
    );
    for x in &standings {
        assert!(running.utilisation <= x.utilisation, "{x:?}");
    }
    let line = running.to_string();
    assert!(
        line.starts_with("c=2 t=1 ") && line.contains(" ms (service "),
        "{line}"
    );
    assert!(line.ends_with("/ cap 0.50, not measured here"), "{line}");
}

/// Runs `arrivals` through a station, either fixed at `fixed` or driven by a SERF scheduler.
fn replay(cands: &Candidates, arrivals: &[f64], fixed: Option<Config>) -> Vec<Completed> {
    let start = fixed.unwrap_or(Config::new(1, 1));
    let mu = |c: Config| cands.get(c).unwrap().mu.clone();
    let mut station = Station::new(&mu(start), Semantics::Dynamic).unwrap();
    let mut sched =
        Scheduler::new(cands.clone(), start, SchedulerOptions::default(), secs(0.0)).unwrap();
    let mut out = Vec::with_capacity(arrivals.len());
    for &t in arrivals {
        station.advance(t, &mut out);
        if fixed.is_none() {
            sched.record_arrival(secs(t));
            if let Some(sw) = sched.poll(secs(t)) {
                station.set_profile(&mu(sw.to)).unwrap();
            }
        }
        station.arrive(t, 1.0, &mut out);
    }
    station.drain(&mut out);
    out
}

fn mean_latency(done: &[Completed], from: f64, to: f64) -> f64 {
    let sel: Vec<f64> = done
        .iter()
        .filter(|c| c.arrival >= from && c.arrival < to)
        .map(|c| c.latency())
        .collect();
    sel.iter().sum::<f64>() / sel.len() as f64
}

#[test]
fn a_dynamic_load_tracks_the_best_fixed_configuration() {
    // Moderate (7.5/s) → low (2/s) → moderate, 1500 s each, same arrivals for every run.
    let phases = [(7.5, 1500.0), (2.0, 1500.0), (7.5, 1500.0)];
    let mut rng = StdRng::seed_from_u64(4);
    let mut arrivals = Vec::new();
    let (mut t, mut bounds) = (0.0, vec![0.0]);
    for (lambda, len) in phases {
        let end = t + len;
        let exp = Exp::new(lambda).unwrap();
        let mut next = t + exp.sample(&mut rng);
        while next < end {
            arrivals.push(next);
            next += exp.sample(&mut rng);
        }
        t = end;
        bounds.push(end);
    }
    let cands = two_core();
    let serf = replay(&cands, &arrivals, None);
    let fixed: Vec<(Config, Vec<Completed>)> = cands
        .as_slice()
        .iter()
        .map(|c| (c.config, replay(&cands, &arrivals, Some(c.config))))
        .collect();
    // Per phase, after the estimator has converged (window + hold + margin = 10 s).
    for p in 0..3 {
        let (from, to) = (bounds[p] + 10.0, bounds[p + 1]);
        let serf_mean = mean_latency(&serf, from, to);
        let best = fixed
            .iter()
            .map(|(_, d)| mean_latency(d, from, to))
            .fold(f64::INFINITY, f64::min);
        assert!(
            serf_mean <= best * 1.05,
            "phase {p}: SERF {serf_mean} vs best fixed {best}"
        );
    }
    // Over the whole run SERF beats every fixed configuration.
    let serf_all = mean_latency(&serf, 0.0, f64::INFINITY);
    for (cfg, d) in &fixed {
        let m = mean_latency(d, 0.0, f64::INFINITY);
        assert!(serf_all <= m, "SERF {serf_all} vs fixed {cfg} {m}");
    }
}

/// `n` arrivals at 8/s evenly (from 0.01 s), polling after each; the switches made.
fn eight_a_second(s: &mut Scheduler, n: u32) -> Vec<Switch> {
    let mut switches = Vec::new();
    for k in 0..n {
        let t = secs(f64::from(k) / 8.0 + 0.01);
        s.record_arrival(t);
        switches.extend(s.poll(t));
    }
    switches
}
