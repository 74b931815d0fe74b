//! Tests of the simulator: its queue against closed forms, admission order, switching and idle starts,
//! and the model against it over a grid of profiles and loads.

use super::*;
use crate::model::predict;

fn severe(c: usize) -> Vec<f64> {
    (1..=c)
        .map(|i| 1.0 / (1.0 + 0.5 * (i as f64 - 2.0).max(0.0)))
        .collect()
}
fn mild(c: usize) -> Vec<f64> {
    (1..=c)
        .map(|i| 1.0 / (1.0 + 0.03 * (i as f64 - 1.0)))
        .collect()
}

/// Two requests of one unit of work on μ = [1, 0.5], at 0 and at `second_at`, served to the end.
fn two_unit_requests(semantics: Semantics, second_at: f64) -> Vec<Completed> {
    let mut s = Station::new(&[1.0, 0.5], semantics).unwrap();
    let mut out = Vec::new();
    s.arrive(0.0, 1.0, &mut out);
    s.arrive(second_at, 1.0, &mut out);
    s.drain(&mut out);
    out
}

#[test]
fn station_semantics_by_hand() {
    // Two requests on μ = [1, 0.5] (dynamic): both start at 0 and run at 0.5 → both finish at 2.
    let out = two_unit_requests(Semantics::Dynamic, 0.0);
    assert_eq!(out.len(), 2);
    assert!(out.iter().all(|c| (c.finish - 2.0).abs() < 1e-12));
    // Second arrives at 0.5: first did 0.5 alone, then both at 0.5/s: first ends at 1.5; second has
    // 0.5 done, 0.5 left alone at 1/s → ends at 2.0.
    let out = two_unit_requests(Semantics::Dynamic, 0.5);
    assert!((out[0].finish - 1.5).abs() < 1e-12 && (out[1].finish - 2.0).abs() < 1e-12);
    // Frozen at start: the first keeps 1 s, the second takes 1/μ_2 = 2 s.
    let out = two_unit_requests(Semantics::FrozenAtStart, 0.5);
    assert!((out[0].finish - 1.0).abs() < 1e-12 && (out[1].finish - 2.5).abs() < 1e-12);
    // c = 1 queues: second waits until 1.0.
    let mut s = Station::new(&[1.0], Semantics::Dynamic).unwrap();
    let mut out = Vec::new();
    s.arrive(0.0, 1.0, &mut out);
    s.arrive(0.25, 1.0, &mut out);
    assert_eq!(s.in_system(), 2);
    s.drain(&mut out);
    assert!((out[1].waiting() - 0.75).abs() < 1e-12 && (out[1].latency() - 1.75).abs() < 1e-12);
}

#[test]
fn idle_starts_take_the_slot_free_longest_and_its_gap() {
    // S₀ rises from 1 s back to back to 2 s after a 1 s gap; no interference.
    let curve = IdleCurve::new(
        1.0,
        &[crate::idle::IdlePoint {
            gap_s: 1.0,
            mean_service_s: 2.0,
            samples: 1,
            mean_path_s: None,
        }],
    );
    let mut s = Station::new(&[1.0, 1.0], Semantics::Dynamic)
        .unwrap()
        .with_after_idle(curve.clone());
    let mut out = Vec::new();
    // At 0 both slots are fresh (gap 0): 1 s. At 0.5 the other slot has been free 0.5 s: 1.5 s.
    s.arrive(0.0, 1.0, &mut out);
    s.arrive(0.5, 1.0, &mut out);
    // At 3 the slots have been free since 1 and 2: the first, 2 s idle, takes it: 2 s.
    s.arrive(3.0, 1.0, &mut out);
    s.drain(&mut out);
    let finish: Vec<f64> = out.iter().map(|c| c.finish).collect();
    assert_eq!(finish, vec![1.0, 2.0, 5.0]);
    // One slot: a request that waited starts back to back on the slot just freed.
    let mut s = Station::new(&[1.0], Semantics::Dynamic)
        .unwrap()
        .with_after_idle(curve);
    let mut out = Vec::new();
    s.arrive(1.0, 1.0, &mut out);
    s.arrive(1.0, 1.0, &mut out);
    s.drain(&mut out);
    let finish: Vec<f64> = out.iter().map(|c| c.finish).collect();
    assert_eq!(finish, vec![3.0, 4.0]);
}

#[test]
fn station_switch_keeps_running_profiles() {
    let mut s = Station::new(&[1.0], Semantics::Dynamic).unwrap();
    let mut out = Vec::new();
    s.arrive(0.0, 1.0, &mut out);
    s.arrive(0.0, 1.0, &mut out);
    // Grow to c = 2 at t = 0.5 with a slower profile: the second starts now at rate μ'_2 = 0.25, while the
    // first (old profile, clamped to its μ_1 = 1) finishes its last 0.5 at rate 1.
    s.advance(0.5, &mut out);
    s.set_profile(&[0.5, 0.25]).unwrap();
    s.drain(&mut out);
    assert!((out[0].finish - 1.0).abs() < 1e-12);
    // Second: 0.5 s at 0.25 → 0.125 done, then alone at 0.5 → 0.875/0.5 = 1.75 s more.
    assert!((out[1].finish - 2.75).abs() < 1e-12, "{}", out[1].finish);
}

#[test]
fn simulator_matches_md1() {
    // The exact M/D/1 mean is the target; the CI must cover it.
    let st = simulate(&SimConfig::new(0.5, &[1.0], 100_000)).unwrap();
    let exact = 1.5;
    assert!(
        (st.mean_latency - exact).abs() < (3.0 * st.ci95_half_width).max(0.02),
        "{st:?}"
    );
    assert!((st.mean_service - 1.0).abs() < 1e-9);
    assert!(st.p50 <= st.p90 && st.p90 <= st.p95 && st.p95 <= st.p99);
    assert!(st.p50 >= 1.0);
}

