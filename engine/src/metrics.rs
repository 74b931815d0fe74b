//! weir's metrics vocabulary: every metric name, in one place, and the few shapes every family is
//! written in (a counter, a gauge or a histogram of labelled series), through `prometheus-client`'s
//! Prometheus text encoder (format 0.0.4, served as `text/plain; version=0.0.4`). Its OpenMetrics
//! encoder (`encoding::text`) would name a counter's family without `_total` in `# TYPE` and end
//! with `# EOF`, which a scraper reading the 0.0.4 format takes for untyped series; the 0.0.4
//! encoder keeps every family's name, type and help as they are.
//!
//! Names follow Prometheus conventions: `weir_<subsystem>_<name>_<unit>`, counters end in
//! `_total`, base units. Each family renders its own series where its values are produced (the
//! executors, replica pools, SERF, HAMS in `weir-operators`; requests and connections in the HTTP
//! connector; admission here), as a [`Collector`]: the values already live in lock-free counters
//! and snapshots those parts keep for themselves, so a collector reads them at scrape time instead
//! of mirroring every update into a second set of metric objects. A registry holding the
//! collectors is built once per metrics source and encoded on each scrape.

use std::fmt;

use prometheus_client::encoding::{
    CounterValueEncoder, DescriptorEncoder, EncodeCounterValue, EncodeGaugeValue, EncodeLabelSet,
    EncodeMetric, GaugeValueEncoder, MetricEncoder, NoLabelSet,
};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

pub use prometheus_client::collector::Collector;

#[cfg(doc)]
use crate::runtime::GraphRuntime;

