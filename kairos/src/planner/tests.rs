use super::*;
use crate::profile::paper::{paper_instance_types, PaperModel, PAPER_BUDGET_PER_HOUR};

fn prices() -> Vec<f64> {
    paper_instance_types()
        .iter()
        .map(|t| t.cost_per_hour)
        .collect()
}

fn ub(m: PaperModel, c: [u32; 4]) -> f64 {
    upper_bound(&m.throughput_profile(), &c).unwrap()
}

#[test]
fn enumeration_counts() {
    let at = |b: f64| {
        let all = enumerate(&prices(), b);
        let based = all.iter().filter(|c| c[0] >= 1).count();
        assert!(all.iter().all(|c| c
            .iter()
            .zip(prices())
            .map(|(n, p)| f64::from(*n) * p)
            .sum::<f64>()
            <= b + 1e-9));
        (all.len(), based)
    };
    assert_eq!(at(2.5), (696, 331));
    assert_eq!(at(5.0), (7405, 4996));
}

#[test]
fn homogeneous_pool_and_scale() {
    let (c, s) = homogeneous(&PaperModel::Rm2.profile(), 2.5);
    assert_eq!(c, vec![4, 0, 0, 0]);
    assert!((s - 2.5 / 2.104).abs() < 1e-12 && (s - 1.188).abs() < 1e-3);
}

#[test]
fn golden_upper_bounds() {
    let cases = [
        (PaperModel::Rm2, [1, 0, 13, 0], 144.21),
        (PaperModel::Rm2, [2, 0, 9, 0], 119.50),
        (PaperModel::Ncf, [1, 0, 13, 0], 7180.62),
        (PaperModel::Wnd, [1, 0, 13, 0], 1555.86),
        (PaperModel::MtWnd, [2, 0, 9, 0], 1061.34),
        (PaperModel::MtWnd, [1, 1, 10, 0], 1035.80),
        (PaperModel::Dien, [2, 0, 9, 0], 732.97),
    ];
    for (m, c, want) in cases {
        let got = ub(m, c);
        assert!((got - want).abs() < 0.01, "{m:?} {c:?}: {got} vs {want}");
    }
    assert_eq!(ub(PaperModel::Rm2, [3, 0, 0, 0]), 3.0 * 15.04);
    assert_eq!(
        upper_bound(&PaperModel::Rm2.throughput_profile(), &[0, 1, 1, 1]),
        None
    );
}

#[test]
fn rm2_upper_bound() {
    // Golden value: RM2 (1,0,13,0) → 144.21.
    assert!((ub(PaperModel::Rm2, [1, 0, 13, 0]) - 144.21).abs() < 0.005);
}

#[test]
fn bound_continuous_at_case_boundary_and_monotone_in_base() {
    // Continuity: both branches agree where Θ = n_b·Q_b^L. Solve for the real n_a that hits it.
    let tp = PaperModel::Rm2.throughput_profile();
    let a = tp.aux[2].as_ref().unwrap();
    let (p, r, qa, qb) = (
        a.small_ratio,
        a.time_ratio,
        a.qps_below[&a.vio_batch],
        tp.base_qps,
    );
    let base_large = qb * (1.0 - p) / (1.0 - r);
    let na = base_large * p / ((1.0 - p) * qa);
    let theta = (1.0 - p) / p * na * qa;
    let case1 = base_large / (1.0 - p);
    let case2 = na * qa / p + (1.0 - theta / base_large) * qb;
    assert!((case1 - case2).abs() < 1e-9 * case1);
    // Monotone when a base instance is added, for every model and every configuration.
    for m in PaperModel::ALL {
        let tp = m.throughput_profile();
        for c in enumerate(&prices(), 5.0).into_iter().filter(|c| c[0] >= 1) {
            let mut more = c.clone();
            more[0] += 1;
            assert!(
                upper_bound(&tp, &more).unwrap() >= upper_bound(&tp, &c).unwrap() - 1e-9,
                "{m:?} {c:?}"
            );
        }
    }
}

