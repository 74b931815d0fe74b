//! One model's queries: what a query carries, how it is checked against how the executor calls
//! the model, queued on its executor and answered.
//!
//! Each model is called as the graph's validation reads the same file: batched when every input's
//! first dimension is dynamic, one request per call when it is 1, and without a batch dimension
//! when an input cannot have one (a scalar, a first dimension fixed to more than 1) or the model
//! is named with `--unbatched`. A graph node with `batch: false` says so in its queries
//! ([`UNBATCHED_PARAMETER`]); a query that disagrees with how the executor calls the model is
//! refused with the flag that would fix it, never run with shapes the graph did not mean. A model
//! named with `--pad NAME=DIM:VALUE` joins requests that differ along the ONNX dimension `DIM` into
//! one call, padded as a graph node's `batching.pad` does; without it, jobs whose rows differ in
//! shape run row by row here. A query may carry the time its client still waits
//! ([`BUDGET_PARAMETER`], milliseconds; a duration, so no clocks need agree): a job still queued
//! when it runs out is answered `expired`, not run (`weir_operators::model::expiry`). A query of
//! several rows that finds several sessions free is run on them side by side when the model's
//! measured time per row says it pays (`ModelExecutor::spread`), its parts joined back into the
//! one reply (`Job::split`), as a graph process's node spreads a batch.
//!
//! Emulated heterogeneity (Kairos's pools of instance types; [`crate::emulation`]): the
//! session thread that ran a job sleeps before replying until the emulated type's time for the job
//! has passed (F × its real time with `--slowdown F`; `BASE + PER_ROW × rows` with
//! `--emulate-latency`), so the process behaves like another instance type, with real ONNX Runtime
//! outputs, and holds its session for that long (a slower machine is busy longer, not just late to
//! reply). The time counted is from when the session thread could start the job (the later of its
//! arrival and the thread's previous reply) to its outputs, so time queued behind other jobs is not
//! stretched. With `--emulate-latency` every job is its own call (the executor does not merge
//! queued jobs; the graph's router batches), so a job's rows are its call's rows.
//! The price of such an instance is a label in the graph's `executors:`, not the executor's.
//!
//! A query of a sampled request's job carries the model node's span as a W3C `traceparent`
//! ([`TRACE_PARAMETER`]); an executor started with `--otlp-endpoint` then exports a span of its
//! own under it (queue wait, ONNX Runtime call, batch size). A malformed value is ignored.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::debug;
use weir_engine::batch::TensorColumn;
use weir_engine::onnx::ModelMetadata;
use weir_engine::tensor::Dim;
use weir_engine::trace::{
    context::new_span_id, micros, wall_time, AttributeValue, JobTrace, SpanContext, SpanKind,
    SpanRecord, SpanSink,
};
use weir_engine::validate::CallShape;
use weir_operators::model::{ExecError, ExecutorConfig, Job, ModelExecutor};
use zenoh::query::Query;
use zenoh::Wait;

use crate::emulation::Emulation;
use crate::payload;
use crate::protocol::{ErrorKind, ErrorReply};

fn reply_error(query: &Query, kind: ErrorKind, message: String) {
    let body = ErrorReply { kind, message }.to_bytes();
    if let Err(e) = query.reply_err(body).wait() {
        debug!(error = %e, "Could not send a reply error.");
    }
}

thread_local! {
    /// When this session thread last replied (the earliest its next job could start).
    static FREE_SINCE: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
}

/// Emulates another instance type: on the session thread that just ran a job of `rows` rows queued
/// at `enqueued_at`, sleeps for [`Emulation::hold`] of the time since the job could start, and
/// returns how long. Runs only on executor threads (the `done` of a job that produced outputs).
fn emulate(emulation: Emulation, enqueued_at: Instant, rows: usize) -> Duration {
    if !emulation.is_on() {
        return Duration::ZERO;
    }
    let now = Instant::now();
    let started = FREE_SINCE
        .with(|f| f.get())
        .map_or(enqueued_at, |free| free.max(enqueued_at));
    let ran = now.saturating_duration_since(started);
    let hold = emulation.hold(ran, rows);
    std::thread::sleep(hold);
    FREE_SINCE.with(|f| f.set(Some(Instant::now())));
    hold
}

