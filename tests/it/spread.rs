//! A batch that reaches an idle model node with several sessions is spread over them when the
//! node's measured time per row says it pays: PP-OCRv4's recogniser (tens of milliseconds a text
//! line on one core) takes a group of four lines on its two free sessions as two calls of two,
//! answers each line once, and gives each line what one call of all four gives in ONNX Runtime.
//! A `weir executor` process with two sessions does the same with a query of four lines, its
//! parts joined back into the query's one reply.

use std::path::Path;

use weir::{load_graph, plan_spec, start, GraphSpec, RunningGraph, RuntimeOptions, Tensor};

use crate::common::{
    assert_close, channel, direct_ort, model, named, node_stats, temp_dir, Replies,
};
use crate::distributed::{loopback, Executor};

pub(crate) const RECOGNISER: &str = "pretrained/ch_PP-OCRv4_rec_infer.onnx";

pub(crate) const ROW: [usize; 3] = [3, 48, 320];
pub(crate) const OUTPUT: &str = "softmax_11.tmp_0";

fn recogniser_graph(instances: usize) -> GraphSpec {
    let path = model(RECOGNISER);
    let yaml = format!(
        "name: rec\ninputs:\n  - {{name: x, dtype: f32, shape: [3, 48, 320]}}\nnodes:\n  - model:\n      id: rec\n      path: {}\n      inputs: {{x: x}}\n      batching: {{max_size: 16, max_delay_us: 2000}}\n      executor: {{instances: {instances}, intra_op_threads: 1}}\noutputs:\n  - {{name: probs, from: rec.{OUTPUT}}}\n",
        path.display()
    );
    GraphSpec::from_yaml(&yaml, "rec.yaml").expect("graph parses")
}

/// Line `i`'s pixels: a smooth pattern of its own in [-1, 1].
pub(crate) fn line(i: usize) -> Vec<f32> {
    let n: usize = ROW.iter().product();
    (0..n)
        .map(|k| (k as f32 * 0.013 + i as f32 * 1.7).sin() * 0.9)
        .collect()
}

/// Sends lines 0–3 to `running` as one group: each is answered once, with what one ONNX Runtime
/// call of all four gives for it.
fn four_lines_match_one_call_of_them(running: &RunningGraph) {
    let replies = Replies::default();
    let (tx, rx) = channel();
    let rows = (0..4u64)
        .map(|i| {
            let inputs = vec![named("x", Tensor::f32(ROW.to_vec(), line(i as usize)))];
            (inputs, replies.responder(i, tx.clone()))
        })
        .collect();
    running.runtime().submit_group(rows).expect("admitted");
    drop(tx);
    let mut got: Vec<(u64, Vec<f32>)> = rx
        .iter()
        .map(|(tag, r)| {
            let reply = r.unwrap_or_else(|e| panic!("line {tag} failed: {e}"));
            let probs = reply
                .output("probs")
                .and_then(Tensor::as_f32)
                .expect("probs");
            (tag, probs.to_vec())
        })
        .collect();
    got.sort_by_key(|(tag, _)| *tag);
    assert_eq!(got.len(), 4, "every line answered");
    assert!(replies.counts().values().all(|&c| c == 1), "none twice");
    let all: Vec<f32> = (0..4).flat_map(line).collect();
    let mut shape = vec![4];
    shape.extend(ROW);
    let want = direct_ort(&model(RECOGNISER), "x", &shape, &all);
    let per_row = want.len() / 4;
    for (tag, probs) in &got {
        let i = *tag as usize;
        assert_close(
            probs,
            &want[i * per_row..(i + 1) * per_row],
            1e-4,
            &format!("line {i}"),
        );
    }
}

#[test]
fn an_idle_nodes_free_sessions_each_run_part_of_a_batch() {
    let graph = plan_spec(&recogniser_graph(2), Path::new(".")).expect("valid");
    let running = start(graph.plan, RuntimeOptions::default()).expect("starts");
    let rt = running.runtime();
    let stats = || node_stats(&running, "rec");
    // One line first: the node measures its time per row on it.
    rt.infer(vec![named("x", Tensor::f32(ROW.to_vec(), line(9)))])
        .expect("a lone line is answered");
    let before = stats();
    assert_eq!((before.runs, before.rows), (1, 1));

    // Four lines as one group: they reach the node as one batch, while both sessions are free.
    four_lines_match_one_call_of_them(&running);
    let after = stats();
    assert_eq!(after.rows - before.rows, 4, "each line inferred once");
    assert_eq!(
        after.runs - before.runs,
        2,
        "two calls, one per free session: {after:?}"
    );
    assert_eq!(
        after.batch_sizes[1] - before.batch_sizes[1],
        2,
        "of two rows each"
    );
    running.shutdown();
}

#[test]
fn one_session_takes_the_batch_in_one_call() {
    let graph = plan_spec(&recogniser_graph(1), Path::new(".")).expect("valid");
    let running = start(graph.plan, RuntimeOptions::default()).expect("starts");
    let rt = running.runtime();
    rt.infer(vec![named("x", Tensor::f32(ROW.to_vec(), line(9)))])
        .expect("a lone line is answered");
    four_lines_match_one_call_of_them(&running);
    let stats = node_stats(&running, "rec");
    assert_eq!(
        (stats.runs, stats.rows),
        (2, 5),
        "the four lines in one call"
    );
    running.shutdown();
}

#[test]
fn a_remote_executors_free_sessions_each_run_part_of_a_query() {
    let endpoint = loopback();
    let _executor =
        Executor::serving_with("rec-exec", &endpoint, RECOGNISER, &["--instances", "2"]);
    let dir = temp_dir("spread-remote");
    let yaml = format!(
        "name: rec\ninputs:\n  - {{name: x, dtype: f32, shape: [3, 48, 320]}}\nexecutors:\n  - {{name: rec-exec, endpoint: \"{endpoint}\"}}\nnodes:\n  - model:\n      id: m\n      path: {}\n      inputs: {{x: x}}\n      batching: {{max_size: 8}}\n      executor: {{timeout_ms: 20000}}\n      replicas: [rec-exec]\noutputs:\n  - {{name: probs, from: m.{OUTPUT}}}\n",
        model(RECOGNISER).display()
    );
    let path = dir.0.join("rec.yaml");
    std::fs::write(&path, yaml).expect("write graph");
    let graph = load_graph(&path).expect("valid");
    let running = start(graph.plan, RuntimeOptions::default()).expect("starts");
    // One line first (the executor measures its time per row), then four in one query.
    running
        .runtime()
        .infer(vec![named("x", Tensor::f32(ROW.to_vec(), line(9)))])
        .expect("a lone line is answered");
    four_lines_match_one_call_of_them(&running);
    running.shutdown();
}