/// Golden values: the UB top-10 per model at $2.5/h, as (config, UB).
fn golden_top10(m: PaperModel) -> Vec<([u32; 4], f64)> {
    match m {
        PaperModel::Ncf => vec![
            ([1, 0, 13, 0], 7180.62),
            ([1, 0, 12, 1], 7021.31),
            ([1, 0, 11, 2], 6862.00),
            ([1, 0, 12, 0], 6694.52),
            ([1, 0, 11, 1], 6535.21),
            ([1, 0, 10, 2], 6375.90),
            ([1, 1, 10, 0], 6345.23),
            ([1, 0, 9, 3], 6216.59),
            ([1, 0, 11, 0], 6208.42),
            ([1, 1, 9, 1], 6178.31),
        ],
        PaperModel::Rm2 => vec![
            ([1, 0, 13, 0], 144.21),
            ([1, 0, 12, 1], 138.89),
            ([1, 0, 12, 0], 134.27),
            ([1, 0, 11, 2], 133.57),
            ([1, 0, 11, 1], 128.95),
            ([1, 1, 10, 0], 125.03),
            ([1, 0, 11, 0], 124.34),
            ([1, 0, 10, 2], 123.64),
            ([1, 1, 9, 1], 119.67),
            ([2, 0, 9, 0], 119.50),
        ],
        PaperModel::Wnd => vec![
            ([1, 0, 13, 0], 1555.86),
            ([1, 0, 12, 1], 1506.50),
            ([1, 0, 11, 2], 1457.13),
            ([1, 0, 12, 0], 1455.12),
            ([1, 0, 11, 1], 1405.75),
            ([2, 0, 9, 0], 1399.06),
            ([1, 1, 10, 0], 1356.41),
            ([1, 0, 10, 2], 1356.39),
            ([1, 0, 11, 0], 1354.37),
            ([2, 0, 8, 1], 1349.70),
        ],
        PaperModel::MtWnd => vec![
            ([2, 0, 9, 0], 1061.34),
            ([1, 1, 10, 0], 1035.80),
            ([2, 0, 8, 1], 1021.59),
            ([1, 1, 9, 1], 997.74),
            ([3, 0, 6, 0], 986.49),
            ([2, 0, 7, 2], 981.85),
            ([2, 0, 8, 0], 980.60),
            ([1, 1, 8, 2], 959.68),
            ([1, 1, 9, 0], 958.36),
            ([3, 0, 5, 1], 946.75),
        ],
        PaperModel::Dien => vec![
            ([2, 0, 9, 0], 732.97),
            ([2, 0, 8, 1], 705.80),
            ([2, 0, 7, 2], 678.64),
            ([2, 0, 8, 0], 674.98),
            ([3, 0, 6, 0], 664.58),
            ([2, 0, 6, 3], 651.48),
            ([2, 0, 7, 1], 647.82),
            ([3, 0, 5, 1], 637.42),
            ([2, 0, 5, 4], 624.32),
            ([2, 0, 6, 2], 620.66),
        ],
    }
}

#[test]
fn top10_rankings_match_the_golden_values() {
    for m in PaperModel::ALL {
        let ranked = rank(&m.profile(), &m.throughput_profile(), PAPER_BUDGET_PER_HOUR);
        assert_eq!(ranked.len(), 331);
        for (i, (c, u)) in golden_top10(m).into_iter().enumerate() {
            assert_eq!(ranked[i].counts, c.to_vec(), "{m:?} rank {}", i + 1);
            assert!(
                (ranked[i].upper_bound - u).abs() < 0.01,
                "{m:?} rank {}",
                i + 1
            );
        }
    }
}

