//! `/metrics` of a graph's executors, one series per model node: queue, calls, rows, errors, busy
//! time, jobs answered and their time at the node, a padded node's batches by how they were cut
//! (counters), the batch-size and call-duration histograms, and a CPU node's measured CPU time
//! per row by batch size with the batch size it prefers (gauges), read from each executor's
//! [`LoadSnapshot`] at scrape time.

use std::fmt;

use prometheus_client::encoding::DescriptorEncoder;
use weir_engine::metrics::{
    self as m, counter, gauge, histogram, node_labels, per_node, Buckets, Value,
};

use super::{LoadSnapshot, BATCH_BUCKET_BOUNDS, CALL_SECONDS_BOUNDS};

/// A counter's name, help text, and how to read it from a snapshot.
type CounterSpec = (&'static str, &'static str, fn(&LoadSnapshot) -> Value);

const COUNTERS: [CounterSpec; 9] = [
    (
        m::EXECUTOR_ENQUEUED_TOTAL,
        "Batches queued for an executor.",
        |s| s.enqueued.into(),
    ),
    (
        m::EXECUTOR_DEQUEUED_TOTAL,
        "Batches taken by a session.",
        |s| s.dequeued.into(),
    ),
    (m::EXECUTOR_RUNS_TOTAL, "Inference calls.", |s| {
        s.runs.into()
    }),
    (m::EXECUTOR_ROWS_TOTAL, "Requests inferred.", |s| {
        s.rows.into()
    }),
    (
        m::EXECUTOR_ERRORS_TOTAL,
        "Inference calls that failed.",
        |s| s.errors.into(),
    ),
    (
        m::EXECUTOR_WARMUP_RUNS_TOTAL,
        "Warm-up calls run on the node's sessions before the graph reported ready.",
        |s| s.warmup_runs.into(),
    ),
    (
        m::EXECUTOR_BUSY_SECONDS_TOTAL,
        "Time inside ONNX Runtime, summed over sessions.",
        |s| s.busy.as_secs_f64().into(),
    ),
    (
        m::EXECUTOR_JOBS_ANSWERED_TOTAL,
        "Jobs answered by an inference call.",
        |s| s.jobs_answered.into(),
    ),
    (
        m::EXECUTOR_JOB_SECONDS_TOTAL,
        "Time from queued to answered (queue wait plus call), summed over jobs.",
        |s| s.sojourn.as_secs_f64().into(),
    ),
];

/// Writes the executor families of every graph in `graphs` (graph, its (node, snapshot) list).
///
/// # Errors
/// When writing fails.
pub fn encode(
    encoder: &mut DescriptorEncoder,
    graphs: &[(&str, Vec<(String, LoadSnapshot)>)],
) -> fmt::Result {
    let stats = per_node(graphs);
    for (name, help, value) in COUNTERS {
        counter(
            encoder,
            name,
            help,
            stats.iter().map(|(g, n, s)| (node_labels(g, n), value(s))),
        )?;
    }
    counter(
        encoder,
        m::EXECUTOR_PAD_DECISIONS_TOTAL,
        "A padded node's batches of mixed lengths, by whether they ran as one padded call or split into calls of nearer lengths.",
        stats.iter().flat_map(|(g, n, s)| {
            [("padded", s.padded_batches), ("split", s.split_batches)].map(|(decision, count)| {
                (
                    [("graph", *g), ("node", *n), ("decision", decision)],
                    Value::from(count),
                )
            })
        }),
    )?;
    let sizes = BATCH_BUCKET_BOUNDS.map(|b| b as f64);
    histogram(
        encoder,
        m::NODE_BATCH_SIZE,
        "Rows per inference call.",
        stats.iter().map(|(g, n, s)| {
            let buckets = Buckets {
                bounds: &sizes,
                counts: &s.batch_sizes,
                sum: s.rows as f64,
                count: s.runs,
            };
            (node_labels(g, n), buckets)
        }),
    )?;
    let bucket_names: Vec<String> = BATCH_BUCKET_BOUNDS
        .iter()
        .map(ToString::to_string)
        .chain(["+Inf".to_string()])
        .collect();
    gauge(
        encoder,
        m::NODE_ROW_CPU_SECONDS,
        "A CPU node's measured CPU time per row in calls of each batch-size bucket (batch_le: the bucket's largest size), where it measures it.",
        stats.iter().flat_map(|(g, n, s)| {
            let per_row = s.row_cost.as_ref().map(|c| c.per_row).unwrap_or_default();
            per_row
                .into_iter()
                .zip(&bucket_names)
                .filter_map(move |(cost, bucket)| {
                    let labels = [("graph", *g), ("node", *n), ("batch_le", bucket.as_str())];
                    cost.map(|c| (labels, c.as_secs_f64()))
                })
        }),
    )?;
    gauge(
        encoder,
        m::NODE_PREFERRED_BATCH_SIZE,
        "The largest batch a CPU node's calls take now, where larger calls measured dearer per row.",
        stats.iter().filter_map(|(g, n, s)| {
            let preferred = s.row_cost.as_ref()?.preferred?;
            Some((node_labels(g, n), i64::try_from(preferred).unwrap_or(i64::MAX)))
        }),
    )?;
    histogram(
        encoder,
        m::EXECUTOR_INFERENCE_SECONDS,
        "Duration of each inference call.",
        stats.iter().map(|(g, n, s)| {
            let buckets = Buckets {
                bounds: &CALL_SECONDS_BOUNDS,
                counts: &s.call_seconds,
                sum: s.busy.as_secs_f64(),
                count: s.runs,
            };
            (node_labels(g, n), buckets)
        }),
    )
}
