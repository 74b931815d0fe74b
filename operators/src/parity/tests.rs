//! ParM coding semantics against a linear model (F(x) = 2x, F_P = F), for which reconstruction must
//! be exact, with stragglers scripted by holding jobs and failures by answering errors. Most use
//! `first_available` (decode as soon as the group allows); the time-out rules wait for a timer,
//! and the tests poll for the outcome without asserting how long it took.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use weir_engine::batch::TensorColumn;
use weir_engine::tensor::TensorData;

use super::*;
use crate::model::ExecError;

/// F(x) = 2x on f32 rows; holds jobs whose first element is negative until released.
#[derive(Default)]
struct Doubler {
    held: Mutex<Vec<Job>>,
    full: AtomicBool,
    hold_all: AtomicBool,
    /// Answer jobs whose first element is negative with an error instead of holding them.
    fail: AtomicBool,
}

fn doubled(job: &Job) -> Vec<TensorColumn> {
    job.inputs
        .iter()
        .map(|c| {
            let v: Vec<f32> = c.f32_values().unwrap().iter().map(|x| 2.0 * x).collect();
            TensorColumn::from_data(
                "y",
                c.uniform_shape().unwrap().to_vec(),
                c.len(),
                TensorData::F32(v),
            )
            .unwrap()
        })
        .collect()
}

impl Doubler {
    fn release(&self) {
        let held: Vec<Job> = self.held.lock().unwrap().drain(..).collect();
        for job in held {
            let out = doubled(&job);
            (job.done)(Ok(out));
        }
    }
}

impl InferenceService for Arc<Doubler> {
    fn try_submit(&self, job: Job) -> Result<(), Job> {
        if self.full.load(Ordering::SeqCst) {
            return Err(job);
        }
        let negative = job.inputs[0].f32_values().unwrap()[0] < 0.0;
        if negative && self.fail.load(Ordering::SeqCst) {
            (job.done)(Err(ExecError::Unavailable {
                node: "m".into(),
                message: "no replica alive".into(),
            }));
        } else if self.hold_all.load(Ordering::SeqCst) || negative {
            self.held.lock().unwrap().push(job);
        } else {
            let out = doubled(&job);
            (job.done)(Ok(out));
        }
        Ok(())
    }

    fn rows_per_job(&self) -> usize {
        4
    }
}

type Answers = Arc<Mutex<Vec<(usize, Vec<f32>, Vec<i64>)>>>;
type Errors = Arc<Mutex<Vec<(usize, String)>>>;

fn job(tag: usize, rows: &[[f32; 3]], answers: &Answers) -> Job {
    job_or_error(tag, rows, answers, &Errors::default())
}

fn job_or_error(tag: usize, rows: &[[f32; 3]], answers: &Answers, errors: &Errors) -> Job {
    let data: Vec<f32> = rows.iter().flatten().copied().collect();
    let col = TensorColumn::from_data("x", vec![3], rows.len(), TensorData::F32(data)).unwrap();
    let (answers, errors) = (Arc::clone(answers), Arc::clone(errors));
    Job {
        inputs: vec![col],
        enqueued_at: Instant::now(),
        deadline: None,
        trace: None,
        done: Box::new(move |r| match r {
            Ok(cols) => {
                let y = cols[0].f32_values().unwrap().to_vec();
                let flag = cols[1].i64_values().unwrap().to_vec();
                answers.lock().unwrap().push((tag, y, flag));
            }
            Err(e) => errors.lock().unwrap().push((tag, e.to_string())),
        }),
    }
}

fn service(k: usize) -> (ParityService, Arc<Doubler>, Arc<Doubler>) {
    service_deciding(k, DecodeAfter::FirstAvailable)
}

