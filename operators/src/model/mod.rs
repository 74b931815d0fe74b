//! Model nodes: ONNX models served by ONNX Runtime executors.
//!
//! [`executor`] owns the sessions, the job queue and dynamic batching, and never touches timely;
//! [`operator`] is the timely glue that hands batches to an executor without blocking the worker
//! and emits results when the executor wakes it. [`ort_env`] loads the runtime library.
//! [`replicas`] spreads a node's jobs over several executors (in-process or remote) with failover,
//! least outstanding, round robin, or by Kairos's min-cost matching ([`routing`]).
//! [`parallelism`] switches an executor's concurrency × threads live (SERF); [`pinning`] puts its
//! threads on cores of their own.
//! [`synthetic`] makes a random request for a model from its file alone (profiling, warm-up).

pub mod executor;
pub mod expiry;
pub mod operator;
pub mod ort_env;
pub(crate) mod ort_values;
pub mod parallelism;
pub mod pinning;
pub mod replicas;
pub mod routing;
pub mod synthetic;

/// A model `scripts/setup.sh` generated for tests: `$WEIR_HOME/models/<name>`, or the workspace's
/// `.weir/models/<name>`.
#[cfg(test)]
pub(crate) fn test_model(name: &str) -> std::path::PathBuf {
    std::env::var_os("WEIR_HOME")
        .map_or_else(
            || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.weir"),
            std::path::PathBuf::from,
        )
        .join("models")
        .join(name)
}

pub use executor::{
    CallRecord, ExecutorConfig, Job, LoadSnapshot, LoadStats, ModelExecutor, Padding, RecordedCalls,
};
pub use operator::ModelOperator;
pub use ort_env::{OrtRuntime, SessionSettings};
pub use parallelism::{
    AutoOptions, LoadServiceRate, ParallelismError, ParallelismSnapshot, ServiceRate,
};
pub use replicas::{
    ExecutorReport, InferenceService, LocalReplica, PoolStats, Replica, ReplicaDone, ReplicaError,
    ReplicaPool,
};

/// Errors of model execution, wrapped once at the executor boundary with the node they belong to.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ExecError {
    /// The ONNX Runtime library is missing or failed to load.
    #[error("ONNX Runtime unavailable: {0}")]
    RuntimeMissing(String),
    /// A session could not be created.
    #[error("node `{node}`: cannot load {path}: {message}")]
    Session {
        /// Node id.
        node: String,
        /// Model file.
        path: String,
        /// ONNX Runtime's message.
        message: String,
    },
    /// No replica could take the job (none alive, or every attempt failed).
    #[error("node `{node}`: unavailable: {message}")]
    Unavailable {
        /// Node id.
        node: String,
        /// What happened.
        message: String,
    },
    /// An inference call failed.
    #[error("node `{node}`: inference failed: {message}")]
    Inference {
        /// Node id.
        node: String,
        /// ONNX Runtime's message.
        message: String,
    },
    /// A warm-up call failed, so the node does not start.
    #[error("node `{node}`: warm-up failed: {message}")]
    Warmup {
        /// Node id.
        node: String,
        /// Which sample and why.
        message: String,
    },
    /// The job's deadline passed before it could run; it was not run ([`expiry`]).
    #[error("node `{node}`: the deadline passed {late_ms} ms before the job could run")]
    Expired {
        /// Node id.
        node: String,
        /// How long past its deadline the job was when it was dropped.
        late_ms: u64,
    },
}

impl ExecError {
    /// What went wrong, without the node: for a request error that names the node itself.
    pub fn detail(&self) -> String {
        match self {
            ExecError::RuntimeMissing(m) => format!("ONNX Runtime unavailable: {m}"),
            ExecError::Session { path, message, .. } => format!("cannot load {path}: {message}"),
            ExecError::Unavailable { message, .. } => format!("unavailable: {message}"),
            ExecError::Inference { message, .. } => format!("inference failed: {message}"),
            ExecError::Warmup { message, .. } => format!("warm-up failed: {message}"),
            ExecError::Expired { late_ms, .. } => {
                format!("the deadline passed {late_ms} ms before the job could run")
            }
        }
    }
}
