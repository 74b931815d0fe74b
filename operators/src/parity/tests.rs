//! ParM coding semantics against a linear model (F(x) = 2x, F_P = F), for which reconstruction must
//! be exact. The decoder's state ([`decoder::Book`]) is driven with explicit instants, so the
//! deadline rules are tested without waiting; the operators run in a real timely dataflow with the
//! deployed and parity models as in-process services that double their inputs and hold the jobs
//! a test asks them to (a straggler), checking that every request is answered once and that a held
//! job does not hold the node's frontier once the decoder answered it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow_array::UInt64Array;
use timely::dataflow::operators::{Inspect, Probe};
use timely::dataflow::InputHandleVec;
use weir_engine::batch::{Batch, TensorColumn};
use weir_engine::compile::ParityJoined;
use weir_engine::lineage::from_clients;
use weir_engine::request::{RequestError, RowError};
use weir_engine::spec::DecodeAfter;
use weir_engine::tensor::TensorData;

use super::decoder::{Answer, Book};
use super::tag::Tag;
use super::*;
use crate::model::executor::Job;
use crate::model::expiry::Deadlines;
use crate::model::{InferenceService, ModelOperator};

fn rows(values: &[[f32; 3]]) -> Vec<TensorColumn> {
    let data: Vec<f32> = values.iter().flatten().copied().collect();
    vec![TensorColumn::from_data("y", vec![3], values.len(), TensorData::F32(data)).unwrap()]
}

fn doubled(values: &[[f32; 3]]) -> Vec<TensorColumn> {
    let v: Vec<[f32; 3]> = values.iter().map(|r| r.map(|x| 2.0 * x)).collect();
    rows(&v)
}

fn close(a: &[TensorColumn], b: &[f32]) -> bool {
    let a = a[0].f32_values().unwrap();
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-5)
}

fn book(k: usize, r: usize, rule: DecodeAfter) -> (Book, Arc<ParityDecoder>) {
    let shared = Arc::new(ParityDecoder::new(
        "m.parity_decode",
        k,
        r,
        (rule, Duration::ZERO),
    ));
    (Book::new(Arc::clone(&shared)), shared)
}

fn tag(group: u32, position: usize, coded: bool) -> Tag {
    Tag {
        group,
        position,
        coded,
    }
}

fn failure() -> Arc<RequestError> {
    Arc::new(RequestError::NodeUnavailable {
        node: "m".into(),
        message: "no replica alive".into(),
    })
}

/// Parity model `t`'s output for a group of `xs` (F_P = F = 2x, coefficients (i + 1)^t).
fn parity_of(t: u32, xs: &[[f32; 3]]) -> Vec<TensorColumn> {
    let mut sum = [0.0f32; 3];
    for (i, x) in xs.iter().enumerate() {
        let w = ((i + 1) as f32).powi(t as i32);
        for (s, v) in sum.iter_mut().zip(x) {
            *s += w * 2.0 * v;
        }
    }
    rows(&[sum])
}

#[test]
fn a_straggler_is_reconstructed_exactly_and_its_late_prediction_dropped() {
    let (mut b, shared) = book(2, 1, DecodeAfter::FirstAvailable);
    let t0 = Instant::now();
    let (x0, x1) = ([1.0, 2.0, 3.0], [-1.0, 0.5, 4.0]);
    b.admit(0, tag(0, 0, false), 1, t0);
    b.admit(1, tag(0, 1, true), 1, t0);
    assert!(b.on_real(0, doubled(&[x0]), t0));
    b.on_parity(0, 0, 0, parity_of(0, &[x0, x1]), t0);
    let answers = b.take_answers();
    let [Answer::Reconstructed {
        member: 1, columns, ..
    }] = &answers[..]
    else {
        panic!("one reconstruction: {answers:?}");
    };
    assert!(close(columns, &[-2.0, 1.0, 8.0]));
    assert!(
        !b.on_real(1, doubled(&[x1]), t0),
        "its late prediction is dropped"
    );
    let s = shared.stats();
    assert_eq!((s.real, s.reconstructed_late, s.late_real), (1, 1, 1));
    assert_eq!(b.held(), (0, 0), "nothing held once the group is settled");
}