fn service_deciding(k: usize, rule: DecodeAfter) -> (ParityService, Arc<Doubler>, Arc<Doubler>) {
    let (deployed, parity) = (Arc::new(Doubler::default()), Arc::new(Doubler::default()));
    let svc = ParityService::new(
        "m",
        k,
        Encoder::Sum,
        (rule, Duration::ZERO),
        Arc::new(Arc::clone(&deployed)),
        vec![ParityTarget {
            id: "m.parity".into(),
            service: Arc::new(Arc::clone(&parity)),
        }],
    );
    (svc, deployed, parity)
}

/// A node with two parity models (r = 2), both F_P = F (exact for a linear model).
fn service_r2(k: usize, rule: DecodeAfter) -> (ParityService, Arc<Doubler>) {
    let deployed = Arc::new(Doubler::default());
    let targets = (0..2)
        .map(|t| ParityTarget {
            id: format!("m.parity{t}"),
            service: Arc::new(Arc::new(Doubler::default())),
        })
        .collect();
    let svc = ParityService::new(
        "m",
        k,
        Encoder::Sum,
        (rule, Duration::ZERO),
        Arc::new(Arc::clone(&deployed)),
        targets,
    );
    (svc, deployed)
}

/// Waits (polling, generously bounded) until `done` holds.
fn eventually(what: &str, done: impl Fn() -> bool) {
    let give_up = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < give_up, "never: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn close(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-5)
}

#[test]
fn a_straggler_is_reconstructed_exactly_and_its_late_prediction_dropped() {
    let (svc, deployed, _) = service(2);
    let answers = Answers::default();
    svc.try_submit(job(0, &[[-1.0, 2.0, 3.0]], &answers))
        .unwrap(); // straggles
    svc.try_submit(job(1, &[[4.0, 5.0, 6.0]], &answers))
        .unwrap();
    {
        let got = answers.lock().unwrap();
        assert_eq!(got.len(), 2, "the real answer and the reconstruction");
        let rebuilt = got.iter().find(|a| a.0 == 0).unwrap();
        assert!(close(&rebuilt.1, &[-2.0, 4.0, 6.0]), "{:?}", rebuilt.1);
        assert_eq!(rebuilt.2, vec![1]);
        let real = got.iter().find(|a| a.0 == 1).unwrap();
        assert_eq!(real.2, vec![0]);
    }
    deployed.release();
    assert_eq!(answers.lock().unwrap().len(), 2, "answered once");
    let stats = svc.stats();
    assert_eq!(
        (stats.groups, stats.reconstructed, stats.late_real),
        (1, 1, 1)
    );
    assert_eq!(stats.reconstructed_fraction(), 0.5);
}

#[test]
fn a_real_prediction_before_its_deadline_wins() {
    let (svc, deployed, parity) = service_deciding(2, DecodeAfter::Millis(600_000.0));
    let answers = Answers::default();
    svc.try_submit(job(0, &[[-1.0, 2.0, 3.0]], &answers))
        .unwrap(); // held, but not late
    svc.try_submit(job(1, &[[4.0, 5.0, 6.0]], &answers))
        .unwrap();
    assert_eq!(svc.stats().parity_dispatched, 1);
    assert!(
        parity.held.lock().unwrap().is_empty(),
        "the parity output is in"
    );
    assert_eq!(
        answers.lock().unwrap().len(),
        1,
        "no reconstruction before the deadline"
    );
    deployed.release();
    let got = answers.lock().unwrap();
    let real = got.iter().find(|a| a.0 == 0).unwrap();
    assert_eq!(real.2, vec![0], "the real prediction");
    assert!(close(&real.1, &[-2.0, 4.0, 6.0]));
    assert_eq!(svc.stats().reconstructed, 0);
    assert_eq!(svc.stats().real, 2);
}

