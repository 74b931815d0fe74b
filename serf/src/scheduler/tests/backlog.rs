//! The backlog guard: a queue that keeps growing bars the configuration the model prefers, a
//! configuration just picked is backed out sooner, and a busy but emptying queue moves nothing.

use super::*;

/// (1, 2) at 3.2 ms and (2, 1) at 5/5.8 ms: at 165/s the model ranks (1, 2) first, 55 % busy.
fn bistable() -> Candidates {
    Candidates::two_core_from_times(0.005, 0.0058, 0.0032)
}

/// A short queue that empties now and then: one reading in three (every tenth of a second) is 0,
/// the others 1.
fn emptying_now_and_then(t: f64) -> u64 {
    u64::from(!((t * 10.0).round() as u64).is_multiple_of(3))
}

/// A queue that empties now and then before `from`, and from then on grows by 20 a second
/// without emptying.
fn growing_from(from: f64) -> impl Fn(f64) -> Option<u64> {
    move |t: f64| {
        Some(if t < from {
            emptying_now_and_then(t)
        } else {
            ((t - from) * 20.0) as u64 + 1
        })
    }
}

/// Serves 165 requests/s for 12 s from `(2, 1)`, where the model prefers `(1, 2)` and moves
/// there ([`SwitchReason::Better`]), with the backlog guard `guard` and `queue`'s readings.
fn from_two_slots_at_165(guard: BacklogGuard, queue: impl Fn(f64) -> Option<u64>) -> Vec<Switch> {
    let opts = SchedulerOptions {
        backlog: Some(guard),
        ..without_exploration()
    };
    let mut s = Scheduler::new(bistable(), Config::new(2, 1), opts, secs(0.0)).unwrap();
    let mut rng = StdRng::seed_from_u64(9);
    serve_queued(&mut s, &bistable(), (165.0, 0.0, 12.0), &mut rng, queue)
}

/// The switch to `(1, 2)` [`from_two_slots_at_165`] makes on the model's word (its queue quiet).
fn picked_on_the_models_word(guard: BacklogGuard) -> Switch {
    let quiet = from_two_slots_at_165(guard, growing_from(f64::INFINITY));
    let picked = quiet.first().copied().expect("no switch");
    assert_eq!(
        (picked.to, picked.reason),
        (Config::new(1, 2), SwitchReason::Better)
    );
    picked
}

#[test]
fn a_queue_that_keeps_growing_bars_the_configuration_the_model_prefers() {
    let (a, b) = (Config::new(1, 2), Config::new(2, 1));
    let opts = without_exploration();
    let mut s = Scheduler::new(bistable(), a, opts, secs(0.0)).unwrap();
    assert_eq!(s.decider().target(170.0), a);
    let mut rng = StdRng::seed_from_u64(4);
    // The calls keep their profiled times (the collapse is outside what SERF measures); the queue
    // grows from 5 s to 8 s, then empties again.
    let queue = |t: f64| growing_from(5.0)(t).map(|q| if t < 8.0 { q } else { q % 2 });
    let switches = serve_queued(&mut s, &bistable(), (165.0, 0.0, 100.0), &mut rng, queue);
    let first = switches.first().copied().expect("no switch");
    assert_eq!(
        (first.from, first.to, first.reason),
        (a, b, SwitchReason::Backlog)
    );
    // The periods [5, 6) and [6, 7) grew: the update at 7 s moves.
    assert!(
        first.at >= secs(7.0) && first.at < secs(7.1),
        "{switches:?}"
    );
    assert_eq!(s.counters().backlogs, 1);
    // (1, 2) stays barred for 60 s although the model still ranks it first; then it is chosen again.
    let back = switches.get(1).copied().expect("never back to (1, 2)");
    assert_eq!(
        (back.to, back.reason),
        (a, SwitchReason::Better),
        "{switches:?}"
    );
    assert!(
        back.at >= secs(67.0) && back.at < secs(70.0),
        "{switches:?}"
    );
    assert_eq!(switches.len(), 2, "{switches:?}");
}

/// Seconds after `at` of the second of `switches`, which must back out of the configuration just
/// picked: `from → to` for the backlog.
fn backed_out_after(switches: &[Switch], (from, to): (Config, Config), at: f64) -> f64 {
    let back = switches.get(1).copied().expect("never backed out");
    assert_eq!(
        (back.from, back.to, back.reason),
        (from, to, SwitchReason::Backlog),
        "{switches:?}"
    );
    back.at.as_secs_f64() - at
}

