//! Tests of the online profile: convergence, the memory in time, idle gaps and load bands.

use super::*;
use rand::{rngs::StdRng, Rng, SeedableRng};

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

fn two_core() -> Candidates {
    Candidates::two_core_from_times(0.20, 0.40, 0.12)
}

#[test]
fn estimate_converges_to_injected_service_times() {
    let mut p = OnlineProfile::new(&two_core(), OnlineOptions::default());
    let solo = Config::new(1, 1);
    let pair = Config::new(2, 1);
    // Offline until min_samples.
    assert_eq!(p.mu(pair).unwrap(), vec![5.0, 2.5]);
    let mut rng = StdRng::seed_from_u64(6);
    for k in 0..19 {
        assert!(p.record(
            secs(k as f64),
            solo,
            0.1 * rng.random_range(0.9..1.1),
            None,
            None
        ));
    }
    assert_eq!(p.mu(solo).unwrap(), vec![5.0]);
    assert_eq!(p.measured_tuples(), 0);
    // From the 20th sample the measurement overrides, and it converges to the injected 0.1 s.
    for k in 19..2000 {
        p.record(
            secs(k as f64),
            solo,
            0.1 * rng.random_range(0.9..1.1),
            None,
            None,
        );
    }
    let mu = p.mu(pair).unwrap();
    assert!((mu[0] - 10.0).abs() < 0.3, "{mu:?}");
    assert_eq!(mu[1], 2.5, "μ_2 was never measured");
    // A drift is followed: the service time doubles.
    for k in 0..200 {
        p.record(secs(2000.0 + k as f64), solo, 0.2, None, None);
    }
    assert!((p.mu(solo).unwrap()[0] - 5.0).abs() < 0.01);
    // The two-at-once tuple too, and it is shared with (2, 1) only.
    for k in 0..50 {
        p.record(secs(k as f64), pair, 0.25, None, None);
    }
    assert!((p.mu(pair).unwrap()[1] - 4.0).abs() < 1e-9);
    assert_eq!(p.measured_tuples(), 2);
    // Rejected samples.
    assert!(!p.record(secs(1.0), Config::new(3, 1), 0.1, None, None));
    assert!(!p.record(secs(1.0), solo, f64::NAN, None, None));
    assert!(!p.record(secs(1.0), solo, -1.0, None, None));
    assert_eq!(p.rejected(), 3);
    // Freshness.
    let stale = secs(300.0);
    assert!(p.is_fresh(solo, secs(2199.0), stale));
    assert!(!p.is_fresh(solo, secs(2600.0), stale));
    assert!(!p.is_fresh(Config::new(1, 2), secs(0.0), stale));
    let c = p.candidates_at(1.0, secs(2200.0));
    assert_eq!(c.as_slice().len(), 3);
    assert_eq!(c.get(pair).map(|c| c.mu.clone()), p.mu(pair));
}

#[test]
fn the_estimate_covers_the_last_memory_of_serving_not_the_last_samples() {
    // 240 requests/s of 5 ms calls, then a tenth of a second of 10 ms ones (a stall): the estimate
    // reflects ~10 s of serving, so the stall moves it by under 2 %. (A memory of 20 samples
    // moved it 64 % of the way to 10 ms.)
    let mut p = OnlineProfile::new(&two_core(), OnlineOptions::default());
    let one = Config::new(1, 2);
    let mut t = 0.0;
    for _ in 0..2400 {
        p.record(secs(t), one, 0.005, Some(240.0), None);
        t += 1.0 / 240.0;
    }
    for _ in 0..24 {
        p.record(secs(t), one, 0.010, Some(240.0), None);
        t += 1.0 / 240.0;
    }
    let blind = p.tuple(one).unwrap().measured_s;
    let near = p.near_load(one, 240.0, secs(t)).unwrap();
    for v in [blind, near] {
        assert!(v > 0.005 && v < 0.0051, "{v}");
    }
    // A lasting change is followed, at any rate: at one sample a second the 240/s history weighs
    // as much as the new samples for ~50 s (a load band of its own would not hold it at all).
    for _ in 0..100 {
        t += 1.0;
        p.record(secs(t), one, 0.010, Some(240.0), None);
    }
    let blind = p.tuple(one).unwrap().measured_s;
    assert!(blind > 0.0099, "{blind}");
}

