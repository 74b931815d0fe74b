//! Exploration and trials: a move on the profile's word decided again once measured, trials per
//! load band, retries where the measurements contradict the profile, and trials over the cap.

use super::*;

#[test]
fn a_move_on_the_profiles_word_is_a_trial_decided_again_once_measured() {
    // The profile says (1, 2) takes 6 ms; serving, it takes 12 ms, which at 60/s (ρ 0.72)
    // queues far beyond (2, 1)'s 10–14 ms calls, measured here from the start.
    let offline = Candidates::two_core_from_times(0.010, 0.014, 0.006);
    let truth = Candidates::two_core_from_times(0.010, 0.014, 0.012);
    let (a, b) = (Config::new(1, 2), Config::new(2, 1));
    let first_two = |options: SchedulerOptions| {
        let mut s = Scheduler::new(offline.clone(), b, options, secs(0.0)).unwrap();
        let mut rng = StdRng::seed_from_u64(3);
        let switches = serve(&mut s, &truth, 60.0, 0.0, 20.0, &mut rng);
        assert!(switches.len() >= 2, "{switches:?}");
        (switches[0], switches[1])
    };
    // The move runs as a trial: back at the first update, with (1, 2) measured near this load.
    let (to, back) = first_two(SchedulerOptions {
        load_margin_sigmas: 0.0,
        ..Default::default()
    });
    assert_eq!((to.to, to.reason), (a, SwitchReason::Better));
    assert_eq!((back.to, back.reason), (b, SwitchReason::Explored));
    assert_eq!(back.at - to.at, secs(1.0));
    // Without exploration the same move stands until the next re-evaluation and its hold.
    let (to, back) = first_two(SchedulerOptions {
        load_margin_sigmas: 0.0,
        ..without_exploration()
    });
    assert_eq!((to.to, to.reason), (a, SwitchReason::Better));
    assert_eq!((back.to, back.reason), (b, SwitchReason::Better));
    assert!(back.at - to.at > secs(1.0), "{to:?} {back:?}");
}

#[test]
fn a_trial_at_moderate_load_does_not_stop_exploration_at_low_load() {
    // A run of moderate then low load in miniature: the profile has (1, 2) as slow as one thread
    // (5 ms); under moderate load it really is slower (6 ms), at low load it takes 3 ms. SERF starts
    // in (2, 1), explores (1, 2) under moderate load and goes back; at low load only another trial
    // finds (1, 2)'s 3 ms, and the trial at moderate load, seconds earlier, must not count.
    let profiled = Candidates::two_core_from_times(0.005, 0.0052, 0.005);
    let moderate = Candidates::two_core_from_times(0.005, 0.0052, 0.006);
    let low = Candidates::two_core_from_times(0.005, 0.0052, 0.003);
    let (a, b) = (Config::new(1, 2), Config::new(2, 1));
    let opts = SchedulerOptions {
        load_margin_sigmas: 0.0,
        ..cap_at_six_tenths()
    };
    let mut s = Scheduler::new(profiled, b, opts, secs(0.0)).unwrap();
    let mut rng = StdRng::seed_from_u64(5);
    let first = serve(&mut s, &moderate, 110.0, 0.0, 60.0, &mut rng);
    let reasons: Vec<_> = first.iter().map(|w| (w.to, w.reason)).collect();
    assert_eq!(
        reasons,
        vec![(a, SwitchReason::Explore), (b, SwitchReason::Explored)],
        "{first:?}"
    );
    let then = serve(&mut s, &low, 40.0, 60.0, 120.0, &mut rng);
    let trial = then
        .iter()
        .find(|w| w.to == a)
        .unwrap_or_else(|| panic!("(1, 2) not tried at low load: {then:?}"));
    assert_eq!(trial.reason, SwitchReason::Explore, "{then:?}");
    assert!(trial.at < secs(90.0), "{then:?}");
    assert_eq!(s.current(), a, "{then:?}");
    // At 40/s the profile has (2, 1) a little faster than (1, 2) (two slots queue less), so
    // running (1, 2) contradicts it and (2, 1) is tried again a minute later, and left again.
    let retry: Vec<_> = then.iter().map(|w| (w.to, w.reason)).skip(1).collect();
    assert_eq!(
        retry,
        vec![(b, SwitchReason::Explore), (a, SwitchReason::Explored)],
        "{then:?}"
    );
    assert_eq!(s.counters().explorations, 3);
}