/// How the executor calls a model it serves: without a batch dimension when named among the
/// `--unbatched` models or when an input cannot have one (a scalar, or a first dimension fixed to
/// more than 1 that is not the `fixed` batch of a batch-specialised build), batched when every
/// input's first dimension is dynamic or every one is fixed to `fixed` (then padded to it), one
/// request per call otherwise. The graph's validation reads the same file the same way, but for `batch: false`,
/// which a query states ([`UNBATCHED_PARAMETER`]).
pub(crate) fn call_shape(meta: &ModelMetadata, unbatched: bool, fixed: Option<usize>) -> CallShape {
    let firsts: Vec<Option<&Dim>> = meta.inputs.iter().map(|i| i.dims.first()).collect();
    if let Some(n) = fixed.filter(|&n| n > 1) {
        let at_n = |d: &Option<&Dim>| matches!(d, Some(Dim::Fixed(f)) if *f == n);
        if !unbatched && firsts.iter().all(at_n) {
            return CallShape::Fixed(n);
        }
    }
    if unbatched
        || firsts
            .iter()
            .any(|d| !matches!(d, Some(Dim::Dynamic | Dim::Fixed(1))))
    {
        CallShape::Unbatched
    } else if firsts.iter().all(|d| d == &Some(&Dim::Dynamic)) {
        CallShape::Batched
    } else {
        CallShape::PerRequest
    }
}

/// The selector parameter a graph adds to the queries of a node with `batch: false` (its value
/// `false`), so that an executor calling the model with a batch dimension refuses the job rather
/// than run it with the wrong shapes.
pub const UNBATCHED_PARAMETER: &str = "batch";

/// The selector parameter carrying how many milliseconds the job's client still waits.
pub const BUDGET_PARAMETER: &str = "budget_ms";

/// The selector parameter carrying the model node's span (a W3C `traceparent`) for a job holding
/// a sampled request's rows.
pub const TRACE_PARAMETER: &str = "traceparent";

/// The longest budget honoured; a longer one is taken as this (a peer cannot make a job
/// outlive any sensible client).
const MAX_BUDGET: Duration = Duration::from_secs(3600);

/// The deadline a query's [`BUDGET_PARAMETER`] sets from `now`: `Ok(None)` without one, an
/// error naming the parameter when it is not a whole number of milliseconds.
fn budget_deadline(query: &Query, now: Instant) -> Result<Option<Instant>, String> {
    let Some(text) = query.parameters().get(BUDGET_PARAMETER) else {
        return Ok(None);
    };
    let ms: u64 = text.parse().map_err(|_| {
        format!(
            "selector parameter `{BUDGET_PARAMETER}` must be whole milliseconds, not `{}`",
            weir_connectors::echo::quote(text)
        )
    })?;
    Ok(Some(now + Duration::from_millis(ms).min(MAX_BUDGET)))
}

/// Why a query's `batch` parameter does not fit how `config` calls its model, if it does not.
fn batch_mismatch(config: &ExecutorConfig, query: &Query) -> Option<String> {
    let unbatched = query.parameters().get(UNBATCHED_PARAMETER) == Some("false");
    match (unbatched, config.call == CallShape::Unbatched) {
        (true, false) => Some(format!(
            "the graph calls model `{0}` without a batch dimension (`batch: false`), but this executor reads its first dimension as one; start it with `--unbatched {0}`",
            config.node
        )),
        (false, true) => Some(format!(
            "this executor calls model `{0}` without a batch dimension, but the graph's node has one; give the node `batch: false`, or start the executor without `--unbatched {0}`",
            config.node
        )),
        _ => None,
    }
}

