//! Surges: a step up acted on before the next update, none raised by a steady load or a step down,
//! and a surge judged with the rates measured at its load.

use super::*;

#[test]
fn a_surge_of_load_switches_towards_capacity_before_the_next_update() {
    let (low, moderate) = (Config::new(1, 2), Config::new(2, 1));
    let steps = [(25.8, 20.0), (142.1, 5.0)];
    let options = SchedulerOptions {
        online: None,
        ..SchedulerOptions::default()
    };
    let mut s = Scheduler::new(squeezenet_like(), low, options, secs(0.0)).unwrap();
    let switches = ticked(&mut s, &steps, 0.1, 11);
    // Low load keeps (1, 2); the step at 20 s is acted on within 0.5 s, not at the 21 s update.
    let first = switches.first().expect("a switch after the step");
    assert_eq!((first.from, first.to), (low, moderate), "{switches:?}");
    assert_eq!(first.reason, SwitchReason::Surge);
    assert!(first.at > secs(20.0) && first.at <= secs(20.5), "{first:?}");
    assert!(first.lambda > 100.0, "{first:?}");
    // The updates after it confirm (2, 1): no switch back.
    assert_eq!(switches.len(), 1, "{switches:?}");
    // Without surges the same arrivals switch at an update and after the hold.
    let off = SchedulerOptions {
        surge_sigmas: 0.0,
        ..options
    };
    let mut s = Scheduler::new(squeezenet_like(), low, off, secs(0.0)).unwrap();
    let switches = ticked(&mut s, &steps, 0.1, 11);
    let first = switches.first().expect("a switch after the step");
    assert_ne!(first.reason, SwitchReason::Surge);
    assert!(first.at >= secs(21.0), "{first:?}");
}

#[test]
fn a_steady_load_raises_no_surge_and_a_step_down_waits_for_the_update() {
    let options = SchedulerOptions {
        online: None,
        ..SchedulerOptions::default()
    };
    // 10 minutes of steady Poisson load near (1, 2)'s utilisation cap, tested ten times a second.
    for (seed, rate) in [(1, 60.0), (2, 90.0), (3, 140.0)] {
        let mut s =
            Scheduler::new(squeezenet_like(), Config::new(1, 2), options, secs(0.0)).unwrap();
        let switches = ticked(&mut s, &[(rate, 600.0)], 0.1, seed);
        assert!(
            switches.iter().all(|w| w.reason != SwitchReason::Surge),
            "{rate}/s: {switches:?}"
        );
    }
    // A drop from moderate to low load is no surge: (2, 1) stays until an update decides.
    let mut s = Scheduler::new(squeezenet_like(), Config::new(2, 1), options, secs(0.0)).unwrap();
    let switches = ticked(&mut s, &[(142.1, 10.0), (25.8, 10.0)], 0.1, 4);
    assert!(
        switches.iter().all(|w| w.reason != SwitchReason::Surge),
        "{switches:?}"
    );
    // A surge that leaves the current configuration within the cap switches nothing.
    let mut d = Decider::new(
        squeezenet_like(),
        Config::new(2, 1),
        SchedulerOptions::default(),
    )
    .unwrap();
    assert_eq!(d.surge(120.0), None);
    assert_eq!(d.current(), Config::new(2, 1));
    // ... nor one where no configuration has more capacity than the current one.
    assert_eq!(d.surge(240.0), None);
}

#[test]
fn a_surge_is_judged_with_the_rates_measured_at_its_load() {
    // The profile, then the calls each configuration makes at moderate and at low load. At low
    // load (2, 1)'s calls are slow (7.9 ms), so with the low band's rates no configuration keeps
    // (1, 2)'s surge within the cap, the one with the most capacity is (1, 2) itself, and the step
    // back to moderate load would raise no surge: the first move would come with the re-evaluation
    // 2 s later. Judged with the rates measured at the surge's load, (2, 1) is taken at once.
    let profiled = Candidates::two_core_from_times(0.005708, 0.005414, 0.003314);
    let moderate = Candidates::two_core_from_times(0.0052, 0.0055, 0.00505);
    let low = Candidates::two_core_from_times(0.0065, 0.0079, 0.0036);
    let (a, b) = (Config::new(1, 2), Config::new(2, 1));
    for seed in 0..3 {
        let options = SchedulerOptions::default();
        let mut s = Scheduler::new(profiled.clone(), b, options, secs(0.0)).unwrap();
        let mut rng = StdRng::seed_from_u64(seed);
        serve(&mut s, &moderate, 173.0, 0.0, 60.0, &mut rng);
        serve(&mut s, &low, 63.0, 60.0, 60.0, &mut rng);
        assert_eq!(s.current(), a, "low load runs (1, 2)");
        let back = serve(&mut s, &moderate, 173.0, 120.0, 10.0, &mut rng);
        let first = back.first().expect("a switch after the step up");
        assert_eq!((first.from, first.to), (a, b), "{back:?}");
        assert_eq!(first.reason, SwitchReason::Surge, "{back:?}");
        assert!(first.at < secs(120.5), "{first:?}");
    }
}