/// The model against the simulator, sized for every test run: reduced grid (ρ ≤ 0.5), 200k requests,
/// 4% tolerance.
#[test]
fn model_vs_simulator_ci_grid() {
    let mut worst = 0.0_f64;
    for (c, mu) in [
        (1, vec![1.0]),
        (2, mild(2)),
        (4, severe(4)),
        (8, severe(8)),
        (4, mild(4)),
    ] {
        for rho in [0.2, 0.5] {
            let lambda = rho * c as f64 * mu[c - 1];
            let model = predict(lambda, &mu).unwrap().latency;
            for semantics in [Semantics::Dynamic, Semantics::FrozenAtStart] {
                let mut cfg = SimConfig::new(lambda, &mu, 200_000);
                cfg.semantics = semantics;
                cfg.seed = 42 + c as u64;
                let sim = simulate(&cfg).unwrap();
                let err = (model - sim.mean_latency) / sim.mean_latency;
                assert!(err.abs() < 0.04, "c={c} rho={rho} {semantics:?}: err {err}");
                worst = worst.max(err.abs());
            }
        }
    }
    assert!(worst > 0.0);
}

/// FIFO admission, at most `c` in service, per-request timestamps.
#[test]
fn admission_fifo_at_most_c() {
    let mut rng = StdRng::seed_from_u64(11);
    let exp = Exp::new(3.5).unwrap();
    let mut s = Station::new(&severe(4), Semantics::Dynamic).unwrap();
    let mut out = Vec::new();
    let mut t = 0.0;
    for _ in 0..5_000 {
        t += exp.sample(&mut rng);
        s.arrive(t, 1.0, &mut out);
    }
    s.drain(&mut out);
    assert_eq!(out.len(), 5_000);
    let mut by_arrival = out.clone();
    by_arrival.sort_by(|a, b| a.arrival.total_cmp(&b.arrival));
    // Starts are in arrival order (FCFS) and never before arrival.
    assert!(by_arrival.windows(2).all(|w| w[0].start <= w[1].start));
    assert!(out
        .iter()
        .all(|c| c.start >= c.arrival && c.finish > c.start));
    // At every start, at most c = 4 requests are in service.
    for c in &by_arrival {
        let busy = by_arrival
            .iter()
            .filter(|o| o.start <= c.start && o.finish > c.start)
            .count();
        assert!(busy <= 4, "{busy} in service at {}", c.start);
    }
    // Some requests did wait (the queue was used).
    assert!(out.iter().any(|c| c.waiting() > 0.0));
}

/// The full model-against-simulator grid: 3 seeds × 1M requests after 20k warm-up, tolerance 4%
/// ("start") and 2.5% ("dyn"). Minutes long:
/// `cargo test -p weir-serf --release -- --ignored model_vs_simulator_full_grid`.
#[test]
#[ignore]
fn model_vs_simulator_full_grid() {
    let none = |c: usize| vec![1.0; c];
    for c in [1usize, 2, 4, 8] {
        for mu in [none(c), mild(c), severe(c)] {
            for k in 1..=9 {
                let lambda = k as f64 / 10.0 * c as f64 * mu[c - 1];
                let model = predict(lambda, &mu).unwrap().latency;
                for (semantics, tol) in [
                    (Semantics::FrozenAtStart, 0.04),
                    (Semantics::Dynamic, 0.025),
                ] {
                    let sim: f64 = (0..3)
                        .map(|seed| {
                            let mut cfg = SimConfig::new(lambda, &mu, 1_000_000);
                            cfg.warmup = 20_000;
                            cfg.semantics = semantics;
                            cfg.seed = seed;
                            simulate(&cfg).unwrap().mean_latency
                        })
                        .sum::<f64>()
                        / 3.0;
                    let err = (model - sim) / sim;
                    assert!(
                        err.abs() < tol,
                        "c={c} mu={mu:?} rho=0.{k} {semantics:?}: {err}"
                    );
                }
            }
        }
    }
}

#[test]
fn simulator_is_seeded_and_checks_inputs() {
    let cfg = SimConfig::new(1.0, &[1.0, 0.8], 5_000);
    assert_eq!(simulate(&cfg).unwrap(), simulate(&cfg).unwrap());
    let mut other = cfg.clone();
    other.seed = 2;
    assert_ne!(simulate(&cfg).unwrap(), simulate(&other).unwrap());
    assert!(matches!(
        simulate(&SimConfig::new(0.0, &[1.0], 10)),
        Err(SimError::Input(_))
    ));
    assert!(matches!(
        simulate(&SimConfig::new(1.0, &[], 10)),
        Err(SimError::Input(_))
    ));
    assert_eq!(
        simulate(&SimConfig::new(0.5, &[1.0], 0)),
        Err(SimError::NoRequests)
    );
    let mut bad = cfg.clone();
    bad.work_scv = -1.0;
    assert_eq!(simulate(&bad), Err(SimError::InvalidScv(-1.0)));
    // Exponential work (SCV 1) on c = 1 gives M/M/1: W = 1/(μ − λ) = 2.
    let mut mm1 = SimConfig::new(0.5, &[1.0], 200_000);
    mm1.work_scv = 1.0;
    let st = simulate(&mm1).unwrap();
    assert!((st.mean_latency - 2.0).abs() < 0.08, "{st:?}");
}