/// Requests answered, by graph and outcome.
pub const REQUESTS_TOTAL: &str = "weir_requests_total";
/// Time from admission to answer.
pub const REQUEST_DURATION_SECONDS: &str = "weir_request_duration_seconds";
/// Batches (jobs) put on an executor's queue.
pub const EXECUTOR_ENQUEUED_TOTAL: &str = "weir_executor_enqueued_total";
/// Batches taken off an executor's queue.
pub const EXECUTOR_DEQUEUED_TOTAL: &str = "weir_executor_dequeued_total";
/// Inference calls made by an executor.
pub const EXECUTOR_RUNS_TOTAL: &str = "weir_executor_runs_total";
/// Rows (requests) inferred by an executor.
pub const EXECUTOR_ROWS_TOTAL: &str = "weir_executor_rows_total";
/// Inference calls that failed.
pub const EXECUTOR_ERRORS_TOTAL: &str = "weir_executor_errors_total";
/// Warm-up calls a node's sessions ran before the graph reported ready, per node.
pub const EXECUTOR_WARMUP_RUNS_TOTAL: &str = "weir_executor_warmup_runs_total";
/// Time sessions spent inside ONNX Runtime.
pub const EXECUTOR_BUSY_SECONDS_TOTAL: &str = "weir_executor_busy_seconds_total";
/// Jobs an executor answered (one per request row set handed to it).
pub const EXECUTOR_JOBS_ANSWERED_TOTAL: &str = "weir_executor_jobs_answered_total";
/// Time from a job being queued at an executor to its answer (queue wait plus call), summed.
pub const EXECUTOR_JOB_SECONDS_TOTAL: &str = "weir_executor_job_seconds_total";
/// A padded node's batches of mixed lengths, by how they ran (`decision`: `padded` as one call,
/// `split` into calls of nearer lengths).
pub const EXECUTOR_PAD_DECISIONS_TOTAL: &str = "weir_executor_pad_decisions_total";
/// Duration of each inference call of a node's executor.
pub const EXECUTOR_INFERENCE_SECONDS: &str = "weir_executor_inference_seconds";
/// Rows per inference call.
pub const NODE_BATCH_SIZE: &str = "weir_node_batch_size";
/// A CPU node's measured CPU time per row, by the batch-size bucket of its calls (`batch_le`:
/// the bucket's largest size).
pub const NODE_ROW_CPU_SECONDS: &str = "weir_node_row_cpu_seconds";
/// The largest batch a CPU node's calls take now, where larger calls have measured dearer per
/// row (absent while its batches grow to `max_size`).
pub const NODE_PREFERRED_BATCH_SIZE: &str = "weir_node_preferred_batch_size";
/// Rows a model node answered expired instead of running: their deadline passed while they
/// waited.
pub const NODE_EXPIRED_TOTAL: &str = "weir_node_expired_total";
/// Per gather node: requests whose parts it joined into one row.
pub const GATHER_JOINED_TOTAL: &str = "weir_gather_joined_total";
/// Per gather node: parts it took.
pub const GATHER_PARTS_TOTAL: &str = "weir_gather_parts_total";
/// Per gather node: requests whose parts could not be joined.
pub const GATHER_FAILED_TOTAL: &str = "weir_gather_failed_total";
/// Per gather node: requests dropped incomplete when their epoch closed (a part failed elsewhere).
pub const GATHER_DROPPED_TOTAL: &str = "weir_gather_dropped_total";
/// Per gather node: joins open, waiting for parts.
pub const GATHER_WAITING: &str = "weir_gather_waiting";
/// Per gather node: time joined requests waited for their last part, summed.
pub const GATHER_WAIT_SECONDS_TOTAL: &str = "weir_gather_wait_seconds_total";
/// Per parity encoder (`<node>.parity_encode`): coding groups formed (ParM).
pub const PARITY_GROUPS_TOTAL: &str = "weir_parity_groups_total";
/// Per parity model node (`<node>.parity`, `<node>.parity1`, ...) and outcome (`dispatched`,
/// `refused`, `answered`, `failed`): its parity jobs.
pub const PARITY_JOBS_TOTAL: &str = "weir_parity_jobs_total";
/// Per parity decoder: real predictions that came after their job was reconstructed (dropped).
pub const PARITY_LATE_REAL_TOTAL: &str = "weir_parity_late_real_total";
/// Per parity decoder (`<node>.parity_decode`) and reason (`late`, `failed`): jobs answered by
/// reconstruction (ParM).
pub const PARITY_RECONSTRUCTIONS_TOTAL: &str = "weir_parity_reconstructions_total";
/// Per parity decoder: the fraction of its node's answers that were reconstructed.
pub const PARITY_RECONSTRUCTED_FRACTION: &str = "weir_parity_reconstructed_fraction";
/// Per parity decoder: jobs answered with their real prediction.
pub const PARITY_REAL_ANSWERS_TOTAL: &str = "weir_parity_real_answers_total";
/// Per parity decoder: failed jobs that could not be reconstructed.
pub const PARITY_UNRECOVERED_TOTAL: &str = "weir_parity_unrecovered_total";
/// Per parity decoder: how long after dispatch a prediction counts as late now.
pub const PARITY_DEADLINE_SECONDS: &str = "weir_parity_deadline_seconds";
/// Per replica of a model node: 1 while alive.
pub const REPLICA_ALIVE: &str = "weir_replica_alive";
/// Per replica: jobs sent and not answered yet.
pub const REPLICA_OUTSTANDING: &str = "weir_replica_outstanding";
/// Per replica: jobs sent.
pub const REPLICA_DISPATCHED_TOTAL: &str = "weir_replica_dispatched_total";
/// Per node: jobs re-dispatched to another replica.
pub const REPLICA_REDISPATCHED_TOTAL: &str = "weir_replica_redispatched_total";
/// Per node: jobs failed because no replica was alive.
pub const REPLICA_FAILED_TOTAL: &str = "weir_replica_failed_total";
/// Per node: late answers suppressed.
pub const REPLICA_LATE_ANSWERS_TOTAL: &str = "weir_replica_late_answers_total";
/// Per `parallelism: auto` node: requests its executor runs at once now (SERF).
pub const PARALLELISM_CONCURRENCY: &str = "weir_parallelism_concurrency";
/// Per `parallelism: auto` node: intra-op threads of each new request now (SERF).
pub const PARALLELISM_THREADS: &str = "weir_parallelism_threads";
/// Per `parallelism: auto` node: configuration switches applied (SERF).
pub const PARALLELISM_SWITCHES_TOTAL: &str = "weir_parallelism_switches_total";
/// Per `parallelism: auto` node: the scheduler's arrival-rate estimate, requests per second.
pub const ARRIVAL_RATE_ESTIMATE: &str = "weir_arrival_rate_estimate";
/// Per `parallelism: auto` node: re-evaluations of its configurations with measured service rates (SERF).
pub const SERF_PROFILE_UPDATES_TOTAL: &str = "weir_serf_profile_updates_total";
/// Per `parallelism: auto` node: re-evaluations that changed the configurations' ranking (SERF).
pub const SERF_RANKING_CHANGES_TOTAL: &str = "weir_serf_ranking_changes_total";
/// Per `parallelism: auto` node: explorations of configurations without fresh measurements (SERF).
pub const SERF_EXPLORATIONS_TOTAL: &str = "weir_serf_explorations_total";
/// Per `parallelism: auto` node: switches away from a configuration whose queue kept growing (SERF's
/// backlog guard).
pub const SERF_BACKLOG_SWITCHES_TOTAL: &str = "weir_serf_backlog_switches_total";
/// Per `parallelism: auto` node: requests waiting in front of its sessions at the last control tick
/// (what SERF's backlog guard watches; for a graph's only model node, counted from admission).
pub const SERF_WAITING: &str = "weir_serf_waiting";
/// Per `parallelism: auto` node and tuple (`running`, `threads`): service times measured (SERF).
pub const SERF_SERVICE_SAMPLES_TOTAL: &str = "weir_serf_service_samples_total";
/// Per `parallelism: auto` node: service times dropped because the control thread fell behind (SERF).
pub const SERF_SERVICE_SAMPLES_DROPPED_TOTAL: &str = "weir_serf_service_samples_dropped_total";
/// Per `parallelism: auto` node: service times left out because their call began within the settling
/// time after a switch of configuration (SERF; `weir_serf::online`, *Settling after a switch*).
pub const SERF_SERVICE_SAMPLES_SETTLING_TOTAL: &str = "weir_serf_service_samples_settling_total";
/// Per `parallelism: auto` node and tuple: the measured service rate `μ_i` in use, requests per second,
/// once it overrides the offline profile's, calls after an idle gap counted at back-to-back speed
/// (SERF; `weir_serf::online`, *Idle gaps*).
pub const SERF_MEASURED_SERVICE_RATE: &str = "weir_serf_measured_service_rate";
/// Per `parallelism: auto` node and configuration (`concurrency`, `threads`): the mean latency the
/// scheduler predicted for it at its last update's planned load, seconds (absent where unstable).
pub const SERF_PREDICTED_LATENCY: &str = "weir_serf_predicted_latency_seconds";
/// Per `parallelism: auto` node and configuration: the planned load over its capacity (SERF).
pub const SERF_PREDICTED_UTILISATION: &str = "weir_serf_predicted_utilisation";
/// Per `parallelism: auto` node and configuration: its utilisation cap now (SERF's; higher for a
/// configuration shown to hold at the load, `weir_serf::scheduler`, *Earned headroom*; a
/// configuration other than the running one enters only up to `1 − utilisation_band` of it).
pub const SERF_UTILISATION_CAP: &str = "weir_serf_utilisation_cap";
/// Counter: HTTP connections accepted and served (open = accepted - closed).
pub const HTTP_CONNECTIONS_ACCEPTED_TOTAL: &str = "weir_http_connections_accepted_total";
/// Counter: HTTP connections served and since closed.
pub const HTTP_CONNECTIONS_CLOSED_TOTAL: &str = "weir_http_connections_closed_total";
/// Counter: HTTP connections refused at the connection limit.
pub const HTTP_CONNECTIONS_REFUSED_TOTAL: &str = "weir_http_connections_refused_total";