#[test]
fn the_offline_idle_curve_goes_with_a_configuration_until_its_lone_tuple_is_measured_near_the_load()
{
    let curve = crate::idle::IdleCurve::new(
        0.12,
        &[crate::idle::IdlePoint {
            gap_s: 1.0,
            mean_service_s: 0.2,
            samples: 10,
            mean_path_s: None,
        }],
    )
    .unwrap();
    let offline = two_core().with_after_idle(|c| (c.threads == 2).then(|| curve.clone()));
    let mut p = OnlineProfile::new(&offline, OnlineOptions::default());
    let two_threads = Config::new(1, 2);
    let carries = |c: &Candidates, config: Config| c.get(config).unwrap().after_idle.is_some();
    assert!(carries(&p.offline_candidates(), two_threads));
    assert!(carries(&p.candidates_at(2.0, secs(0.0)), two_threads));
    assert!(!carries(
        &p.candidates_at(2.0, secs(0.0)),
        Config::new(1, 1)
    ));
    for k in 0..100 {
        p.record(secs(k as f64 * 0.1), two_threads, 0.15, Some(2.0), None);
    }
    // Measured at 2/s: the rate there holds that load's calls after gaps; elsewhere the curve stays.
    assert!(!carries(&p.candidates_at(2.0, secs(10.0)), two_threads));
    assert!(carries(&p.candidates_at(6.0, secs(10.0)), two_threads));
    assert!(carries(&p.offline_candidates(), two_threads));
    // With the curve, SERF predicts more than the back-to-back rate alone gives.
    let at6 = p.candidates_at(6.0, secs(10.0));
    let c = at6.get(two_threads).unwrap();
    let plain = crate::model::predict(1.0, &c.mu).unwrap().latency;
    assert!(
        c.estimate(1.0, crate::baseline::Predictor::Serf)
            .unwrap()
            .latency
            > plain
    );
    assert_eq!(
        c.estimate(1.0, crate::baseline::Predictor::MMInterf),
        crate::baseline::Predictor::MMInterf.estimate(1.0, &c.mu),
        "the baselines are the paper's, without the term"
    );
}

#[test]
fn a_call_after_an_idle_gap_counts_at_its_back_to_back_time_where_the_curve_adds_the_gap() {
    // (1, 2) takes 0.12 s back to back and 1.5 times that after 0.1 s idle or more.
    let curve = crate::idle::IdleCurve::from_times(0.12, &[(0.1, 0.18)]).unwrap();
    let offline = two_core().with_after_idle(|c| (c.threads == 2).then(|| curve.clone()));
    let mut p = OnlineProfile::new(&offline, OnlineOptions::default());
    let (solo, two_threads) = (Config::new(1, 1), Config::new(1, 2));
    // At 2/s every call starts after about half a second idle and takes 0.18 s.
    for k in 0..100 {
        let at = secs(k as f64 * 0.5);
        assert!(p.record(at, two_threads, 0.18, Some(2.0), Some(0.32)));
        // No curve for one thread: its calls count as they are.
        assert!(p.record(at, solo, 0.3, Some(2.0), Some(0.32)));
    }
    let now = secs(50.0);
    // Near 2/s the rate is the one served there, idle starts included, and no curve is added.
    let at2 = p.candidates_at(2.0, now);
    let c = at2.get(two_threads).unwrap();
    assert!((c.mu[0] - 1.0 / 0.18).abs() < 1e-9);
    assert!(c.after_idle.is_none());
    // Elsewhere the load-blind rate is back to back and the curve adds the gaps once.
    assert!((p.tuple(two_threads).unwrap().measured_s - 0.12).abs() < 1e-12);
    assert!((p.tuple(solo).unwrap().measured_s - 0.3).abs() < 1e-12);
    let at6 = p.candidates_at(6.0, now);
    let c = at6.get(two_threads).unwrap();
    assert!((c.mu[0] - 1.0 / 0.12).abs() < 1e-9);
    assert!(c.after_idle.is_some());
    // At a light load almost every call starts after a long gap: about the 0.18 s served.
    let light = c
        .estimate(0.01, crate::baseline::Predictor::Serf)
        .unwrap()
        .latency;
    assert!((light / 0.18 - 1.0).abs() < 0.01, "{light}");
    // A gap of zero or an unknown one leaves the time as it is.
    let mut q = OnlineProfile::new(&offline, OnlineOptions::default());
    for k in 0..30 {
        q.record(secs(k as f64), two_threads, 0.18, None, Some(0.0));
        q.record(secs(k as f64), two_threads, 0.18, None, None);
    }
    assert!((q.tuple(two_threads).unwrap().measured_s - 0.18).abs() < 1e-12);
}