#[test]
fn a_real_prediction_before_its_deadline_wins_and_a_late_one_is_reconstructed() {
    let (mut b, shared) = book(2, 1, DecodeAfter::Millis(50.0));
    let t0 = Instant::now();
    let (x0, x1) = ([1.0, 2.0, 3.0], [5.0, 6.0, 7.0]);
    b.admit(0, tag(0, 0, false), 1, t0);
    b.admit(1, tag(0, 1, true), 1, t0);
    b.on_real(0, doubled(&[x0]), t0);
    b.on_parity(0, 0, 0, parity_of(0, &[x0, x1]), t0);
    b.on_time(t0 + Duration::from_millis(10));
    assert!(b.take_answers().is_empty(), "not late yet");
    assert_eq!(b.next_wake(), Some(t0 + Duration::from_millis(50)));
    b.on_time(t0 + Duration::from_millis(50));
    let answers = b.take_answers();
    assert!(
        matches!(
            &answers[..],
            [Answer::Reconstructed {
                member: 1,
                reason: Reason::Late,
                ..
            }]
        ),
        "{answers:?}"
    );
    // The next group: its real prediction comes in time and wins.
    b.admit(2, tag(1, 0, false), 1, t0);
    b.admit(3, tag(1, 1, true), 1, t0);
    b.on_parity(1, 0, 0, parity_of(0, &[x0, x1]), t0);
    b.on_real(2, doubled(&[x0]), t0);
    assert!(b.on_real(3, doubled(&[x1]), t0 + Duration::from_millis(49)));
    assert!(b.take_answers().is_empty());
    assert_eq!(shared.stats().reconstructed_late, 1);
}

#[test]
fn a_failed_job_is_reconstructed_not_failed() {
    let (mut b, shared) = book(2, 1, DecodeAfter::Quantile(99.0));
    let t0 = Instant::now();
    let (x0, x1) = ([1.0, 2.0, 3.0], [5.0, 6.0, 7.0]);
    b.admit(0, tag(0, 0, false), 1, t0);
    b.admit(1, tag(0, 1, true), 1, t0);
    b.on_error(0, failure(), t0);
    b.on_real(1, doubled(&[x1]), t0);
    b.on_parity(0, 0, 0, parity_of(0, &[x0, x1]), t0);
    let answers = b.take_answers();
    let [Answer::Reconstructed {
        member: 0,
        reason: Reason::Failed,
        columns,
        ..
    }] = &answers[..]
    else {
        panic!("{answers:?}");
    };
    assert!(close(columns, &[2.0, 4.0, 6.0]));
    assert_eq!(shared.stats().reconstructed_failed, 1);
}

#[test]
fn a_group_with_more_failures_than_parity_models_answers_their_errors() {
    let (mut b, shared) = book(2, 1, DecodeAfter::FirstAvailable);
    let t0 = Instant::now();
    b.admit(0, tag(0, 0, false), 1, t0);
    b.admit(1, tag(0, 1, true), 1, t0);
    b.on_error(0, failure(), t0);
    b.on_error(1, failure(), t0);
    let answers = b.take_answers();
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert!(answers.iter().all(|a| matches!(a, Answer::Error { .. })));
    assert_eq!(shared.stats().unrecovered, 2);
    assert_eq!(b.held(), (0, 0));
}

#[test]
fn a_failed_job_whose_group_never_fills_is_answered_its_error_after_a_deadline() {
    let (mut b, _) = book(3, 1, DecodeAfter::Millis(20.0));
    let t0 = Instant::now();
    b.admit(0, tag(0, 0, false), 1, t0);
    b.on_error(0, failure(), t0);
    assert!(b.take_answers().is_empty(), "its group may still fill");
    b.on_time(t0 + Duration::from_millis(20));
    assert!(matches!(
        &b.take_answers()[..],
        [Answer::Error { member: 0, .. }]
    ));
}

#[test]
fn an_expired_job_is_answered_expired_at_once() {
    let (mut b, _) = book(2, 1, DecodeAfter::FirstAvailable);
    let t0 = Instant::now();
    b.admit(0, tag(0, 0, false), 1, t0);
    let expired = Arc::new(RequestError::Expired {
        node: "m".into(),
        late_ms: 3,
    });
    b.on_error(0, expired, t0);
    assert!(matches!(
        &b.take_answers()[..],
        [Answer::Error { member: 0, .. }]
    ));
}

