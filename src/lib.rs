//! weir serves ML service graphs: DAGs of ONNX models and tensor ops, compiled into timely dataflow,
//! with requests flowing as Arrow batches that carry their lineage.
//!
//! This crate is the facade and the CLI. Load a graph from YAML or build one in Rust, then start it:
//!
//! ```no_run
//! # fn main() -> anyhow::Result<()> {
//! let graph = weir::load_graph(std::path::Path::new("graphs/quickstart.yaml"))?;
//! let running = weir::start(graph.plan, weir::RuntimeOptions::default())?;
//! # Ok(())
//! # }
//! ```
//!
//! [`workload`] makes requests (random tensors or a labelled CSV data set) and [`loadgen`] drives a
//! running graph with them, open- or closed-loop, and summarises latency, throughput and accuracy.

#![deny(missing_docs)]
#![warn(clippy::unwrap_used)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod bench;
pub mod loadgen;
pub mod workload;

use std::path::Path;
use std::sync::Arc;

pub use weir_engine::diagnostic::{Diagnostic, Diagnostics};
pub use weir_engine::plan::Plan;
pub use weir_engine::request::{ErrorClass, RequestError, Responder, Response};
pub use weir_engine::runtime::{GraphRuntime, RuntimeOptions};
pub use weir_engine::spec::{BatchingSpec, ExecutorSpec, GraphBuilder, GraphSpec, ModelBuilder};
pub use weir_engine::tensor::{DType, NamedTensor, Tensor, TensorData};
pub use weir_engine::{lineage, validate};
pub use weir_operators::model::{LoadSnapshot, OrtRuntime};
use weir_operators::OperatorFactory;

/// A graph read, validated and planned, with the warnings validation raised.
#[derive(Debug, Clone)]
pub struct LoadedGraph {
    /// The plan to run.
    pub plan: Plan,
    /// Findings that do not stop the graph.
    pub warnings: Diagnostics,
}

/// Errors loading a graph.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The spec is invalid; the diagnostics render with YAML snippets.
    #[error("{0}")]
    Invalid(Diagnostics),
}

/// Reads, validates and plans the YAML graph at `path`. Model paths resolve against its folder.
///
/// # Errors
/// [`LoadError::Invalid`] with every problem found, located in the file.
pub fn load_graph(path: &Path) -> Result<LoadedGraph, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read {
        path: path.display().to_string(),
        source,
    })?;
    let name = path.display().to_string();
    let source = weir_engine::diagnostic::SourceText {
        name: name.clone(),
        text: Arc::from(text.as_str()),
    };
    let spec = GraphSpec::from_yaml(&text, &name).map_err(|e| match e {
        weir_engine::spec::SpecError::Invalid(d) => LoadError::Invalid(d),
        weir_engine::spec::SpecError::Read { path, source } => LoadError::Read { path, source },
    })?;
    let base = path.parent().unwrap_or(Path::new("."));
    plan_spec(&spec, base)
        .map_err(|mut d| {
            d.source = Some(source.clone());
            LoadError::Invalid(d)
        })
        .map(|mut g| {
            g.warnings.source = Some(source);
            g
        })
}

/// Validates and plans a spec (from the builder API, say), resolving model paths against `base_dir`.
///
/// # Errors
/// Every problem found, as [`Diagnostics`].
pub fn plan_spec(spec: &GraphSpec, base_dir: &Path) -> Result<LoadedGraph, Diagnostics> {
    let valid = weir_engine::validate::validate(spec, base_dir)?;
    let warnings = Diagnostics {
        items: valid.warnings.clone(),
        source: None,
    };
    Ok(LoadedGraph {
        plan: weir_engine::plan::plan(&valid),
        warnings,
    })
}

/// Errors starting a graph.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// An executor could not start (runtime missing, model not loadable).
    #[error(transparent)]
    Executor(#[from] weir_operators::model::ExecError),
    /// The dataflow could not start.
    #[error(transparent)]
    Runtime(#[from] weir_engine::runtime::RuntimeError),
}

/// A graph running in this process, with its executors.
#[derive(Debug)]
pub struct RunningGraph {
    runtime: GraphRuntime,
    factory: Arc<OperatorFactory>,
}

impl RunningGraph {
    /// The runtime, to submit requests.
    pub fn runtime(&self) -> &GraphRuntime {
        &self.runtime
    }

    /// Load counters of every model node's executor.
    pub fn executor_stats(&self) -> Vec<(String, LoadSnapshot)> {
        self.factory.executor_stats()
    }

    /// Stops admission, answers everything admitted, stops the workers and executors.
    pub fn shutdown(self) {
        self.runtime.shutdown();
    }
}

/// Starts executors for every model node, then the dataflow.
///
/// # Errors
/// When ONNX Runtime or a model cannot be loaded, or the dataflow cannot start.
pub fn start(plan: Plan, options: RuntimeOptions) -> Result<RunningGraph, StartError> {
    let factory = Arc::new(OperatorFactory::start(&plan)?);
    let runtime = GraphRuntime::start(plan, factory.clone(), options)?;
    Ok(RunningGraph { runtime, factory })
}
