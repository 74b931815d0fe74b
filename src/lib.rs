//! weir serves ML service graphs: DAGs of ONNX models and tensor ops, compiled into timely dataflow,
//! with requests flowing as Arrow batches that carry their lineage.
//!
//! This crate is the CLI and a facade over the workspace's crates. Load a graph from YAML or build
//! one in Rust, then start it:
//!
//! ```no_run
//! # fn main() -> anyhow::Result<()> {
//! let graph = weir::load_graph(std::path::Path::new("graphs/quickstart.yaml"))?;
//! let running = weir::start(graph.plan, weir::RuntimeOptions::default())?;
//! # Ok(())
//! # }
//! ```
//!
//! Graph assembly is `weir_runtime`'s, load generation and profiling `weir_loadgen`'s and
//! model-less serving `weir_modelless`'s; [`cli`] is the `weir` command over them.

pub mod cli;

pub use weir_engine::diagnostic::{Diagnostic, Diagnostics};
pub use weir_engine::paths::FileRules;
pub use weir_engine::plan::Plan;
pub use weir_engine::request::{ErrorClass, RequestError, Responder, Response};
pub use weir_engine::runtime::{ClusterOptions, GraphRuntime, RuntimeOptions};
pub use weir_engine::spec::{
    BatchGrow, BatchingSpec, CropBoxesBuilder, Device, ExecutorSpec, GraphBuilder, GraphSpec,
    Interpolation, ModelBuilder, PadWhen, RemoteExecutorSpec, WarmupData, WarmupSpec,
};
pub use weir_engine::stream::{StreamConnector, StreamEnd};
pub use weir_engine::tensor::{DType, NamedTensor, Tensor, TensorData};
pub use weir_engine::{lineage, validate};
pub use weir_hams as hams;
pub use weir_loadgen as loadgen;
pub use weir_loadgen::{profile, workload};
pub use weir_modelless as modelless;
pub use weir_operators::model::{LoadSnapshot, OrtRuntime};
pub use weir_runtime::{
    load_graph, load_graph_under, operator_metrics, plan_spec, plan_spec_under, start,
    start_distributed, DistributedOptions, LoadError, LoadedGraph, RunningGraph, StartError,
    StatusBoard, TopologyBuilder,
};
