//! A CPU node's batches grow only while its own calls have measured rows cheaper in larger
//! calls (`batching.grow: while_cheaper`, the default): PP-OCRv4's recogniser on one session
//! measures its CPU time per row in calls of twelve, eight, four, two and one lines, and a later
//! group of twelve runs in calls no larger than the size it then prefers (one call of twelve
//! while it prefers none). Which size a machine's caches make cheapest is the machine's; what holds
//! everywhere is that the calls follow what the node measured, that every line is answered once,
//! and that each line's answer is what ONNX Runtime gives it alone. Under `grow: to_max_size` the
//! group of twelve is one call whatever was measured. A `weir executor` process measures its own
//! calls the same way, reports the size it prefers in its load reports, and runs a query of twelve
//! lines as calls of that size.

use std::path::Path;
use std::time::{Duration, Instant};

use weir::{plan_spec, start, GraphSpec, RunningGraph, RuntimeOptions, Tensor};
use weir_executor::protocol::{LoadReport, ModelLoad};
use zenoh::Wait;

use crate::common::{assert_close, channel, direct_ort, model, named, node_stats, Replies};
use crate::distributed::{loopback, Executor};
use crate::hostile_zenoh::peer;
use crate::spread::{line, OUTPUT, RECOGNISER, ROW};
use weir_operators::model::executor::{batch_bucket_bound, batch_bucket_of as bucket};

/// Lines per large group.
const GROUP: usize = 12;

fn graph(grow: &str) -> RunningGraph {
    let yaml = format!(
        "name: rec\ninputs:\n  - {{name: x, dtype: f32, shape: [3, 48, 320]}}\nnodes:\n  - model:\n      id: rec\n      path: {}\n      inputs: {{x: x}}\n      batching: {{max_size: 16, max_delay_us: 2000, grow: {grow}}}\n      executor: {{instances: 1, intra_op_threads: 1}}\noutputs:\n  - {{name: probs, from: rec.{OUTPUT}}}\n",
        model(RECOGNISER).display()
    );
    started(&yaml)
}

/// The recogniser's node `m` on the `weir executor` process `executor`, which serves it as model
/// `m`; batches of up to 16 lines go to it as one query each.
fn remote_graph(executor: &Executor) -> RunningGraph {
    let yaml = format!(
        "name: rec\ninputs:\n  - {{name: x, dtype: f32, shape: [3, 48, 320]}}\nexecutors:\n  - {{name: {}, endpoint: \"{}\"}}\nnodes:\n  - model:\n      id: m\n      path: {}\n      inputs: {{x: x}}\n      batching: {{max_size: 16, max_delay_us: 2000}}\n      executor: {{timeout_ms: 20000}}\n      replicas: [{}]\noutputs:\n  - {{name: probs, from: m.{OUTPUT}}}\n",
        executor.name(),
        executor.endpoint(),
        model(RECOGNISER).display(),
        executor.name()
    );
    started(&yaml)
}

fn started(yaml: &str) -> RunningGraph {
    let spec = GraphSpec::from_yaml(yaml, "rec.yaml").expect("graph parses");
    let graph = plan_spec(&spec, Path::new(".")).expect("valid");
    start(graph.plan, RuntimeOptions::default()).expect("starts")
}

/// Sends lines `first..first + n` as one group (one batch at the node) and checks each is
/// answered once, with what ONNX Runtime gives that line in a call of its own.
fn group(running: &RunningGraph, first: usize, n: usize) {
    let replies = Replies::default();
    let (tx, rx) = channel();
    let rows = (first..first + n)
        .map(|i| {
            let inputs = vec![named("x", Tensor::f32(ROW.to_vec(), line(i)))];
            (inputs, replies.responder(i as u64, tx.clone()))
        })
        .collect();
    running.runtime().submit_group(rows).expect("admitted");
    drop(tx);
    let mut answered = 0;
    for (tag, reply) in rx.iter() {
        let reply = reply.unwrap_or_else(|e| panic!("line {tag} failed: {e}"));
        let probs = reply
            .output("probs")
            .and_then(Tensor::as_f32)
            .expect("probs");
        let mut shape = vec![1];
        shape.extend(ROW);
        let alone = direct_ort(&model(RECOGNISER), "x", &shape, &line(tag as usize));
        assert_close(probs, &alone, 1e-4, &format!("line {tag}"));
        answered += 1;
    }
    assert_eq!(answered, n, "every line answered");
    assert_eq!(replies.counts().len(), n);
    assert!(replies.counts().values().all(|&c| c == 1), "none twice");
}