#[test]
fn picks_per_model_at_2_5_per_hour() {
    let want = [
        (PaperModel::Ncf, [1, 0, 13, 0], PickRule::TopOne),
        (PaperModel::Rm2, [1, 0, 13, 0], PickRule::TopOne),
        (PaperModel::Wnd, [1, 0, 13, 0], PickRule::TopOne),
        (PaperModel::Dien, [2, 0, 9, 0], PickRule::TopOne),
        (PaperModel::MtWnd, [2, 0, 8, 1], PickRule::Centroid),
    ];
    for (m, c, rule) in want {
        let r = plan(&m.profile(), &m.throughput_profile(), PAPER_BUDGET_PER_HOUR).unwrap();
        assert_eq!(
            (r.chosen().counts.clone(), r.rule),
            (c.to_vec(), rule),
            "{m:?}"
        );
    }
}

#[test]
fn ranking_is_fast_enough_to_be_free() {
    // Counted, not timed: ~1000 configurations are ranked by closed-form bounds only.
    let r = rank(
        &PaperModel::Rm2.profile(),
        &PaperModel::Rm2.throughput_profile(),
        5.0,
    );
    assert_eq!(r.len(), 4996);
    assert!(r.windows(2).all(|w| w[0].upper_bound >= w[1].upper_bound));
}

/// A monotone evaluator below the bound: 0.8 × the least bound over a configuration's
/// super-configurations. Both Kairos+ assumptions hold, so it must find the exhaustive optimum.
fn monotone_eval(ranked: &[Candidate]) -> impl Fn(&[u32]) -> f64 + '_ {
    move |c: &[u32]| {
        0.8 * ranked
            .iter()
            .filter(|o| o.counts.iter().zip(c).all(|(a, b)| a >= b))
            .map(|o| o.upper_bound)
            .fold(f64::INFINITY, f64::min)
    }
}

#[test]
fn kairos_plus_finds_optimum_and_never_evaluates_pruned() {
    for (m, budget) in PaperModel::ALL.iter().flat_map(|&m| [(m, 2.5), (m, 5.0)]) {
        let ranked = rank(&m.profile(), &m.throughput_profile(), budget);
        let eval = monotone_eval(&ranked);
        let out = kairos_plus(&ranked, &eval).unwrap();
        if budget == 2.5 {
            // Exhaustive check on the 331 configurations (quadratic evaluator: small space).
            let exhaustive = ranked
                .iter()
                .map(|c| eval(&c.counts))
                .fold(f64::NEG_INFINITY, f64::max);
            assert!((out.best_qps - exhaustive).abs() < 1e-9, "{m:?}");
            continue;
        }
        // No evaluated configuration is a sub-configuration of an earlier evaluated one.
        for (x, &(i, _)) in out.evaluated.iter().enumerate() {
            for &(j, _) in &out.evaluated[..x] {
                assert!(!ranked[i]
                    .counts
                    .iter()
                    .zip(&ranked[j].counts)
                    .all(|(a, b)| a <= b));
            }
        }
        // Every configuration not evaluated was pruned by bound or by a super-configuration.
        let evaluated: Vec<usize> = out.evaluated.iter().map(|e| e.0).collect();
        for (i, c) in ranked
            .iter()
            .enumerate()
            .filter(|(i, _)| !evaluated.contains(i))
        {
            let by_sub = evaluated
                .iter()
                .any(|&j| c.counts.iter().zip(&ranked[j].counts).all(|(a, b)| a <= b));
            assert!(by_sub || c.upper_bound <= out.best_qps, "{m:?} {i}");
        }
        // Under 3 % of the ~5000 configurations at $5/h (paper: < 1 % with real throughput,
        // which sits closer to the bound than this deliberately pessimistic evaluator).
        assert!(
            out.evaluated.len() * 100 < 3 * ranked.len(),
            "{m:?}: {}",
            out.evaluated.len()
        );
    }
}