/// Decodes a query and queues it; the executor thread replies.
pub(crate) fn handle_query(
    executor: &ModelExecutor,
    emulation: Emulation,
    spans: Option<&Arc<dyn SpanSink>>,
    mut query: Query,
) {
    let config = executor.config();
    if let Some(message) = batch_mismatch(config, &query) {
        reply_error(&query, ErrorKind::Invalid, message);
        return;
    }
    // Taken out of the query, which lives until the reply: the fragments' receive buffers go back
    // to zenoh's pool once decoded, not when the job is done.
    let Some(payload) = query.payload_mut().map(std::mem::take) else {
        reply_error(
            &query,
            ErrorKind::Invalid,
            "the query carries no payload".into(),
        );
        return;
    };
    let decoded = payload::decode(&payload);
    drop(payload);
    let columns = match decoded {
        Ok(c) => c,
        Err(e) => {
            reply_error(
                &query,
                ErrorKind::Invalid,
                format!("undecodable payload: {e}"),
            );
            return;
        }
    };
    let mut by_name: BTreeMap<String, TensorColumn> = columns.into_iter().collect();
    let mut inputs = Vec::with_capacity(config.inputs.len());
    for name in &config.inputs {
        match by_name.remove(name) {
            Some(c) => inputs.push(c),
            None => {
                reply_error(
                    &query,
                    ErrorKind::Invalid,
                    format!("model `{}` needs input `{name}`", config.node),
                );
                return;
            }
        }
    }
    let output_names: Arc<[String]> = config.outputs.iter().map(|(n, _)| n.clone()).collect();
    let names = Arc::clone(&output_names);
    let rows = inputs.first().map_or(0, TensorColumn::len);
    let stats = executor.shared_stats();
    let enqueued_at = Instant::now();
    let deadline = match budget_deadline(&query, enqueued_at) {
        Ok(d) => d,
        Err(message) => {
            reply_error(&query, ErrorKind::Invalid, message);
            return;
        }
    };
    // The job's span goes where spans go, when the query is of a sampled request.
    let traced = spans.and_then(|sink| {
        let parent = SpanContext::parse(query.parameters().get(TRACE_PARAMETER)?)?;
        parent
            .sampled
            .then(|| (JobTrace::new(parent), Arc::clone(sink)))
    });
    let trace = traced.as_ref().map(|(t, _)| t.clone());
    let node = config.node.clone();
    let job = Job {
        inputs,
        enqueued_at,
        deadline,
        trace,
        done: Box::new(move |outcome| {
            if let Some((trace, sink)) = traced {
                sink.export(vec![executor_span(
                    &trace,
                    &node,
                    enqueued_at,
                    outcome.is_err(),
                )]);
            }
            answer(
                query,
                outcome,
                emulation,
                (stats, enqueued_at, rows),
                &output_names,
            )
        }),
    };
    // A query's rows reaching idle sessions run side by side, as in a graph process's node, and
    // a query larger than the batch size the model's calls prefer (`row_cost.rs`) runs as calls
    // of that size (an emulated instance type keeps its one call per query, which is what
    // it prices).
    let parts = match emulation {
        Emulation::Off => {
            let preferred = executor.load_stats().rows_now(rows).max(1);
            executor.spread(rows).max(rows.div_ceil(preferred))
        }
        _ => 1,
    };
    for job in job.split(parts, names, &config.node) {
        if let Err(job) = executor.try_submit(job) {
            // The job owns the query; answer through it so the reply goes out exactly once.
            let node = config.node.clone();
            (job.done)(Err(ExecError::Unavailable {
                node,
                message: "overloaded".into(),
            }));
        }
    }
}

/// The span of a traced job that ran here (or failed), a child of the model node's hop span.
fn executor_span(trace: &JobTrace, node: &str, enqueued_at: Instant, failed: bool) -> SpanRecord {
    let mut attributes = vec![("weir.node", AttributeValue::Str(node.to_string()))];
    if let Some(call) = trace.call() {
        attributes.push((
            "weir.queue_wait_us",
            micros(call.started.saturating_duration_since(enqueued_at)),
        ));
        attributes.push((
            "weir.run_us",
            micros(call.ended.saturating_duration_since(call.started)),
        ));
        attributes.push((
            "weir.batch_size",
            AttributeValue::Int(i64::try_from(call.rows).unwrap_or(i64::MAX)),
        ));
    }
    SpanRecord {
        context: SpanContext {
            trace_id: trace.parent.trace_id,
            span_id: new_span_id(),
            sampled: true,
        },
        parent: Some(trace.parent.span_id),
        parent_is_remote: true,
        state: None,
        name: format!("executor {node}"),
        kind: SpanKind::Server,
        start: wall_time(enqueued_at),
        end: std::time::SystemTime::now(),
        attributes,
        error: failed,
    }
}

/// Replies to `query` with a job's outcome.
fn answer(
    query: Query,
    outcome: Result<Vec<TensorColumn>, ExecError>,
    emulation: Emulation,
    (stats, enqueued_at, rows): (Arc<weir_operators::model::LoadStats>, Instant, usize),
    output_names: &[String],
) {
    match outcome {
        Ok(columns) => {
            stats.add_held(emulate(emulation, enqueued_at, rows));
            let named = output_names.iter().map(String::as_str).zip(columns.iter());
            match payload::encode(named) {
                Ok(body) => {
                    if let Err(e) = query.reply(query.key_expr().clone(), body).wait() {
                        debug!(error = %e, "Could not send a reply.");
                    }
                }
                Err(e) => reply_error(&query, ErrorKind::Inference, e.to_string()),
            }
        }
        Err(e @ ExecError::Unavailable { .. }) => {
            reply_error(&query, ErrorKind::Overloaded, e.to_string())
        }
        Err(e @ ExecError::Expired { .. }) => {
            reply_error(&query, ErrorKind::Expired, e.to_string())
        }
        Err(e) => reply_error(&query, ErrorKind::Inference, e.to_string()),
    }
}