#[test]
fn a_late_prediction_is_reconstructed_once_its_deadline_passes() {
    let (svc, deployed, _) = service_deciding(2, DecodeAfter::Millis(1.0));
    let answers = Answers::default();
    svc.try_submit(job(0, &[[-1.0, 2.0, 3.0]], &answers))
        .unwrap(); // held past its deadline
    svc.try_submit(job(1, &[[4.0, 5.0, 6.0]], &answers))
        .unwrap();
    eventually("the late job reconstructed", || {
        answers.lock().unwrap().len() == 2
    });
    {
        let got = answers.lock().unwrap();
        let rebuilt = got.iter().find(|a| a.0 == 0).unwrap();
        assert_eq!(rebuilt.2, vec![1]);
        assert!(close(&rebuilt.1, &[-2.0, 4.0, 6.0]));
    }
    deployed.release();
    let stats = svc.stats();
    assert_eq!(
        (
            stats.reconstructed_late,
            stats.reconstructed_failed,
            stats.late_real
        ),
        (1, 0, 1)
    );
    assert_eq!(answers.lock().unwrap().len(), 2, "answered once");
}

#[test]
fn a_failed_job_is_reconstructed_not_failed() {
    let (svc, deployed, _) = service_deciding(2, DecodeAfter::Quantile(99.0));
    deployed.fail.store(true, Ordering::SeqCst);
    let (answers, errors) = (Answers::default(), Errors::default());
    svc.try_submit(job_or_error(0, &[[-1.0, 2.0, 3.0]], &answers, &errors))
        .unwrap(); // its replica fails
    svc.try_submit(job_or_error(1, &[[4.0, 5.0, 6.0]], &answers, &errors))
        .unwrap();
    assert!(
        errors.lock().unwrap().is_empty(),
        "{:?}",
        errors.lock().unwrap()
    );
    let got = answers.lock().unwrap();
    let rebuilt = got.iter().find(|a| a.0 == 0).expect("reconstructed");
    assert_eq!(rebuilt.2, vec![1]);
    assert!(close(&rebuilt.1, &[-2.0, 4.0, 6.0]));
    let stats = svc.stats();
    assert_eq!(
        (stats.reconstructed_failed, stats.reconstructed_late),
        (1, 0)
    );
}

#[test]
fn a_group_with_two_failures_answers_both_errors() {
    let (svc, deployed, _) = service_deciding(2, DecodeAfter::Quantile(99.0));
    deployed.fail.store(true, Ordering::SeqCst);
    let (answers, errors) = (Answers::default(), Errors::default());
    svc.try_submit(job_or_error(0, &[[-1.0, 2.0, 3.0]], &answers, &errors))
        .unwrap();
    svc.try_submit(job_or_error(1, &[[-4.0, 5.0, 6.0]], &answers, &errors))
        .unwrap();
    let mut tags: Vec<usize> = errors.lock().unwrap().iter().map(|e| e.0).collect();
    tags.sort_unstable();
    assert_eq!(tags, vec![0, 1]);
    assert!(answers.lock().unwrap().is_empty());
    assert_eq!(svc.stats().unrecovered, 2);
}

#[test]
fn a_failed_job_whose_group_never_fills_is_answered_its_error() {
    let (svc, deployed, _) = service_deciding(3, DecodeAfter::Millis(1.0));
    deployed.fail.store(true, Ordering::SeqCst);
    let (answers, errors) = (Answers::default(), Errors::default());
    svc.try_submit(job_or_error(0, &[[-1.0, 2.0, 3.0]], &answers, &errors))
        .unwrap();
    eventually("the error answered", || errors.lock().unwrap().len() == 1);
    assert!(errors.lock().unwrap()[0].1.contains("no replica alive"));
    // Its group fills later: nothing is answered twice.
    svc.try_submit(job_or_error(1, &[[1.0, 2.0, 3.0]], &answers, &errors))
        .unwrap();
    svc.try_submit(job_or_error(2, &[[4.0, 5.0, 6.0]], &answers, &errors))
        .unwrap();
    assert_eq!(errors.lock().unwrap().len(), 1);
    assert_eq!(answers.lock().unwrap().len(), 2);
    assert_eq!(svc.stats().reconstructed, 0);
}