#[test]
fn two_parity_models_reconstruct_two_stragglers_exactly() {
    let (mut b, shared) = book(3, 2, DecodeAfter::FirstAvailable);
    let t0 = Instant::now();
    let xs = [[-1.0, 2.0, 3.0], [-2.0, 5.0, -1.0], [4.0, 0.5, 1.0]];
    for i in 0..3 {
        b.admit(i as u64, tag(0, i, i == 2), 1, t0);
    }
    b.on_real(2, doubled(&[xs[2]]), t0);
    b.on_parity(0, 0, 0, parity_of(0, &xs), t0);
    assert!(
        b.take_answers().is_empty(),
        "two unknown, one parity output"
    );
    b.on_parity(0, 1, 0, parity_of(1, &xs), t0);
    let answers = b.take_answers();
    assert_eq!(answers.len(), 2, "{answers:?}");
    for a in &answers {
        let Answer::Reconstructed {
            member, columns, ..
        } = a
        else {
            panic!("{a:?}");
        };
        let want: Vec<f32> = xs[*member as usize].iter().map(|x| 2.0 * x).collect();
        assert!(close(columns, &want), "job {member}");
    }
    assert_eq!(shared.stats().reconstructed_late, 2);
}

#[test]
fn a_parity_output_cut_into_pieces_is_joined_in_row_order() {
    let (mut b, _) = book(2, 1, DecodeAfter::FirstAvailable);
    let t0 = Instant::now();
    let x0 = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]];
    let x1 = [[0.0, 1.0, 0.0], [1.0, 0.0, 1.0]];
    b.admit(0, tag(0, 0, false), 2, t0);
    b.admit(1, tag(0, 1, true), 2, t0);
    b.on_real(0, doubled(&x0), t0);
    let p = |row: usize| parity_of(0, &[x0[row], x1[row]]);
    b.on_parity(0, 0, 1, p(1), t0);
    assert!(b.take_answers().is_empty(), "half a parity output");
    b.on_parity(0, 0, 0, p(0), t0);
    let answers = b.take_answers();
    let [Answer::Reconstructed { columns, .. }] = &answers[..] else {
        panic!("{answers:?}");
    };
    assert!(close(columns, &[0.0, 2.0, 0.0, 2.0, 0.0, 2.0]));
}

#[test]
fn an_uncoded_group_answers_a_failure_with_its_error() {
    let (mut b, _) = book(2, 1, DecodeAfter::FirstAvailable);
    let t0 = Instant::now();
    b.admit(0, tag(0, 0, false), 1, t0);
    b.admit(1, tag(0, 1, false), 1, t0);
    b.on_error(1, failure(), t0);
    assert!(matches!(
        &b.take_answers()[..],
        [Answer::Error { member: 1, .. }]
    ));
}

/// F(x) = 2x as a service; holds jobs whose first element is negative while `hold` is set.
#[derive(Default)]
struct Doubler {
    held: Mutex<Vec<Job>>,
    hold: AtomicBool,
}

impl Doubler {
    fn release(&self) {
        self.hold.store(false, Ordering::SeqCst);
        let held: Vec<Job> = self.held.lock().unwrap().drain(..).collect();
        for job in held {
            let out = double_job(&job);
            (job.done)(Ok(out));
        }
    }
}

fn double_job(job: &Job) -> Vec<TensorColumn> {
    job.inputs
        .iter()
        .map(|c| {
            let v: Vec<f32> = c.f32_values().unwrap().iter().map(|x| 2.0 * x).collect();
            TensorColumn::from_data("y", vec![3], c.len(), TensorData::F32(v)).unwrap()
        })
        .collect()
}

struct Served(Arc<Doubler>);

impl InferenceService for Served {
    fn try_submit(&self, job: Job) -> Result<(), Job> {
        let negative = job.inputs[0].f32_values().unwrap()[0] < 0.0;
        if negative && self.0.hold.load(Ordering::SeqCst) {
            self.0.held.lock().unwrap().push(job);
        } else {
            let out = double_job(&job);
            (job.done)(Ok(out));
        }
        Ok(())
    }

    fn rows_per_job(&self) -> usize {
        1
    }
}

fn requests(ids: &[u64], values: &[[f32; 3]]) -> Batch {
    let data: Vec<f32> = values.iter().flatten().copied().collect();
    let x = TensorColumn::from_data("x", vec![3], ids.len(), TensorData::F32(data)).unwrap();
    Batch::new(
        UInt64Array::from(ids.to_vec()),
        from_clients(ids, 0),
        vec![("x".into(), x)],
    )
    .unwrap()
}

type Replies = HashMap<u64, Vec<(Vec<f32>, i64)>>;

