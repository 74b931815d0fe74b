//! The utilisation caps: the choice within them, the earned headroom of a configuration shown to
//! hold, its slow states, and the dead band.

use super::*;

#[test]
fn online_choice_stays_below_the_utilisation_cap() {
    let (a, b) = (Config::new(1, 2), Config::new(2, 1));
    let uncapped = SchedulerOptions {
        max_utilisation: 1.0,
        unproven_utilisation: None,
        ..SchedulerOptions::default()
    };
    // At 5.5/s the model ranks (1,2) first at ρ = 0.66; (2,1) is at ρ = 0.61.
    let d = Decider::new(two_core(), a, uncapped).unwrap();
    assert_eq!(d.target(5.5), a);
    // With the default caps (0.6 shown to hold, 0.5 not) neither qualifies, so the one with the
    // most capacity is chosen; at low load the cap changes nothing.
    let mut d = Decider::new(two_core(), a, SchedulerOptions::default()).unwrap();
    assert_eq!(d.target(5.5), b);
    assert_eq!(d.target(2.0), a);
    // Leaving a configuration beyond the cap needs no minimum gain, only the hold.
    let opts = SchedulerOptions {
        min_gain: 10.0,
        ..SchedulerOptions::default()
    };
    let mut strict = Decider::new(two_core(), a, opts).unwrap();
    assert_eq!(strict.decide(5.5), None);
    assert_eq!(strict.decide(5.5), Some((b, SwitchReason::Better)));
    // ... while below the cap the minimum gain still holds a switch back.
    assert_eq!(strict.decide(2.0), None);
    assert_eq!(strict.decide(2.0), None);
    assert_eq!(d.decide(5.5), None);
    assert_eq!(d.decide(5.5), Some((b, SwitchReason::Better)));
    // Both beyond the cap, the choice is by capacity and needs 5 % more of it: (2, 1) has 9 % more
    // than (1, 2) above; against a (1, 2) with 3 % less capacity than (2, 1) it stays, however long.
    let close = Candidates::two_core_from_times(0.20, 0.22, 1.0 / (9.09 / 1.03));
    let mut d = Decider::new(close.clone(), a, SchedulerOptions::default()).unwrap();
    assert_eq!(d.target(5.5), b);
    for _ in 0..5 {
        assert_eq!(d.decide(5.5), None);
    }
    // ... unless the margin is off, or (1, 2) cannot keep up.
    let no_margin = SchedulerOptions {
        min_capacity_gain: 0.0,
        ..SchedulerOptions::default()
    };
    let mut d = Decider::new(close.clone(), a, no_margin).unwrap();
    assert_eq!(d.decide(5.5), None);
    assert_eq!(d.decide(5.5), Some((b, SwitchReason::Better)));
    let mut d = Decider::new(close, a, SchedulerOptions::default()).unwrap();
    assert_eq!(d.decide(8.9), Some((b, SwitchReason::Overload)));
}

#[test]
fn the_default_cap_keeps_the_all_core_configuration_for_low_load() {
    // (1, 2) 3.5 ms a call (286/s), (2, 1) 6.2 ms with two running (322/s). Planned at 150/s,
    // (1, 2) is 53 % busy and predicted faster (5.4 against ≈ 6 ms): one cap of 0.6 keeps it when
    // it is running (the end of a low phase), the default (0.5, not shown to hold) moves to
    // (2, 1); at a low phase's 52/s (1, 2) is the choice either way.
    let cands = Candidates::two_core_from_times(0.0051, 0.0062, 0.0035);
    let (a, b) = (Config::new(1, 2), Config::new(2, 1));
    let d = Decider::new(cands.clone(), a, SchedulerOptions::default()).unwrap();
    assert_eq!(d.target(150.0), b);
    assert_eq!(d.target(52.0), a);
    let d = Decider::new(cands, a, cap_at_six_tenths()).unwrap();
    assert_eq!(d.target(150.0), a);
}