#[test]
fn exploration_corrects_a_pessimistic_profile_once_and_then_stays() {
    // The offline profile says (2, 1) interferes badly; in truth it does not, and (1, 2) is a bit
    // slower than profiled. At 50/s (2, 1) is the best configuration, but nothing running (1, 2)
    // measures it: only an exploration finds out.
    let profiled = Candidates::two_core_from_times(0.020, 0.030, 0.012);
    let truth = Candidates::two_core_from_times(0.020, 0.020, 0.015);
    let a = Config::new(1, 2);
    let b = Config::new(2, 1);
    // Without the utilisation cap: the profiled (2, 1) is 75 % busy at 50/s, beyond it, and the
    // cap alone would leave (1, 2) once its measured ρ exceeds 0.6; this is about exploration.
    let opts = SchedulerOptions {
        load_margin_sigmas: 0.0,
        max_utilisation: 1.0,
        unproven_utilisation: None,
        ..Default::default()
    };
    let mut s = Scheduler::new(profiled.clone(), a, opts, secs(0.0)).unwrap();
    assert_eq!(s.decider().target(50.0), a);
    let mut rng = StdRng::seed_from_u64(2);
    let switches = serve(&mut s, &truth, 50.0, 0.0, 600.0, &mut rng);
    // Steady after 3 updates: explore (2, 1); one update later its tuples are measured, the
    // re-evaluation ranks it first, and it stays.
    assert_eq!(
        (switches[0].to, switches[0].reason),
        (b, SwitchReason::Explore)
    );
    assert_eq!(switches[0].at.as_secs(), 3);
    let ranked = ranking(s.decider().candidates(), 50.0, Predictor::Serf);
    assert_eq!(ranked[0], b);
    // No storm: (1, 1) is never tried (fully busy at 50/s). (1, 2), which the profile still
    // ranks first, is tried again (the measurements contradict the profile), a minute after it
    // was left, then 2 and 4 minutes after its last trial (doubling up to `stale_after`), one
    // update each, each followed by the way back: 4 s of 600 in the slower configuration.
    let c = s.counters();
    assert_eq!(c.explorations, 5, "{switches:?}");
    let mut expected = vec![(b, SwitchReason::Explore)];
    for _ in 0..4 {
        expected.extend([(a, SwitchReason::Explore), (b, SwitchReason::Explored)]);
    }
    let reasons: Vec<_> = switches.iter().map(|w| (w.to, w.reason)).collect();
    assert_eq!(reasons, expected);
    let trials: Vec<f64> = switches
        .iter()
        .filter(|w| w.to == a)
        .map(|w| w.at.as_secs_f64())
        .collect();
    let gaps: Vec<f64> = trials.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(trials[0] >= 63.0 && trials[0] < 66.0, "{trials:?}");
    for (gap, back_off) in gaps.iter().zip([60.0, 120.0, 240.0]) {
        assert!(*gap >= back_off && *gap < back_off + 5.0, "{trials:?}");
    }
    assert_eq!(s.current(), b);
    assert!(s.online().unwrap().is_fresh(b, secs(600.0), secs(300.0)));
    // Exploration off: the pessimistic profile keeps (1, 2) for ever.
    let opts = exploration_off(opts);
    let mut s = Scheduler::new(profiled, a, opts, secs(0.0)).unwrap();
    assert!(serve(&mut s, &truth, 50.0, 0.0, 60.0, &mut rng).is_empty());
}

#[test]
fn beyond_the_cap_a_rival_with_as_much_profiled_capacity_is_explored() {
    // The profile gives (1, 2) and (2, 1) the same capacity within 0.4 %, both beyond the cap at
    // the moderate load; served, (1, 2) runs 17 % slower than profiled and (2, 1) faster, which
    // only running (2, 1) can show.
    let one = Config::new(1, 1);
    let a = Config::new(1, 2);
    let b = Config::new(2, 1);
    let profiled = Candidates::new(vec![
        (one, vec![205.2]),
        (a, vec![317.9]),
        (b, vec![205.2, 158.4]),
    ]);
    let truth = Candidates::new(vec![
        (one, vec![205.2]),
        (a, vec![272.0]),
        (b, vec![240.0, 190.0]),
    ]);
    let opts = SchedulerOptions::default();
    let mut rng = StdRng::seed_from_u64(4);
    // Exploration off: (2, 1), judged with (1, 2)'s slowdown, keeps the profile's order, and the
    // decider keeps (1, 2), the larger capacity, for the whole minute at ρ ≈ 0.74.
    let mut s = Scheduler::new(profiled.clone(), a, exploration_off(opts), secs(0.0)).unwrap();
    let stuck = serve(&mut s, &truth, 200.0, 0.0, 60.0, &mut rng);
    assert!(stuck.is_empty(), "{stuck:?}");
    // With it, (2, 1) is tried as soon as the load is steady, measured within the cap, and kept.
    let mut s = Scheduler::new(profiled, a, opts, secs(0.0)).unwrap();
    let switches = serve(&mut s, &truth, 200.0, 0.0, 60.0, &mut rng);
    let reasons: Vec<_> = switches.iter().map(|w| (w.to, w.reason)).collect();
    assert_eq!(reasons, vec![(b, SwitchReason::Explore)], "{switches:?}");
    assert!(switches[0].at.as_secs() <= 5, "{switches:?}");
    assert_eq!(s.current(), b);
    assert_eq!(s.counters().explorations, 1);
}