#[test]
fn two_parity_models_reconstruct_two_stragglers_exactly_and_answer_each_once() {
    let (svc, deployed) = service_r2(3, DecodeAfter::FirstAvailable);
    let answers = Answers::default();
    // Jobs 0 and 1 straggle (negative first element); both parity queries are non-negative.
    svc.try_submit(job(0, &[[-1.0, 2.0, 3.0]], &answers))
        .unwrap();
    svc.try_submit(job(1, &[[-2.0, 5.0, -1.0]], &answers))
        .unwrap();
    svc.try_submit(job(2, &[[4.0, 0.5, 1.0]], &answers))
        .unwrap();
    {
        let got = answers.lock().unwrap();
        assert_eq!(
            got.len(),
            3,
            "two reconstructions and one real answer: {got:?}"
        );
        for (tag, want) in [(0, [-2.0, 4.0, 6.0]), (1, [-4.0, 10.0, -2.0])] {
            let a = got.iter().find(|a| a.0 == tag).unwrap();
            assert!(close(&a.1, &want), "job {tag}: {:?}", a.1);
            assert_eq!(a.2, vec![1], "job {tag} flagged reconstructed");
        }
    }
    deployed.release();
    assert_eq!(answers.lock().unwrap().len(), 3, "answered once");
    let stats = svc.stats();
    assert_eq!(
        (
            stats.groups,
            stats.parity_dispatched,
            stats.reconstructed_late,
            stats.late_real
        ),
        (1, 2, 2, 2)
    );
}

#[test]
fn with_two_parity_models_only_the_late_one_is_answered_by_reconstruction() {
    // A long deadline: nothing is late, so nothing is reconstructed, though the group could decode.
    let (svc, deployed) = service_r2(2, DecodeAfter::Millis(600_000.0));
    let answers = Answers::default();
    svc.try_submit(job(0, &[[-1.0, 2.0, 3.0]], &answers))
        .unwrap();
    svc.try_submit(job(1, &[[-2.0, 5.0, -1.0]], &answers))
        .unwrap();
    assert!(
        answers.lock().unwrap().is_empty(),
        "a real prediction before its deadline wins"
    );
    deployed.release();
    let got = answers.lock().unwrap();
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|a| a.2 == vec![0]), "all real: {got:?}");
}

#[test]
fn two_missing_wait_for_their_real_predictions() {
    let (svc, deployed, _) = service(3);
    let answers = Answers::default();
    svc.try_submit(job(0, &[[-1.0, 0.0, 0.0]], &answers))
        .unwrap();
    svc.try_submit(job(1, &[[-2.0, 0.0, 0.0]], &answers))
        .unwrap();
    svc.try_submit(job(2, &[[3.0, 0.0, 0.0]], &answers))
        .unwrap();
    assert_eq!(
        answers.lock().unwrap().len(),
        1,
        "no reconstruction from k − 2 outputs"
    );
    // Releasing the first straggler leaves one missing: that one may now be reconstructed
    // (one missing, the parity output in), and its own real prediction is then dropped. Either way
    // each is answered once.
    deployed.release();
    let got = answers.lock().unwrap();
    let mut tags: Vec<usize> = got.iter().map(|a| a.0).collect();
    tags.sort_unstable();
    assert_eq!(tags, vec![0, 1, 2]);
    let stats = svc.stats();
    assert_eq!(stats.reconstructed, stats.late_real);
}

#[test]
fn a_group_answered_for_real_ignores_its_parity() {
    let (svc, _, parity) = service(2);
    parity.hold_all.store(true, Ordering::SeqCst);
    let answers = Answers::default();
    svc.try_submit(job(0, &[[1.0, 1.0, 1.0]], &answers))
        .unwrap();
    svc.try_submit(job(1, &[[2.0, 2.0, 2.0]], &answers))
        .unwrap();
    parity.release();
    let got = answers.lock().unwrap();
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|a| a.2 == vec![0]));
    assert_eq!(svc.stats().reconstructed, 0);
    assert_eq!(svc.stats().parity_dispatched, 1);
}