#[test]
fn a_configuration_shown_to_hold_at_the_load_earns_the_higher_cap() {
    // The same rates: planned at 150/s, (1, 2) is 52.5 % busy and predicted faster.
    let cands = Candidates::two_core_from_times(0.0051, 0.0062, 0.0035);
    let (a, b) = (Config::new(1, 2), Config::new(2, 1));
    // Both measured at this load, (1, 2)'s calls `slowdown` times its profiled time (the rates
    // stay as they are, to isolate the cap).
    let measured = |slowdown: f64| Evidence {
        slowdown: BTreeMap::from([(a, slowdown), (b, 1.0)]),
        ..Evidence::default()
    };
    // Known from the profile alone, (1, 2) has the unproven cap (0.5) and is left.
    let mut d = Decider::new(cands.clone(), a, SchedulerOptions::default()).unwrap();
    assert_eq!(d.target(150.0), b);
    // Measured within 1.3 × its profile here, it has 0.6: it stays, and is entered from (2, 1)
    // (52.5 % is within the entry cap, 0.6 · 0.95).
    d.set_candidates(cands.clone(), measured(1.1)).unwrap();
    assert_eq!(d.target(150.0), a);
    assert_eq!(d.decide(150.0), None);
    let mut from_b = Decider::new(cands.clone(), b, SchedulerOptions::default()).unwrap();
    from_b.set_candidates(cands.clone(), measured(1.1)).unwrap();
    assert_eq!(from_b.target(150.0), a);
    // Measured 1.4 × its profile (collapsing calls), it is held to 0.5 again.
    d.set_candidates(cands.clone(), measured(1.4)).unwrap();
    assert_eq!(d.target(150.0), b);
    // One cap for all (the YAML's `max_utilisation`) does not look at the evidence.
    let uniform = SchedulerOptions {
        max_utilisation: 0.5,
        unproven_utilisation: None,
        ..SchedulerOptions::default()
    };
    let mut d = Decider::new(cands.clone(), a, uniform).unwrap();
    d.set_candidates(cands, measured(1.1)).unwrap();
    assert_eq!(d.target(150.0), b);
}

#[test]
fn the_all_core_configuration_stays_at_moderate_load_while_its_calls_hold() {
    // Profiled at 3.0 ms, (1, 2) serves at 3.5 ms (1.17 ×): 47 % busy at the planned load on the
    // profile, 54 % as served; (2, 1) as profiled. Exploration off: this is about the cap.
    let profiled = Candidates::two_core_from_times(0.0051, 0.0062, 0.0030);
    let truth = Candidates::two_core_from_times(0.0051, 0.0062, 0.0035);
    let (a, b) = (Config::new(1, 2), Config::new(2, 1));
    let run = |options: SchedulerOptions| {
        let options = exploration_off(options);
        let mut s = Scheduler::new(profiled.clone(), b, options, secs(0.0)).unwrap();
        let mut rng = StdRng::seed_from_u64(5);
        let moves = serve(&mut s, &truth, 150.0, 0.0, 40.0, &mut rng);
        moves.iter().map(|w| w.to).collect::<Vec<_>>()
    };
    // Entered on the profile's word, (1, 2) then shows it holds and keeps the higher cap.
    assert_eq!(run(SchedulerOptions::default()), vec![a]);
    // With one cap of 0.5 it is left again once measured beyond it.
    let uniform = SchedulerOptions {
        max_utilisation: 0.5,
        unproven_utilisation: None,
        ..SchedulerOptions::default()
    };
    assert_eq!(run(uniform), vec![a, b]);
}