/// Groups of [`GROUP`], 8, 4, 2 and 1 lines, three times: three calls measured in each batch-size
/// bucket up to 16 rows. Largest first, so each group is still one call when it is measured: a
/// preferred size (which cuts larger groups) needs the sizes below it measured too.
fn measure(running: &RunningGraph) {
    for round in 0..3 {
        let mut first = 100 * round;
        for n in [GROUP, 8, 4, 2, 1] {
            group(running, first, n);
            first += n;
        }
    }
}

#[test]
fn a_group_runs_in_calls_no_larger_than_the_size_the_node_prefers() {
    let running = graph("while_cheaper");
    measure(&running);
    let before = node_stats(&running, "rec");
    let cost = before
        .row_cost
        .clone()
        .expect("a one-thread CPU node measures");
    for rows in [1, 2, 4, 8, GROUP] {
        assert!(
            cost.per_row[bucket(rows)].is_some(),
            "calls of {rows} rows measured: {cost:?}"
        );
    }
    group(&running, 1000, GROUP);
    let after = node_stats(&running, "rec");
    assert_eq!(
        after.rows - before.rows,
        GROUP as u64,
        "each line inferred once"
    );
    let calls: Vec<u64> = after
        .batch_sizes
        .iter()
        .zip(&before.batch_sizes)
        .map(|(a, b)| a - b)
        .collect();
    match cost.preferred {
        None => assert_eq!(
            calls[bucket(GROUP)],
            1,
            "no size measured cheaper than twelve: one call of twelve: {cost:?}"
        ),
        Some(p) => {
            // A call may explore the size one bucket up; none is larger.
            let largest = batch_bucket_bound(bucket(p) + 1);
            assert!(
                calls[bucket(largest) + 1..].iter().all(|&c| c == 0),
                "calls by size {calls:?} with {p} rows preferred ({cost:?})"
            );
            assert!(
                (after.runs - before.runs) as usize >= GROUP.div_ceil(largest),
                "twelve lines in calls of at most {largest}: {calls:?}"
            );
        }
    }
    running.shutdown();
}

#[test]
fn to_max_size_keeps_one_call_per_group_whatever_was_measured() {
    let running = graph("to_max_size");
    measure(&running);
    let before = node_stats(&running, "rec");
    assert!(before.row_cost.is_none(), "nothing measured");
    group(&running, 1000, GROUP);
    let after = node_stats(&running, "rec");
    assert_eq!(
        (after.runs - before.runs, after.rows - before.rows),
        (1, GROUP as u64),
        "the group in one call"
    );
    running.shutdown();
}

/// Model `m`'s load in the first report of executor `name` that counts `rows` rows inferred.
fn load_after(session: &zenoh::Session, name: &str, rows: u64) -> ModelLoad {
    let reports = session
        .declare_subscriber(format!("weir/executor/{name}/load"))
        .wait()
        .expect("subscriber");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let sample = reports
            .recv_timeout(left)
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("no load report counting {rows} rows"));
        let report: LoadReport =
            serde_json::from_slice(&sample.payload().to_bytes()).expect("a load report");
        if let Some(m) = report.models.get("m").filter(|m| m.rows >= rows) {
            return m.clone();
        }
    }
}

#[test]
fn an_executor_runs_a_query_in_calls_no_larger_than_the_size_it_prefers() {
    let endpoint = loopback();
    let executor = Executor::serving_with(
        "rec-exec",
        &endpoint,
        RECOGNISER,
        &["--max-batch", "16", "--batch-grow", "while-cheaper"],
    );
    let running = remote_graph(&executor);
    let session = peer(&endpoint, None);
    measure(&running);
    let measured = 3 * (GROUP + 8 + 4 + 2 + 1) as u64;
    let before = load_after(&session, executor.name(), measured);
    assert_eq!(before.rows, measured, "each line inferred once");
    group(&running, 1000, GROUP);
    let after = load_after(&session, executor.name(), measured + GROUP as u64);
    assert_eq!(
        after.rows,
        measured + GROUP as u64,
        "each line inferred once"
    );
    let calls = after.runs - before.runs;
    match before.preferred_batch {
        None => assert_eq!(calls, 1, "no size preferred: the query in one call"),
        Some(p) => {
            // A call may explore the size one bucket up; none is larger.
            let largest = batch_bucket_bound(bucket(p as usize) + 1);
            assert!(
                calls as usize >= GROUP.div_ceil(largest),
                "twelve lines in {calls} calls with {p} rows preferred"
            );
        }
    }
    running.shutdown();
}