#[test]
fn jobs_of_different_sizes_are_coded_position_by_position() {
    let (svc, _, _) = service(2);
    let answers = Answers::default();
    // Two rows, straggling; then one row.
    svc.try_submit(job(0, &[[-1.0, 1.0, 1.0], [7.0, 8.0, 9.0]], &answers))
        .unwrap();
    svc.try_submit(job(1, &[[1.0, 1.0, 1.0]], &answers))
        .unwrap();
    let got = answers.lock().unwrap();
    let rebuilt = got.iter().find(|a| a.0 == 0).unwrap();
    assert!(
        close(&rebuilt.1, &[-2.0, 2.0, 2.0, 14.0, 16.0, 18.0]),
        "{:?}",
        rebuilt.1
    );
    assert_eq!(rebuilt.2, vec![1, 1]);
}

#[test]
fn a_refused_job_comes_back_whole() {
    let (svc, deployed, _) = service(2);
    deployed.full.store(true, Ordering::SeqCst);
    let answers = Answers::default();
    let back = svc
        .try_submit(job(7, &[[1.0, 2.0, 3.0]], &answers))
        .unwrap_err();
    deployed.full.store(false, Ordering::SeqCst);
    svc.try_submit(back).unwrap();
    svc.try_submit(job(8, &[[1.0, 2.0, 3.0]], &answers))
        .unwrap();
    let got = answers.lock().unwrap();
    assert_eq!(got.len(), 2);
    assert!(got
        .iter()
        .any(|a| a.0 == 7 && close(&a.1, &[2.0, 4.0, 6.0])));
    assert_eq!(
        svc.stats().groups,
        1,
        "the refused try did not join a group"
    );
}

#[test]
fn decoding_does_not_depend_on_the_order_outputs_arrive() {
    let col =
        |v: &[f32]| TensorColumn::from_data("y", vec![2], 1, TensorData::F32(v.to_vec())).unwrap();
    let parity = vec![col(&[10.0, 20.0])];
    let (a, b) = (vec![col(&[1.0, 2.0])], vec![col(&[3.0, 4.0])]);
    let one = decode_subtract(&parity, &[&a, &b], 1).unwrap();
    let other = decode_subtract(&parity, &[&b, &a], 1).unwrap();
    assert_eq!(one[0].f32_values().unwrap(), other[0].f32_values().unwrap());
    assert_eq!(one[0].f32_values().unwrap(), &[6.0, 14.0]);
}

#[test]
fn the_sum_encoder_adds_feature_wise_and_keeps_one_querys_shape() {
    let col = |rows: usize, v: &[f32]| {
        TensorColumn::from_data("x", vec![2], rows, TensorData::F32(v.to_vec())).unwrap()
    };
    let (a, b, c) = (
        vec![col(2, &[1.0, 2.0, 3.0, 4.0])],
        vec![col(1, &[10.0, 20.0])],
        vec![col(2, &[100.0, 200.0, 300.0, 400.0])],
    );
    let p = encode_group(Encoder::Sum, &[&a, &b, &c]).unwrap();
    assert_eq!(p[0].uniform_shape(), Some(&[2][..]));
    assert_eq!(p[0].len(), 2);
    assert_eq!(p[0].f32_values().unwrap(), &[111.0, 222.0, 303.0, 404.0]);
}

#[test]
fn the_concat_encoder_tiles_each_row_position() {
    // k = 2 with 2×2 single-channel images: each image is halved in width (pixel pairs
    // averaged) and the halves are placed side by side (`weir_parm::Encoder::Concat`).
    let col =
        |v: &[f32]| TensorColumn::from_data("x", vec![4], 1, TensorData::F32(v.to_vec())).unwrap();
    let (a, b) = (
        vec![col(&[1.0, 3.0, 5.0, 7.0])],
        vec![col(&[10.0, 30.0, 50.0, 70.0])],
    );
    let p = encode_group(Encoder::Concat, &[&a, &b]).unwrap();
    assert_eq!(p[0].f32_values().unwrap(), &[2.0, 20.0, 6.0, 60.0]);
}