#[test]
fn random_search_shares_pruning_and_needs_more_evaluations() {
    let m = PaperModel::Dien;
    let ranked = rank(&m.profile(), &m.throughput_profile(), 2.5);
    let eval = monotone_eval(&ranked);
    let plus = kairos_plus(&ranked, &eval).unwrap();
    let mut total = 0;
    for seed in 0..10 {
        let rs = random_search(&ranked, seed, usize::MAX, &eval);
        // Same sub-configuration pruning: nothing evaluated is a sub-configuration of an earlier one.
        for (x, &(i, _)) in rs.iter().enumerate() {
            for &(j, _) in &rs[..x] {
                assert!(!ranked[i]
                    .counts
                    .iter()
                    .zip(&ranked[j].counts)
                    .all(|(a, b)| a <= b));
            }
        }
        total += evaluations_to_reach(&rs, plus.best_qps).unwrap();
    }
    // Kairos+ reaches the optimum in fewer evaluations than random search does on average.
    let mean = total as f64 / 10.0;
    let k = evaluations_to_reach(&plus.evaluated, plus.best_qps).unwrap();
    assert!((k as f64) < mean, "Kairos+ {k} vs random {mean}");
    assert_eq!(random_search(&ranked, 1, 3, &eval).len(), 3);
    // Simulated annealing: same pruning, reaches the optimum eventually, slower than Kairos+.
    let mut total = 0;
    for seed in 0..10 {
        let sa = simulated_annealing(&ranked, seed, usize::MAX, &eval);
        for (x, &(i, _)) in sa.iter().enumerate() {
            for &(j, _) in &sa[..x] {
                assert!(!ranked[i]
                    .counts
                    .iter()
                    .zip(&ranked[j].counts)
                    .all(|(a, b)| a <= b));
            }
        }
        total += evaluations_to_reach(&sa, plus.best_qps).unwrap();
    }
    assert!(
        (k as f64) < total as f64 / 10.0,
        "Kairos+ {k} vs annealing {}",
        total as f64 / 10.0
    );
    assert_eq!(simulated_annealing(&ranked, 1, 4, &eval).len(), 4);
}

#[test]
fn replan_on_distribution_change_needs_no_evaluation() {
    use crate::profile::throughput::ThroughputProfile;
    use crate::workload::BatchWindow;
    let profile = PaperModel::Rm2.profile();
    let mut window = BatchWindow::new(BatchWindow::PAPER_CAPACITY);
    for b in BatchDist::Trace.sample_many(10_000, 1) {
        window.push(b);
    }
    let before = ThroughputProfile::derive(&profile, &window.batches()).unwrap();
    let plan_before = plan(&profile, &before, 2.5).unwrap();
    for b in BatchDist::PAPER_GAUSSIAN.sample_many(10_000, 2) {
        window.push(b);
    }
    let after = ThroughputProfile::derive(&profile, &window.batches()).unwrap();
    // N(300, 100): heavier on average (lower base throughput) but with a lighter tail, so a
    // larger share of queries fits under the r5n limit.
    assert!(after.base_qps < before.base_qps * 0.9);
    let (pb, pa) = (
        before.aux[2].as_ref().unwrap().small_ratio,
        after.aux[2].as_ref().unwrap().small_ratio,
    );
    assert!(pa > pb, "{pa} {pb}");
    // plan() takes no evaluator: the new pick comes with zero online evaluations.
    let plan_after = plan(&profile, &after, 2.5).unwrap();
    assert!(plan_after.chosen().upper_bound < plan_before.chosen().upper_bound);
    assert!(plan_after.chosen().cost_per_hour <= 2.5 + 1e-9);
}