#[test]
fn service_times_are_kept_apart_by_the_load_they_were_measured_at() {
    // (1, 2) is profiled at 0.12 s; at 2/s it takes 0.12 s, at 6/s (other threads busy) 0.25 s.
    let mut p = OnlineProfile::new(&two_core(), OnlineOptions::default());
    let (solo, two_threads, pair) = (Config::new(1, 1), Config::new(1, 2), Config::new(2, 1));
    for k in 0..100 {
        assert!(p.record(secs(k as f64 * 0.1), two_threads, 0.12, Some(2.0), None));
    }
    // Measured at 2/s only: no evidence at 6/s, and the load-blind rate stands there.
    assert!(p.is_evidenced(two_threads, 2.2, secs(10.0)));
    assert!(!p.is_evidenced(two_threads, 6.0, secs(10.0)));
    let at6 = p.candidates_at(6.0, secs(10.0));
    assert!((at6.get(two_threads).unwrap().mu[0] - 1.0 / 0.12).abs() < 1e-9);
    for k in 0..100 {
        p.record(
            secs(10.0 + k as f64 * 0.1),
            two_threads,
            0.25,
            Some(6.0),
            None,
        );
    }
    // Each load now has its own rate; the load-blind estimate has drifted to the recent one.
    let now = secs(20.0);
    assert!((p.near_load(two_threads, 2.0, now).unwrap() - 0.12).abs() < 1e-9);
    assert!((p.near_load(two_threads, 6.0, now).unwrap() - 0.25).abs() < 1e-9);
    assert!((p.candidates_at(2.0, now).get(two_threads).unwrap().mu[0] - 1.0 / 0.12).abs() < 1e-9);
    assert!((p.candidates_at(6.0, now).get(two_threads).unwrap().mu[0] - 4.0).abs() < 1e-9);
    // (10 s of memory: the 0.12 s samples of 10–20 s ago still weigh about a quarter.)
    let blind = p.tuple(two_threads).unwrap().measured_s;
    assert!(blind > 0.2 && blind < 0.25, "{blind}");
    // One band either side counts (1.25 wide): 6/s informs 7/s but not 10/s.
    assert!(p.near_load(two_threads, 7.0, now).is_some());
    assert!(p.near_load(two_threads, 10.0, now).is_none());
    // (2, 1) needs both of its tuples measured near the load to be evidenced.
    for k in 0..30 {
        p.record(secs(20.0 + k as f64 * 0.1), solo, 0.2, Some(6.0), None);
    }
    assert!(!p.is_evidenced(pair, 6.0, secs(23.0)));
    for k in 0..30 {
        p.record(secs(23.0 + k as f64 * 0.1), pair, 0.3, Some(6.0), None);
    }
    assert!(p.is_evidenced(pair, 6.0, secs(26.0)));
    // Stale bands are not used, and a sample with no load feeds the load-blind estimate only.
    assert!(p.near_load(two_threads, 2.0, secs(200.0)).is_none());
    let bands_before = p.band_estimates().count();
    assert!(p.record(secs(30.0), solo, 0.2, None, None));
    assert_eq!(p.band_estimates().count(), bands_before);
    // Without load bands every load sees the load-blind rate.
    let off = OnlineOptions {
        load_bands: None,
        ..Default::default()
    };
    let mut q = OnlineProfile::new(&two_core(), off);
    for k in 0..100 {
        q.record(secs(k as f64 * 0.1), two_threads, 0.12, Some(2.0), None);
    }
    assert!(q.near_load(two_threads, 2.0, secs(10.0)).is_none());
    assert_eq!(q.band_estimates().count(), 0);
}