/// Gauge: the process's resident memory, in bytes (Prometheus's standard process metric).
pub const PROCESS_RESIDENT_MEMORY_BYTES: &str = "process_resident_memory_bytes";
/// Counter: CPU time the process used, user and system, in seconds (standard).
pub const PROCESS_CPU_SECONDS_TOTAL: &str = "process_cpu_seconds_total";
/// Gauge: file descriptors the process holds open (standard).
pub const PROCESS_OPEN_FDS: &str = "process_open_fds";
/// Gauge: the process's threads (standard).
pub const PROCESS_THREADS: &str = "process_threads";

/// Triton's names (`--metrics-compat triton`), written by the HTTP connector's
/// `triton_metrics`, which says which of weir's quantities fills each.
pub mod triton {
    /// Counter: successful inference requests.
    pub const REQUEST_SUCCESS: &str = "nv_inference_request_success";
    /// Counter: failed inference requests.
    pub const REQUEST_FAILURE: &str = "nv_inference_request_failure";
    /// Counter: inferences performed (a batch of n counts n).
    pub const COUNT: &str = "nv_inference_count";
    /// Counter: model executions (calls).
    pub const EXEC_COUNT: &str = "nv_inference_exec_count";
    /// Counter: cumulative request duration, microseconds.
    pub const REQUEST_DURATION_US: &str = "nv_inference_request_duration_us";
    /// Counter: cumulative queue duration, microseconds.
    pub const QUEUE_DURATION_US: &str = "nv_inference_queue_duration_us";
    /// Counter: cumulative input preparation duration, microseconds.
    pub const COMPUTE_INPUT_DURATION_US: &str = "nv_inference_compute_input_duration_us";
    /// Counter: cumulative inference duration, microseconds.
    pub const COMPUTE_INFER_DURATION_US: &str = "nv_inference_compute_infer_duration_us";
    /// Counter: cumulative output extraction duration, microseconds.
    pub const COMPUTE_OUTPUT_DURATION_US: &str = "nv_inference_compute_output_duration_us";
}

