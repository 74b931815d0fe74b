//! What a `weir executor` process is started with, and why starting it can fail.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use weir_engine::spec::Device;

use crate::emulation::Emulation;

/// What a `weir executor` process serves and how.
#[derive(Debug, Clone)]
pub struct ExecutorOptions {
    /// Name; the key prefix defaults to `weir/executor/<name>`.
    pub name: String,
    /// Key-expression prefix, overriding the default.
    pub key: Option<String>,
    /// zenoh endpoints to listen on.
    pub listen: Vec<String>,
    /// zenoh endpoints to connect to.
    pub connect: Vec<String>,
    /// Models: name → ONNX file.
    pub models: Vec<(String, PathBuf)>,
    /// Device.
    pub device: Device,
    /// Intra-op threads per session.
    pub threads: usize,
    /// Sessions per model.
    pub instances: usize,
    /// Most rows per call for models with a dynamic batch dimension.
    pub max_batch: usize,
    /// Warm-up calls each session of every model runs before it serves
    /// ([`weir_engine::warmup::synthetic_sample`]); 0: none.
    pub warmup_runs: u32,
    /// Longest a job waits for others to join its batch.
    pub max_delay: Duration,
    /// Whether a batch waits for more only while every session runs a call, or always.
    pub wait: weir_engine::spec::BatchWait,
    /// How large a call's batch may grow: while measured cheaper per row, or to `max_batch`.
    pub grow: weir_engine::spec::BatchGrow,
    /// Jobs a model's queue holds.
    pub queue_capacity: usize,
    /// Emulated instance type: how long each call is held after its real inference.
    pub emulation: Emulation,
    /// Emulated instance type: the least time a variant load takes (its model served no
    /// sooner), as a type whose loads are slower than this machine's would take.
    pub emulated_load: Duration,
    /// Models (by name) served without a batch dimension whatever their first dimension: each
    /// job's rows are calls with the tensors as they are (a graph node with `batch: false`).
    /// A model whose inputs cannot have a batch dimension (a scalar, a first dimension fixed to
    /// more than 1) is served so without being named here.
    pub unbatched: Vec<String>,
    /// Models (by name) whose calls join requests of different lengths padded along an ONNX
    /// dimension: (model, dimension name, pad value), as a graph node's `batching.pad`.
    pub pad: Vec<(String, String, f64)>,
    /// Stateful models (HAMS): name → ONNX file, served as primary or backup as assigned.
    pub stateful: Vec<(String, PathBuf)>,
    /// How stateful models run (non-determinism option, state-link delay).
    pub stateful_options: crate::stateful::StatefulOptions,
    /// The executor's own repository: with one, it loads and unloads variants on signed
    /// commands ([`crate::variants`]).
    pub variants: Option<Arc<dyn crate::variants::VariantSource>>,
    /// Where the spans of traced jobs go (`--otlp-endpoint`); `None`: a query's trace context
    /// is ignored.
    pub spans: Option<Arc<dyn weir_engine::trace::SpanSink>>,
}

impl ExecutorOptions {
    /// The key-expression prefix served under.
    pub fn key_prefix(&self) -> String {
        match &self.key {
            Some(k) => k.trim_end_matches('/').to_string(),
            None => format!("weir/executor/{}", self.name),
        }
    }
}

/// Errors starting an executor.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A model could not be read or loaded.
    #[error("model `{model}`: {message}")]
    Model {
        /// Model name.
        model: String,
        /// Why.
        message: String,
    },
    /// zenoh failed.
    #[error(transparent)]
    Zenoh(#[from] weir_connectors::zenoh_peer::SessionError),
    /// The options are not usable.
    #[error("{0}")]
    Options(String),
}

pub(crate) fn zenoh_err(e: impl std::fmt::Display) -> ServeError {
    ServeError::Zenoh(weir_connectors::zenoh_peer::SessionError(e.to_string()))
}
