use super::*;
use crate::planner::upper_bound;
use crate::profile::paper::PaperModel;
use crate::profile::{InstanceType, LatencyTable, TypeProfile};
use crate::workload::BatchDist;

fn ty(name: &str, cost: f64, pts: Vec<(u32, f64)>) -> TypeProfile {
    TypeProfile {
        instance: InstanceType {
            name: name.into(),
            cost_per_hour: cost,
        },
        latency: LatencyTable::new(pts).unwrap(),
    }
}

#[test]
fn fig5_kairos_serves_all_four_where_fcfs_misses_one() {
    // One GPU (2 ms small, 4 ms large) and one CPU (3 ms small, 20 ms large); QoS 10 ms.
    // Queries: large, small, large, small, arriving together. FCFS sends the second large query
    // to the CPU as soon as it frees (20 ms: a violation); Kairos holds it for the GPU, which frees
    // 1 ms later, and gives the CPU the small one.
    let gpu = ty("gpu", 1.0, vec![(10, 2.0), (1000, 4.0)]);
    let cpu = ty("cpu", 0.3, vec![(10, 3.0), (1000, 20.0)]);
    let p = ModelProfile::new("fig5", 10.0, 1000, vec![gpu, cpu], Some("gpu")).unwrap();
    let s = QueryStream::from_arrivals(vec![1000, 10, 1000, 10], vec![0.001, 0.002, 0.003, 0.004]);
    let o = SimOptions::default();
    let fcfs = simulate(&p, &[1, 1], Policy::Fcfs, &s, 1000.0, &o);
    let kairos = simulate(&p, &[1, 1], Policy::kairos(), &s, 1000.0, &o);
    assert_eq!(fcfs.violations, 1);
    assert_eq!((kairos.served, kairos.violations), (4, 0));
    assert!(kairos.meets_qos() && !fcfs.meets_qos());
}

#[test]
fn runs_are_deterministic_and_noise_is_seeded() {
    let p = PaperModel::Dien.profile();
    let s = QueryStream::new(BatchDist::Trace, 400, 5);
    let noisy = SimOptions {
        service_cv: 0.05,
        ..Default::default()
    };
    let a = simulate(&p, &[2, 0, 9, 0], Policy::kairos(), &s, 700.0, &noisy);
    assert_eq!(
        a,
        simulate(&p, &[2, 0, 9, 0], Policy::kairos(), &s, 700.0, &noisy)
    );
    assert!(
        a.violations > 0,
        "700 QPS is above DIEN's allowable throughput on (2,0,9,0)"
    );
}

#[test]
fn oracle_close_to_and_simulated_below_the_bound() {
    // RM2 (1,0,13,0): UB 144.21, ORCL-sequence ≈ 142.9, Kairos ≈ 134.
    let p = PaperModel::Rm2.profile();
    let c = [1, 0, 13, 0];
    let ub = upper_bound(&PaperModel::Rm2.throughput_profile(), &c).unwrap();
    let batches = BatchDist::Trace.sample_many(2000, 11);
    let orcl = oracle_throughput(&p, &c, &batches);
    assert!(
        orcl > 0.9 * ub && orcl < 1.05 * ub,
        "ORCL {orcl} vs UB {ub}"
    );
    let s = QueryStream::new(BatchDist::Trace, 2000, 42);
    let o = SimOptions::default();
    let kairos = allowable_throughput(&p, &c, Policy::kairos(), &s, &o, ub);
    assert!(
        kairos <= 1.03 * ub && kairos > 0.85 * ub,
        "Kairos {kairos} vs UB {ub}"
    );
    let fcfs = allowable_throughput(&p, &c, Policy::Fcfs, &s, &o, ub);
    assert!(fcfs < 0.85 * kairos, "FCFS {fcfs} vs Kairos {kairos}");
}

#[test]
fn homogeneous_rm2_matches_reference() {
    // 4 × g4dn under FCFS ≈ 48.8 QPS (Q_b = 15.04 each, so at most 60.2).
    let p = PaperModel::Rm2.profile();
    let s = QueryStream::new(BatchDist::Trace, 800, 4);
    let q = allowable_throughput(
        &p,
        &[4, 0, 0, 0],
        Policy::Fcfs,
        &s,
        &SimOptions::default(),
        60.0,
    );
    assert!(q > 40.0 && q < 4.0 * 15.04, "{q}");
}

#[test]
fn oracle_search_prefers_heterogeneous_pools() {
    let p = PaperModel::Rm2.profile();
    let batches = BatchDist::Trace.sample_many(500, 2);
    let (best, q) = oracle_search(&p, 2.5, &batches).unwrap();
    let homo = oracle_throughput(&p, &[4, 0, 0, 0], &batches);
    assert!(
        best[0] >= 1 && best.iter().skip(1).any(|&n| n > 0),
        "{best:?}"
    );
    assert!(q > 2.0 * homo, "{q} vs {homo}");
    assert_eq!(oracle_search(&p, 0.3, &batches), None);
}

#[test]
fn drs_and_clockwork_respect_their_rules() {
    // DRS with threshold 0 and no auxiliary instance behaves like FCFS; Clockwork on one instance too.
    let p = PaperModel::Wnd.profile();
    let s = QueryStream::new(BatchDist::Trace, 500, 6);
    let o = SimOptions::default();
    let fcfs = simulate(&p, &[3, 0, 0, 0], Policy::Fcfs, &s, 500.0, &o);
    assert_eq!(
        simulate(
            &p,
            &[3, 0, 0, 0],
            Policy::Drs { threshold: 500 },
            &s,
            500.0,
            &o
        ),
        fcfs
    );
    let one = simulate(&p, &[1, 0, 0, 0], Policy::Fcfs, &s, 100.0, &o);
    assert_eq!(
        simulate(&p, &[1, 0, 0, 0], Policy::Clockwork, &s, 100.0, &o),
        one
    );
    // A sensible DRS threshold beats the degenerate ones on a mixed pool.
    let (best, thr) = best_drs(&p, &[1, 0, 13, 0], &s, &o, 1500.0, &[0, 300, 600, 1000]);
    assert!(best > 0.0 && thr > 0 && thr < 1000, "{best} at {thr}");
}

#[test]
fn kairos_learning_latency_online_stays_close_to_table_driven() {
    // DIEN (2,0,9,0): starting with no latency knowledge costs little throughput (paper §5.1:
    // results include the overhead of learning latencies online).
    let p = PaperModel::Dien.profile();
    let c = [2, 0, 9, 0];
    let s = QueryStream::new(BatchDist::Trace, 1500, 42);
    let table = allowable_throughput(&p, &c, Policy::kairos(), &s, &SimOptions::default(), 700.0);
    let learn = SimOptions {
        learn_latency: true,
        ..Default::default()
    };
    let learned = allowable_throughput(&p, &c, Policy::kairos(), &s, &learn, 700.0);
    assert!(
        learned > 0.8 * table && learned < 1.05 * table,
        "learned {learned} vs tables {table}"
    );
}