/// Per graph: requests admitted and not yet answered.
pub const GRAPH_IN_FLIGHT: &str = "weir_graph_in_flight";
/// Per stateful node: epoch of its primary (bumped by every promotion; HAMS).
pub const HAMS_EPOCH: &str = "weir_hams_epoch";
/// Per stateful node: highest state version applied on a backup (HAMS).
pub const HAMS_DURABLE_VERSION: &str = "weir_hams_durable_version";
/// Per stateful node: rows whose outputs are kept until their replies leave (HAMS).
pub const HAMS_RECORDED_ROWS: &str = "weir_hams_recorded_rows";
/// Per stateful node: batches sent and not yet durable (HAMS).
pub const HAMS_UNDURABLE_BATCHES: &str = "weir_hams_undurable_batches";
/// Per graph: replies the release gate holds until the states they depend on are durable (HAMS).
pub const HAMS_HELD_REPLIES: &str = "weir_hams_held_replies";
/// Per graph: answers of superseded request attempts dropped (HAMS).
pub const HAMS_STALE_ANSWERS_TOTAL: &str = "weir_hams_stale_answers_total";

/// Trace spans the OTLP collector took.
pub const TRACE_SPANS_EXPORTED_TOTAL: &str = "weir_trace_spans_exported_total";
/// Trace spans dropped, by reason (`queue_full`, `export_failed`).
pub const TRACE_SPANS_DROPPED_TOTAL: &str = "weir_trace_spans_dropped_total";

/// A [`Collector`] made of a function writing families, for a family written on its own.
pub struct FromFn<F>(pub F);

impl<F> fmt::Debug for FromFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FromFn")
    }
}

impl<F> Collector for FromFn<F>
where
    F: Fn(&mut DescriptorEncoder) -> fmt::Result + Send + Sync + 'static,
{
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        (self.0)(&mut encoder)
    }
}

/// A registry holding `collector` alone.
pub fn registry_of(collector: impl Collector) -> Registry {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(collector));
    registry
}

/// `registry`'s families in the Prometheus text format, appended to `out`.
///
/// # Errors
/// When a collector fails to write.
pub fn encode(out: &mut String, registry: &Registry) -> fmt::Result {
    prometheus_client::encoding::prometheus_text::encode(out, registry)
}

/// `collector`'s families in the Prometheus text format.
///
/// # Errors
/// When the collector fails to write.
pub fn text(collector: impl Collector) -> Result<String, fmt::Error> {
    let mut out = String::new();
    encode(&mut out, &registry_of(collector))?;
    Ok(out)
}

/// Every graph's per-node items as `(graph, node, item)`. A family is written once for the whole
/// process, with every graph's series under it: the text format allows one `# HELP`/`# TYPE`
/// block per family, so serving several graphs must not write one block per graph.
pub fn per_node<'a, T>(
    graphs: &'a [(&'a str, Vec<(String, T)>)],
) -> Vec<(&'a str, &'a str, &'a T)> {
    graphs
        .iter()
        .flat_map(|(graph, nodes)| {
            nodes
                .iter()
                .map(move |(node, item)| (*graph, node.as_str(), item))
        })
        .collect()
}