#[test]
fn executors_fragment_parses_as_the_engine_spec_shape() {
    // engine::spec::RemoteExecutorSpec: `name: String`, `labels: BTreeMap<String, String>`.
    #[derive(serde::Deserialize)]
    struct Doc {
        executors: Vec<Exec>,
    }
    #[derive(serde::Deserialize)]
    struct Exec {
        name: String,
        labels: std::collections::BTreeMap<String, String>,
    }
    let p = PaperModel::MtWnd.profile();
    let doc: Doc = serde_saphyr::from_str(&executors_yaml(&p, &[2, 0, 8, 1])).unwrap();
    assert_eq!(doc.executors.len(), 11);
    assert_eq!(doc.executors[10].name, "t3-xlarge-0");
    assert_eq!(doc.executors[10].labels["instance_type"], "t3.xlarge");
    assert_eq!(doc.executors[10].labels["cost_per_hour"], "0.1664");
}

#[test]
fn plan_report_renders_yaml_and_ranking() {
    let text = PaperModel::Rm2.profile().to_yaml();
    let r = plan_report(&text, 2.5, None, None).unwrap();
    assert_eq!(r.chosen().counts, vec![1, 0, 13, 0]);
    assert_eq!(r.executors_yaml.matches("- name:").count(), 14);
    assert!(r.executors_yaml.starts_with("executors:\n  - name: g4dn-xlarge-0\n    labels:\n      instance_type: g4dn.xlarge\n      cost_per_hour: 0.526\n"));
    assert!(r.executors_yaml.contains("name: r5n-large-12\n"));
    assert!(r.ranking.contains("<- pick"));
    assert!(r.ranking.lines().count() >= 12);
    assert!(matches!(
        plan_report(&text, 0.1, None, None),
        Err(KairosError::NothingAffordable { .. })
    ));
    assert!(matches!(
        plan_report(&text, -1.0, None, None),
        Err(KairosError::InvalidInput(_))
    ));
    assert!(matches!(
        plan_report(&text, 2.5, Some(0.0), None),
        Err(KairosError::InvalidInput(_))
    ));
    // A tighter QoS moves work off the CPUs: the r5n limit shrinks.
    let tight = plan_report(&text, 2.5, Some(100.0), None).unwrap();
    assert!(tight.chosen().counts[0] >= 1 && tight.chosen().upper_bound < r.chosen().upper_bound);
}

/// Nothing in `evaluated` is a sub-configuration (component-wise `≤`) of an earlier evaluation.
fn assert_pruned_like_kairos_plus(ranked: &[Candidate], evaluated: &[(usize, f64)]) {
    for (x, &(i, _)) in evaluated.iter().enumerate() {
        for &(j, _) in &evaluated[..x] {
            assert!(!ranked[i]
                .counts
                .iter()
                .zip(&ranked[j].counts)
                .all(|(a, b)| a <= b));
        }
    }
}

#[test]
fn genetic_and_bayesian_searches_share_pruning_and_reach_the_optimum() {
    let m = PaperModel::Dien;
    let ranked = rank(&m.profile(), &m.throughput_profile(), 2.5);
    let eval = monotone_eval(&ranked);
    let plus = kairos_plus(&ranked, &eval).unwrap();
    let k = evaluations_to_reach(&plus.evaluated, plus.best_qps).unwrap();
    type Search<'a> = &'a dyn Fn(u64, usize) -> Vec<(usize, f64)>;
    let ga = |seed, max| genetic_search(&ranked, seed, max, &eval);
    let bo = |seed, max| bayesian_search(&ranked, seed, max, &eval);
    for (name, search) in [("genetic", &ga as Search), ("bayesian", &bo as Search)] {
        let mut total = 0;
        for seed in 0..5 {
            let run = search(seed, usize::MAX);
            assert_pruned_like_kairos_plus(&ranked, &run);
            // Run to exhaustion, every search finds the optimum (nothing it skips can beat it).
            total += evaluations_to_reach(&run, plus.best_qps).unwrap();
        }
        assert!(
            (k as f64) < total as f64 / 5.0,
            "Kairos+ {k} vs {name} {}",
            total as f64 / 5.0
        );
        assert_eq!(search(1, 6).len(), 6);
        assert_eq!(search(3, 20), search(3, 20));
    }
}