#[test]
fn the_cap_has_a_dead_band_so_a_wobbling_load_does_not_flap_across_it() {
    // (1, 2) ≈ 265/s, (2, 1) ≈ 277/s, and a planned load wobbling between 157 and 164/s.
    let cands = Candidates::two_core_from_times(0.0071, 0.00722, 1.0 / 265.0);
    let (a, b) = (Config::new(1, 2), Config::new(2, 1));
    let flaps = |opts: SchedulerOptions| {
        let mut d = Decider::new(cands.clone(), b, opts).unwrap();
        (0..20)
            .filter(|k| {
                let lambda = if (k / 4) % 2 == 0 { 157.5 } else { 164.0 };
                d.decide(lambda).is_some()
            })
            .count()
    };
    assert_eq!(flaps(cap_at_six_tenths()), 0);
    let no_band = SchedulerOptions {
        utilisation_band: 0.0,
        ..cap_at_six_tenths()
    };
    assert!(flaps(no_band) >= 4, "{}", flaps(no_band));
    // The current configuration stays within the band's reach; (1, 2) is still taken at a load
    // clearly within the cap.
    let d = Decider::new(cands, b, cap_at_six_tenths()).unwrap();
    assert_eq!(d.target(157.5), b);
    assert_eq!(d.target(140.0), a);
}

#[test]
fn a_configuration_whose_slowest_level_cannot_carry_the_load_earns_no_headroom() {
    // At 150/s (1, 2) is 52.5 % busy, measured holding (× 1.1), so it has the 0.6 cap and is the
    // choice — unless it has lately run at a level it could not carry 150/s at (1 / 7 ms = 143/s,
    // a two-thread slow state).
    let cands = Candidates::two_core_from_times(0.0051, 0.0062, 0.0035);
    let (a, b) = (Config::new(1, 2), Config::new(2, 1));
    let evidence = |slow_capacity: Option<f64>| Evidence {
        slowdown: BTreeMap::from([(a, 1.1), (b, 1.0)]),
        slow_capacity: Some(
            slow_capacity
                .map(|c| BTreeMap::from([(a, c)]))
                .unwrap_or_default(),
        ),
    };
    let mut d = Decider::new(cands.clone(), b, SchedulerOptions::default()).unwrap();
    // Slow levels not tracked: the holding test alone earns the higher cap.
    let untracked = Evidence {
        slow_capacity: None,
        ..evidence(None)
    };
    d.set_candidates(cands.clone(), untracked).unwrap();
    assert_eq!(d.target(150.0), a);
    assert!((d.earnable_cap(a, 150.0) - 0.6).abs() < 1e-12);
    // Tracked, but no level seen yet: nothing shows how slow it can run, and it earns nothing.
    d.set_candidates(cands.clone(), evidence(None)).unwrap();
    assert_eq!(d.target(150.0), b);
    assert!((d.earnable_cap(a, 150.0) - 0.5).abs() < 1e-12);
    // A slow level that still carries the load (1 / 4.5 ms = 222/s) changes nothing.
    d.set_candidates(cands.clone(), evidence(Some(222.0)))
        .unwrap();
    assert_eq!(d.target(150.0), a);
    // One that does not: the unproven cap, for the choice and for a trial.
    d.set_candidates(cands.clone(), evidence(Some(143.0)))
        .unwrap();
    assert_eq!(d.target(150.0), b);
    assert!((d.earnable_cap(a, 150.0) - 0.5).abs() < 1e-12);
    let standing = d.standings([a], 150.0)[0];
    assert!((standing.cap - 0.5).abs() < 1e-12);
    assert!(
        standing.to_string().ends_with(", 143/s at its slowest"),
        "{standing}"
    );
    // At low load the slow level carries it, and it keeps the higher cap.
    assert_eq!(d.target(52.0), a);
    assert!((d.earnable_cap(a, 52.0) - 0.6).abs() < 1e-12);
}