/// The labels of a node's series: its graph and node.
pub fn node_labels<'a>(graph: &'a str, node: &'a str) -> [(&'static str, &'a str); 2] {
    [("graph", graph), ("node", node)]
}

/// Writes counter family `name` (ending in `_total`, which the encoder writes back) with one
/// sample per labelled series.
///
/// # Errors
/// When writing fails.
pub fn counter<L: EncodeLabelSet, V: EncodeCounterValue>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (L, V)>,
) -> fmt::Result {
    debug_assert!(name.ends_with("_total"), "counter {name} without _total");
    let family = name.strip_suffix("_total").unwrap_or(name);
    let mut metric = encoder.encode_descriptor(family, help, None, MetricType::Counter)?;
    for (labels, value) in series {
        ConstCounter::new(value).encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

/// Writes gauge family `name` with one sample per labelled series.
///
/// # Errors
/// When writing fails.
pub fn gauge<L: EncodeLabelSet, V: EncodeGaugeValue>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (L, V)>,
) -> fmt::Result {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in series {
        ConstGauge::new(value).encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

/// Writes histogram family `name` with one histogram per labelled series.
///
/// # Errors
/// When writing fails.
pub fn histogram<'a, L: EncodeLabelSet>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (L, Buckets<'a>)>,
) -> fmt::Result {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for (labels, buckets) in series {
        buckets.encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

/// A sample's value: a count (written as an integer) or a real quantity (seconds, rates).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    /// Events, rows, requests.
    Count(u64),
    /// Seconds, rates, ratios.
    Real(f64),
}

impl From<u64> for Value {
    fn from(n: u64) -> Self {
        Value::Count(n)
    }
}

impl From<usize> for Value {
    fn from(n: usize) -> Self {
        Value::Count(n as u64)
    }
}

impl From<f64> for Value {
    fn from(x: f64) -> Self {
        Value::Real(x)
    }
}

impl EncodeCounterValue for Value {
    fn encode(&self, encoder: &mut CounterValueEncoder) -> fmt::Result {
        match *self {
            Value::Count(n) => EncodeCounterValue::encode(&n, encoder),
            Value::Real(x) => EncodeCounterValue::encode(&x, encoder),
        }
    }
}

impl EncodeGaugeValue for Value {
    fn encode(&self, encoder: &mut GaugeValueEncoder) -> fmt::Result {
        match *self {
            Value::Count(n) => EncodeGaugeValue::encode(&n, encoder),
            Value::Real(x) => EncodeGaugeValue::encode(&x, encoder),
        }
    }
}

/// A histogram read from counters kept elsewhere: observations per bucket (not cumulative), the
/// last bucket open (`+Inf`), their sum and count.
#[derive(Debug, Clone, Copy)]
pub struct Buckets<'a> {
    /// Upper bounds of all buckets but the last.
    pub bounds: &'a [f64],
    /// Observations per bucket: one more than `bounds`.
    pub counts: &'a [u64],
    /// Sum of the observations.
    pub sum: f64,
    /// Number of observations.
    pub count: u64,
}

impl EncodeMetric for Buckets<'_> {
    fn encode(&self, mut encoder: MetricEncoder) -> fmt::Result {
        let buckets: Vec<(f64, u64)> = self
            .counts
            .iter()
            .enumerate()
            .map(|(i, &n)| (self.bounds.get(i).copied().unwrap_or(f64::INFINITY), n))
            .collect();
        encoder.encode_histogram::<NoLabelSet>(self.sum, self.count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// Writes the admission gauge of every graph in `graphs` (name, requests admitted and not yet
/// answered: [`GraphRuntime::in_flight`]).
///
/// # Errors
/// When writing fails.
pub fn in_flight<'a>(
    encoder: &mut DescriptorEncoder,
    graphs: impl IntoIterator<Item = (&'a str, usize)>,
) -> fmt::Result {
    gauge(
        encoder,
        GRAPH_IN_FLIGHT,
        "Requests admitted and not yet answered.",
        graphs.into_iter().map(|(graph, n)| ([("graph", graph)], n)),
    )
}