/// Runs node `m` (k = 2, r = 1, first_available) over `values` (one request each, at time 0) in
/// a dataflow; `check` sees the replies and the parity node once the node's output frontier
/// passed time 0, while the deployed service still holds its stragglers; they are released after,
/// and the replies at the end are returned.
fn run_node(
    values: &[[f32; 3]],
    check: impl FnOnce(&Replies, &ParityNode) + Send + Sync + 'static,
) -> (Replies, ParityNode) {
    let coded = ParityNode::new(
        "m",
        2,
        Encoder::Sum,
        (DecodeAfter::FirstAvailable, Duration::ZERO),
        vec!["m.parity".into()],
    );
    let deployed = Arc::new(Doubler::default());
    deployed.hold.store(true, Ordering::SeqCst);
    let (node, held) = (coded.clone(), Arc::clone(&deployed));
    let values = values.to_vec();
    let replies = timely::execute_directly(move |worker| {
        let replies: Rc<RefCell<Replies>> = Rc::default();
        let errors: Rc<RefCell<Vec<RowError>>> = Rc::default();
        let mut input = InputHandleVec::<u64, Batch>::new();
        let (out, errs) = (Rc::clone(&replies), Rc::clone(&errors));
        let probe = worker.dataflow::<u64, _, _>(|scope| {
            let stream = input.to_stream(scope);
            let model = |name: &str| ModelOperator {
                node: name.into(),
                lineage_id: 1,
                producer_ids: vec![0],
                input_columns: vec!["x".into()],
                output_columns: vec!["m.y".into()],
                deadlines: Deadlines::new(None, Arc::default()),
                run_here: false,
                in_flight: None,
            };
            let encoded = node.encoder().build("m", stream, vec!["x".into()], 1);
            let data = model("m").build(encoded.data, Arc::new(Served(Arc::clone(&held))));
            let parity_service = Arc::new(Served(Arc::new(Doubler::default())));
            let mut queries = encoded.queries;
            let parity = model("m.parity").build(queries.remove(0), parity_service);
            let (ok, err) = DecodeOperator {
                node: "m".into(),
                lineage_id: 1,
                producer_ids: vec![0],
                output_columns: vec!["m.y".into()],
                flag_column: "m.reconstructed".into(),
                deadlines: Deadlines::new(None, Arc::default()),
            }
            .build(
                &node,
                ParityJoined {
                    tags: encoded.tags,
                    data,
                    parity: vec![parity],
                },
            );
            err.inspect(move |e| errs.borrow_mut().push(e.clone()));
            ok.inspect(move |b: &Batch| {
                let y = b.tensor("m.y").unwrap().f32_values().unwrap();
                let flags = b.tensor("m.reconstructed").unwrap().i64_values().unwrap();
                for (i, &id) in b.request_ids().iter().enumerate() {
                    out.borrow_mut()
                        .entry(id)
                        .or_default()
                        .push((y[3 * i..3 * i + 3].to_vec(), flags[i]));
                }
            })
            .probe()
            .0
        });
        let ids: Vec<u64> = (0..values.len() as u64).collect();
        input.send(requests(&ids, &values));
        input.advance_to(1);
        let give_up = Instant::now() + Duration::from_secs(30);
        while probe.less_than(&1) {
            assert!(
                Instant::now() < give_up,
                "the node's frontier never passed time 0"
            );
            worker.step();
        }
        check(&replies.borrow(), &node);
        held.release();
        drop(input);
        while worker.step() {}
        assert!(errors.borrow().is_empty(), "{:?}", errors.borrow());
        replies.take()
    });
    (replies, coded)
}

#[test]
fn the_operators_answer_every_request_once_and_a_held_job_does_not_hold_the_frontier() {
    let values = [
        [1.0, 2.0, 3.0],
        [-1.0, 0.5, 4.0],
        [2.0, 2.0, 2.0],
        [3.0, 1.0, 0.0],
    ];
    let (replies, node) = run_node(&values, |replies, _| {
        // Request 1 is held by the deployed service, yet answered (and time 0 complete).
        let r = replies;
        assert_eq!(r.len(), 4, "{r:?}");
        assert_eq!(
            r[&1],
            vec![(vec![-2.0, 1.0, 8.0], 1)],
            "reconstructed exactly"
        );
    });
    let r = &replies;
    for (id, x) in values.iter().enumerate() {
        let got = &r[&(id as u64)];
        assert_eq!(got.len(), 1, "request {id} answered once: {got:?}");
        let want: Vec<f32> = x.iter().map(|v| 2.0 * v).collect();
        assert_eq!(got[0].0, want, "request {id}");
        assert_eq!(got[0].1, i64::from(id == 1), "request {id}'s flag");
    }
    let s = node.stats();
    assert_eq!(
        (
            s.groups,
            s.parity_dispatched,
            s.real,
            s.reconstructed_late,
            s.late_real
        ),
        (2, 2, 3, 1, 1)
    );
    let jobs = node.encoder().stats().parity_jobs;
    assert_eq!(jobs[0].0, "m.parity");
    assert_eq!(jobs[0].1.answered, 2);
}
