//! Shapes through model nodes: requests of different lengths in one dynamic batch (padded always,
//! padded when the node's cost model predicts it cheaper, and unpadded where they run apart), and
//! a model without a batch dimension taking a scalar. Every answer is compared with ONNX Runtime's
//! for that request alone; the executor's call counts show which requests shared a call.

use std::path::Path;

use weir::{plan_spec, start, GraphSpec, LoadSnapshot, Response, RunningGraph, RuntimeOptions};
use weir::{NamedTensor, Tensor};

use crate::common::{channel, model, named, repo, weir_home, Replies};
use crate::reference::{batch_of_one, first_of_batch, ort_reference};

/// `seq_pool.onnx` behind `input_ids`/`attention_mask` on `seq`, batching up to `max_size`
/// requests within a long delay, waiting for company always (not only while busy), so requests
/// sent together meet however the machine schedules their arrival, and growing calls to
/// `max_size` (a cold node under `grow: while_cheaper` first measures calls of one row, so two
/// requests reaching it as two jobs would run apart); `pad` is the `batching` keys after that
/// (empty, or `pad: {...}`).
fn seq_pool(pad: &str, max_size: usize) -> RunningGraph {
    let yaml = format!(
        "name: pool
inputs:
  - {{name: ids, dtype: i64, shape: [seq]}}
  - {{name: mask, dtype: i64, shape: [seq]}}
nodes:
  - model:
      id: pool
      path: {}
      inputs: {{input_ids: ids, attention_mask: mask}}
      batching: {{max_size: {max_size}, max_delay_us: 300000, wait: always, grow: to_max_size{pad}}}
outputs:
  - {{name: pooled, from: pool.pooled}}
  - {{name: tokens, from: pool.tokens}}
",
        model("seq_pool.onnx").display()
    );
    let spec = GraphSpec::from_yaml(&yaml, "pool.yaml").expect("parses");
    let graph = plan_spec(&spec, Path::new(".")).expect("valid");
    start(graph.plan, RuntimeOptions::default()).expect("starts")
}

/// A request of `len` tokens (ids from `seed`, the mask all ones).
fn tokens(len: usize, seed: i64) -> Vec<NamedTensor> {
    let ids = (0..len as i64).map(|i| (i * 13 + seed) % 50).collect();
    vec![
        named("ids", Tensor::i64(vec![len], ids)),
        named("mask", Tensor::i64(vec![len], vec![1; len])),
    ]
}

/// Submits every request at once; returns the answers in request order, each answered once.
fn answer_all(running: &RunningGraph, requests: &[Vec<NamedTensor>]) -> Vec<Response> {
    let replies = Replies::default();
    let (tx, rx) = channel();
    for (tag, inputs) in requests.iter().enumerate() {
        replies.submit(running, tag as u64, inputs.clone(), &tx);
    }
    drop(tx);
    let mut answers: Vec<_> = rx.iter().collect();
    answers.sort_by_key(|(tag, _)| *tag);
    assert_eq!(answers.len(), requests.len(), "every request answered");
    assert!(replies.counts().values().all(|&n| n == 1), "answered once");
    answers
        .into_iter()
        .map(|(tag, r)| r.unwrap_or_else(|e| panic!("request {tag}: {e}")))
        .collect()
}

/// Each answer's `pooled` and `tokens` equal ONNX Runtime's for its request alone, bit for bit.
fn assert_each_as_alone(requests: &[Vec<NamedTensor>], answers: &[Response]) {
    for (i, (request, response)) in requests.iter().zip(answers).enumerate() {
        let (ids, mask) = (
            batch_of_one(&request[0].tensor),
            batch_of_one(&request[1].tensor),
        );
        let want = ort_reference(
            &model("seq_pool.onnx"),
            &[("input_ids", &ids), ("attention_mask", &mask)],
        );
        for (name, reference) in want {
            let got = response.output(&name).expect("output");
            assert_eq!(got, &first_of_batch(&reference), "{name} of request {i}");
        }
    }
}

fn stats(running: &RunningGraph) -> LoadSnapshot {
    running
        .executor_stats()
        .into_iter()
        .next()
        .expect("the node's executor")
        .1
}

/// Requests sent together, the executor's (calls, rows) expected after them, and what that shows.
type Round<'a> = (Vec<Vec<NamedTensor>>, (u64, u64), &'a str);

