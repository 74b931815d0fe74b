//! Triton's per-model statistics, filled from weir's own counts.
//!
//! Requests are counted where they are answered ([`InferStats`], by both transports): a success
//! adds its rows to `inference_count` and its time to `success`; a failure its time to `fail`.
//! What happens inside the graph comes from its executors when the graph reports them
//! ([`ExecutionStats`]): `execution_count` is their ONNX Runtime calls, `compute_infer` the time
//! those calls took, `queue` the time jobs waited before one. weir hands tensors to ONNX Runtime
//! without a separate timed copy, so `compute_input` and `compute_output` count the calls at zero
//! nanoseconds. Without executor figures (a model-less task), each request is one execution.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::ModelVersion;

/// What a graph's executors did: calls, their time, and the time jobs waited for them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Execution {
    /// ONNX Runtime calls.
    pub executions: u64,
    /// Time spent in those calls.
    pub compute_infer: Duration,
    /// Time jobs spent queued before their call.
    pub queue: Duration,
    /// Calls by batch size: (size, calls, time in those calls), ascending by size.
    pub batches: Vec<(u64, u64, Duration)>,
}

/// A graph's executors' figures, read when statistics are asked for.
pub trait ExecutionStats: Send + Sync {
    /// The figures now.
    fn execution(&self) -> Execution;
}

/// A served version's request counts and times.
#[derive(Debug, Default)]
pub struct InferStats {
    success: AtomicU64,
    success_ns: AtomicU64,
    fail: AtomicU64,
    fail_ns: AtomicU64,
    rows: AtomicU64,
    last_ms: AtomicU64,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl InferStats {
    /// Records one answered request of `rows` rows that took `elapsed`.
    pub fn success(&self, rows: u64, elapsed: Duration) {
        self.success.fetch_add(1, Ordering::Relaxed);
        self.success_ns.fetch_add(nanos(elapsed), Ordering::Relaxed);
        self.rows.fetch_add(rows, Ordering::Relaxed);
        self.touch();
    }

    /// Records one failed request that took `elapsed`.
    pub fn failure(&self, elapsed: Duration) {
        self.fail.fetch_add(1, Ordering::Relaxed);
        self.fail_ns.fetch_add(nanos(elapsed), Ordering::Relaxed);
        self.touch();
    }

    /// Requests answered with outputs.
    pub fn successes(&self) -> u64 {
        self.success.load(Ordering::Relaxed)
    }

    fn touch(&self) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        self.last_ms.store(now, Ordering::Relaxed);
    }
}

fn duration_stat(count: u64, ns: u64) -> Value {
    json!({"count": count, "ns": ns})
}

/// One entry of Triton's `model_stats` for version `v` of model `name`.
pub fn model_stats(name: &str, v: &ModelVersion) -> Value {
    let execution = v.execution.as_ref().map(|e| e.execution());
    version_stats(name, v.version, &v.stats, execution)
}

/// One entry of Triton's `model_stats`: version `version` of `name`, which answered `s`, its
/// executors' figures `execution` when known.
pub fn version_stats(
    name: &str,
    version: u64,
    s: &InferStats,
    execution: Option<Execution>,
) -> Value {
    let success = s.success.load(Ordering::Relaxed);
    let executions = execution.as_ref().map_or(success, |e| e.executions);
    let (queue_ns, infer_ns) = execution
        .as_ref()
        .map_or((0, 0), |e| (nanos(e.queue), nanos(e.compute_infer)));
    let batches: Vec<Value> = execution
        .iter()
        .flat_map(|e| e.batches.iter())
        .map(|(size, calls, time)| {
            json!({
                "batch_size": size,
                "compute_input": duration_stat(*calls, 0),
                "compute_infer": duration_stat(*calls, nanos(*time)),
                "compute_output": duration_stat(*calls, 0),
            })
        })
        .collect();
    json!({
        "name": name,
        "version": version.to_string(),
        "last_inference": s.last_ms.load(Ordering::Relaxed),
        "inference_count": s.rows.load(Ordering::Relaxed),
        "execution_count": executions,
        "inference_stats": {
            "success": duration_stat(success, s.success_ns.load(Ordering::Relaxed)),
            "fail": duration_stat(s.fail.load(Ordering::Relaxed), s.fail_ns.load(Ordering::Relaxed)),
            "queue": duration_stat(success, queue_ns),
            "compute_input": duration_stat(executions, 0),
            "compute_infer": duration_stat(executions, infer_ns),
            "compute_output": duration_stat(executions, 0),
            "cache_hit": duration_stat(0, 0),
            "cache_miss": duration_stat(0, 0),
        },
        "batch_stats": batches,
    })
}