#[test]
fn a_configuration_the_model_just_picked_is_backed_out_after_one_period_of_growth() {
    let (a, b) = (Config::new(1, 2), Config::new(2, 1));
    let run = |probation_periods: u32, grows_from: f64| {
        let guard = BacklogGuard {
            probation_periods,
            ..BacklogGuard::default()
        };
        from_two_slots_at_165(guard, growing_from(grows_from))
    };
    let picked = picked_on_the_models_word(BacklogGuard::default());
    let at = picked.at.as_secs_f64();
    // The queue grows from just after that switch: on probation, the first period of growth
    // moves back; with probation off, the second.
    for (probation, periods) in [(3, 1.0), (0, 2.0)] {
        let switches = run(probation, at + 0.05);
        assert_eq!(switches.first().copied(), Some(picked), "{switches:?}");
        let after = backed_out_after(&switches, (a, b), at);
        assert!(
            after >= periods - 0.01 && after < periods + 0.1,
            "probation {probation}: backed out {after:.2} s after the switch"
        );
    }
    // Past the probation, one period of growth is not enough.
    let late = run(3, at + 4.05);
    assert!(
        late.iter()
            .filter(|w| w.reason == SwitchReason::Backlog)
            .all(|w| w.at.as_secs_f64() >= at + 6.0 - 0.01),
        "{late:?}"
    );
}

#[test]
fn a_configuration_the_model_just_picked_is_backed_out_when_it_queues_beyond_the_prediction() {
    let (a, b) = (Config::new(1, 2), Config::new(2, 1));
    let run = |margin: f64, from: f64| {
        let guard = BacklogGuard {
            probation_waiting_margin: margin,
            ..BacklogGuard::default()
        };
        // From `from` on, the queue swings between 0 and 10 (mean 5, emptying: it never grows
        // for the guard) where the model expects about 0.3 waiting for (1, 2) at 165/s; it
        // starts empty (a period that begins beyond the bound holds an older backlog).
        let queue = move |t: f64| {
            Some(if t < from {
                emptying_now_and_then(t)
            } else if (((t - from) * 10.0).floor() as u64).is_multiple_of(2) {
                0
            } else {
                10
            })
        };
        from_two_slots_at_165(guard, queue)
    };
    let picked = picked_on_the_models_word(BacklogGuard::default());
    let at = picked.at.as_secs_f64();
    let checked = run(2.0, at + 0.05);
    let after = backed_out_after(&checked, (a, b), at);
    assert!(after > 0.99 && after < 1.1, "{after:.2} s after the switch");
    // With the check off, an emptying queue never moves it; past the probation neither.
    let off = run(0.0, at + 0.05);
    assert!(
        off.iter().all(|w| w.reason != SwitchReason::Backlog),
        "{off:?}"
    );
    let late = run(2.0, at + 4.05);
    assert!(
        late.iter().all(|w| w.reason != SwitchReason::Backlog),
        "{late:?}"
    );
    // A backlog left by the configuration before, worked off from 40 waiting at 30 a second,
    // is not the new one's waiting: no back-out.
    let draining = move |t: f64| {
        Some(if t < at + 0.05 {
            emptying_now_and_then(t)
        } else {
            (40.0 - (t - at - 0.05) * 30.0).max(0.0) as u64
        })
    };
    let kept = from_two_slots_at_165(BacklogGuard::default(), draining);
    assert!(
        kept.iter().all(|w| w.reason != SwitchReason::Backlog),
        "{kept:?}"
    );
}

#[test]
fn a_queue_that_empties_or_stops_growing_or_has_nowhere_better_to_go_moves_nothing() {
    let a = Config::new(1, 2);
    let run_with = |opts: SchedulerOptions, lambda: f64, queue: &dyn Fn(f64) -> Option<u64>| {
        let mut s = Scheduler::new(bistable(), a, opts, secs(0.0)).unwrap();
        let mut rng = StdRng::seed_from_u64(6);
        serve_queued(&mut s, &bistable(), (lambda, 0.0, 20.0), &mut rng, queue)
    };
    let run = |lambda: f64, queue: &dyn Fn(f64) -> Option<u64>| {
        run_with(without_exploration(), lambda, queue)
    };
    // Long but emptying once a period: a busy queue, not a growing one.
    let emptying = |t: f64| {
        Some(if ((t * 10.0).round() as u64).is_multiple_of(10) {
            0
        } else {
            30
        })
    };
    assert!(run(165.0, &emptying).is_empty());
    // Never empty but not growing.
    assert!(run(165.0, &|_| Some(40)).is_empty());
    // Growing only for one period at a time.
    let one = |t: f64| {
        Some(if (t as u64).is_multiple_of(2) {
            (t.fract() * 50.0) as u64 + 1
        } else {
            0
        })
    };
    assert!(run(165.0, &one).is_empty());
    // A true overload: at 400/s no configuration keeps up, so there is nowhere better to go (the
    // model's own Overload rule has already moved to the largest capacity).
    let overload = run(400.0, &growing_from(2.0));
    assert!(
        overload.iter().all(|w| w.reason != SwitchReason::Backlog),
        "{overload:?}"
    );
    // And with the guard off, a growing queue moves nothing.
    let off_opts = SchedulerOptions {
        backlog: None,
        ..without_exploration()
    };
    let off = run_with(off_opts, 165.0, &growing_from(2.0));
    assert!(off.is_empty(), "{off:?}");
}
