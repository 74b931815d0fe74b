//! A CPU node's batches grow only while its own calls have measured rows cheaper in larger
//! calls (`batching.grow: while_cheaper`, the default): PP-OCRv4's recogniser on one session
//! measures its CPU time per row in calls of twelve, eight, four, two and one lines, and a later
//! group of twelve runs in calls no larger than the size it then prefers (one call of twelve
//! while it prefers none). Which size a machine's caches make cheapest is the machine's; what holds
//! everywhere is that the calls follow what the node measured, that every line is answered once,
//! and that each line's answer is what ONNX Runtime gives it alone. Under `grow: to_max_size` the
//! group of twelve is one call whatever was measured.

use std::path::Path;

use weir::{plan_spec, start, GraphSpec, RunningGraph, RuntimeOptions, Tensor};

use crate::common::{assert_close, channel, direct_ort, model, named, node_stats, Replies};
use crate::spread::{line, OUTPUT, RECOGNISER, ROW};
use weir_operators::model::executor::{batch_bucket_bound, batch_bucket_of as bucket};

/// Lines per large group.
const GROUP: usize = 12;

fn graph(grow: &str) -> RunningGraph {
    let yaml = format!(
        "name: rec\ninputs:\n  - {{name: x, dtype: f32, shape: [3, 48, 320]}}\nnodes:\n  - model:\n      id: rec\n      path: {}\n      inputs: {{x: x}}\n      batching: {{max_size: 16, max_delay_us: 2000, grow: {grow}}}\n      executor: {{instances: 1, intra_op_threads: 1}}\noutputs:\n  - {{name: probs, from: rec.{OUTPUT}}}\n",
        model(RECOGNISER).display()
    );
    let spec = GraphSpec::from_yaml(&yaml, "rec.yaml").expect("graph parses");
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