/// Sends each round of requests at once to `running`; after each, the executor's calls and
/// rows so far must be `want`. Every answer must equal ONNX Runtime's for its request alone.
fn rounds(running: RunningGraph, rounds: Vec<Round<'_>>) {
    for (requests, want, what) in rounds {
        let answers = answer_all(&running, &requests);
        assert_each_as_alone(&requests, &answers);
        let s = stats(&running);
        assert_eq!((s.runs, s.rows), want, "{what}");
    }
    running.shutdown();
}

#[test]
fn padded_requests_of_different_lengths_share_one_call_and_match_each_alone() {
    let requests = vec![tokens(3, 1), tokens(7, 2), tokens(5, 3)];
    let running = seq_pool(", pad: {dim: seq, value: 0}", 8);
    rounds(
        running,
        vec![(requests, (1, 3), "one padded call of three rows")],
    );
}

/// Under `pad.when: cheaper` the node explores first, batches of mixed lengths
/// alternating between one padded call and one call per length, then cuts them as its measured
/// costs predict cheapest; whichever way, every request is answered once, as it would be alone
/// (checked against ONNX Runtime in the first round, a padded call; every later round's answers
/// must equal those).
#[test]
fn padding_when_cheaper_explores_both_forms_then_decides_and_answers_each_as_alone() {
    use weir_operators::model::executor::call_cost::EXPLORE_CALLS;
    let running = seq_pool(", pad: {dim: seq, value: 0, when: cheaper}", 3);
    let requests = vec![tokens(3, 1), tokens(7, 2), tokens(5, 3)];
    let first = answer_all(&running, &requests);
    assert_each_as_alone(&requests, &first);
    let same_as_first = |answers: &[Response], round: u64| {
        for (i, (got, want)) in answers.iter().zip(&first).enumerate() {
            for name in ["pooled", "tokens"] {
                assert_eq!(
                    got.output(name),
                    want.output(name),
                    "{name} of request {i}, round {round}"
                );
            }
        }
    };
    let mut calls = 1;
    for k in 1..2 * EXPLORE_CALLS {
        same_as_first(&answer_all(&running, &requests), k);
        // Padded first, then one call per length (three), in turn.
        calls += if k % 2 == 0 { 1 } else { 3 };
        let s = stats(&running);
        assert_eq!(
            (s.runs, s.rows),
            (calls, 3 * (k + 1)),
            "exploring, round {k}"
        );
    }
    let s = stats(&running);
    assert_eq!(
        (s.padded_batches, s.split_batches),
        (EXPLORE_CALLS, EXPLORE_CALLS)
    );
    // Decided by the measured costs now: which cut is the machine's; the answers are not.
    let decided = 8;
    for k in 0..decided {
        same_as_first(&answer_all(&running, &requests), 2 * EXPLORE_CALLS + k);
    }
    let s = stats(&running);
    assert_eq!(
        s.padded_batches + s.split_batches,
        2 * EXPLORE_CALLS + decided,
        "every mixed batch counted once"
    );
    assert_eq!(s.rows, 3 * (2 * EXPLORE_CALLS + decided));
    running.shutdown();
}

#[test]
fn unpadded_requests_share_a_call_only_when_their_lengths_agree() {
    let same = vec![tokens(4, 1), tokens(4, 2)];
    let different = vec![tokens(2, 3), tokens(6, 4)];
    rounds(
        seq_pool("", 8),
        vec![
            (same, (1, 2), "one call for one length"),
            (different, (3, 4), "two lengths, two more calls"),
        ],
    );
}

/// `graphs/unbatched.yaml`: a 3 × 4 tensor and a scalar, passed to the model as they are.
#[test]
fn a_model_without_a_batch_dimension_takes_a_scalar_input() {
    weir_home();
    let graph = weir::load_graph(&repo().join("graphs/unbatched.yaml")).expect("valid");
    let running = start(graph.plan, RuntimeOptions::default()).expect("starts");
    let requests: Vec<Vec<NamedTensor>> = (0..3)
        .map(|k| {
            let x = (0..12).map(|i| (i + k) as f32 * 0.25 - 1.0).collect();
            vec![
                named("x", Tensor::f32(vec![3, 4], x)),
                named("s", Tensor::f32(vec![], vec![1.5 + k as f32])),
            ]
        })
        .collect();
    let answers = answer_all(&running, &requests);
    for (request, response) in requests.iter().zip(&answers) {
        let want = ort_reference(
            &model("unbatched_scale.onnx"),
            &[("x", &request[0].tensor), ("s", &request[1].tensor)],
        );
        for (name, reference) in want {
            let got = response.output(&name).expect("output");
            assert_eq!(got, &reference, "{name}");
        }
    }
    let s = stats(&running);
    assert_eq!((s.runs, s.rows), (3, 3), "one call per request");
    running.shutdown();
}