#[test]
fn a_configuration_never_seen_at_its_slowest_is_not_tried_beyond_the_unproven_cap() {
    // The same rates, served as profiled: at 150/s (2, 1) is 47 % busy and (1, 2), predicted
    // faster, 53 %. At a run's start (1, 2) has never run, so nothing shows how slow it can get:
    // it is neither chosen nor tried there (such a trial can collapse and leave a queue).
    let cands = Candidates::two_core_from_times(0.0051, 0.0062, 0.0035);
    let (a, b) = (Config::new(1, 2), Config::new(2, 1));
    let run = |slow_states: Option<SlowStateOptions>| {
        let opts = with_slow_states(slow_states);
        let mut rng = StdRng::seed_from_u64(11);
        let mut s = Scheduler::new(cands.clone(), b, opts, secs(0.0)).unwrap();
        let moves = serve(&mut s, &cands, 150.0, 0.0, 40.0, &mut rng);
        (s, moves)
    };
    let (s, moves) = run(Some(SlowStateOptions::default()));
    assert!(moves.is_empty(), "{moves:?}");
    assert_eq!(s.counters().explorations, 0);
    let standing = s.standings().into_iter().find(|w| w.config == a).unwrap();
    assert_eq!(standing.slow_capacity, None);
    assert!((standing.cap - 0.5).abs() < 1e-12, "{standing}");
    // The running one has shown its slowest level, and it carries the load: it earns 0.6.
    let running = s.standings().into_iter().find(|w| w.config == b).unwrap();
    assert!(
        running.slow_capacity.is_some_and(|c| c > 150.0),
        "{running}"
    );
    assert!((running.cap - 0.6).abs() < 1e-12, "{running}");
    // Without slow levels the trial is made, and the measured (1, 2) is kept.
    let (s, moves) = run(None);
    assert!(moves.iter().any(|w| w.to == a), "{moves:?}");
    assert_eq!(s.current(), a);
}

#[test]
fn a_slow_state_seen_at_low_load_keeps_the_all_core_configuration_out_at_moderate_load() {
    // Profiled: (1, 2) 2.64 ms, (2, 1) 4.27 / 5.72 ms. Served at 72/s, (1, 2) runs as profiled
    // but for four seconds at 6 ms (a two-thread slow state).
    // At 200/s it is 55 % busy on its rates, within the 0.6 cap of a configuration measured
    // holding, and measured there as fast as profiled it would be kept. But its slow level
    // carries 167/s: at 200/s that is a collapse waiting for the next slow spell.
    let (a, b) = (Config::new(1, 2), Config::new(2, 1));
    let profiled = Candidates::two_core_from_times(0.00427, 0.00572, 0.00264);
    let slow = Candidates::two_core_from_times(0.00427, 0.00572, 0.006);
    let run = |slow_states: Option<SlowStateOptions>| {
        let opts = with_slow_states(slow_states);
        let mut rng = StdRng::seed_from_u64(7);
        let mut s = Scheduler::new(profiled.clone(), a, opts, secs(0.0)).unwrap();
        serve(&mut s, &profiled, 72.0, 0.0, 20.0, &mut rng);
        serve(&mut s, &slow, 72.0, 20.0, 4.0, &mut rng);
        serve(&mut s, &profiled, 72.0, 24.0, 16.0, &mut rng);
        assert_eq!(s.current(), a, "the low phase ends in (1, 2)");
        let moderate = serve(&mut s, &profiled, 200.0, 40.0, 90.0, &mut rng);
        (s, moderate)
    };
    // The step up is no surge ((2, 1) has less capacity); the first trial of (2, 1) there
    // finds it within its cap and (1, 2) beyond its own, and it stays — (1, 2) is not tried
    // again at that load, though the profile ranks it faster (its retry comes after 60 s).
    let (s, moderate) = run(Some(SlowStateOptions::default()));
    let moves: Vec<_> = moderate.iter().map(|w| (w.to, w.reason)).collect();
    assert_eq!(moves, vec![(b, SwitchReason::Explore)], "{moderate:?}");
    let standing = s.standings().into_iter().find(|w| w.config == a).unwrap();
    let capacity = standing.slow_capacity.expect("a slow level");
    assert!((150.0..185.0).contains(&capacity), "{capacity}");
    // Without the rule the trial of (2, 1) ends back in (1, 2).
    let (s, moderate) = run(None);
    assert!(moderate.iter().any(|w| w.to == a), "{moderate:?}");
    assert_eq!(s.current(), a);
}
