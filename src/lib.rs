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

pub mod cli;
pub mod loadgen;
pub mod modelless;
pub mod serf;
pub mod task_nodes;
pub mod workload;

use std::path::Path;
use std::sync::Arc;

use weir_engine::dataflow::egress::{replicated_nodes, ReplyTable, RequestLog};
pub use weir_engine::diagnostic::{Diagnostic, Diagnostics};
pub use weir_engine::paths::FileRules;
pub use weir_engine::plan::Plan;
pub use weir_engine::request::{ErrorClass, RequestError, Responder, Response};
use weir_engine::runtime::{AdmissionGauge, RuntimeParts};
pub use weir_engine::runtime::{ClusterOptions, GraphRuntime, RuntimeOptions};
pub use weir_engine::spec::{
    BatchingSpec, CropBoxesBuilder, Device, ExecutorSpec, GraphBuilder, GraphSpec, Interpolation,
    ModelBuilder, RemoteExecutorSpec,
};
pub use weir_engine::stream::{StreamConnector, StreamEnd};
pub use weir_engine::tensor::{DType, NamedTensor, Tensor, TensorData};
pub use weir_engine::{lineage, validate};
use weir_executor::client::ZenohReplicas;
pub use weir_hams as hams;
use weir_hams_manager::{Coordinator, HamsManager};
pub use weir_operators::model::{LoadSnapshot, OrtRuntime};
use weir_operators::stateful::ManagerLinks;
use weir_operators::{OperatorFactory, SharedHandles};

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
    /// The file could not be read (missing, not a regular file, over the size cap).
    #[error("{source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: weir_engine::paths::FileError,
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
    load_graph_under(path, &FileRules::default())
}

/// As [`load_graph`], with every file the graph names read within `files` (a path root, size
/// caps). The graph file itself is the caller's and need not be under the root.
///
/// # Errors
/// As [`load_graph`].
pub fn load_graph_under(path: &Path, files: &FileRules) -> Result<LoadedGraph, LoadError> {
    load_graph_with(path, files, None)
}

/// As [`load_graph_under`], resolving the graph's task nodes (`task:` instead of `path:`) from
/// the model repository at `repository` ([`task_nodes`]).
///
/// # Errors
/// As [`load_graph`], and when a task node cannot be resolved.
pub fn load_graph_with(
    path: &Path,
    files: &FileRules,
    repository: Option<&Path>,
) -> Result<LoadedGraph, LoadError> {
    let text = weir_engine::paths::read_text(path, &FileRules::default()).map_err(|source| {
        LoadError::Read {
            path: path.display().to_string(),
            source,
        }
    })?;
    let name = path.display().to_string();
    let source = weir_engine::diagnostic::SourceText {
        name: name.clone(),
        text: Arc::from(text.as_str()),
    };
    let mut spec = GraphSpec::from_yaml(&text, &name).map_err(|e| match e {
        weir_engine::spec::SpecError::Invalid(d) => LoadError::Invalid(d),
        weir_engine::spec::SpecError::Read { path, source } => LoadError::Read { path, source },
    })?;
    task_nodes::resolve(&mut spec, repository).map_err(|mut d| {
        d.source = Some(source.clone());
        LoadError::Invalid(d)
    })?;
    let base = path.parent().unwrap_or(Path::new("."));
    plan_spec_under(&spec, base, files)
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
    plan_spec_under(spec, base_dir, &FileRules::default())
}

/// As [`plan_spec`], with every file the graph names read within `files`.
///
/// # Errors
/// Every problem found, as [`Diagnostics`].
pub fn plan_spec_under(
    spec: &GraphSpec,
    base_dir: &Path,
    files: &FileRules,
) -> Result<LoadedGraph, Diagnostics> {
    let valid = weir_engine::validate::validate_under(spec, base_dir, files)?;
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
    /// zenoh could not start (for remote executors).
    #[error(transparent)]
    Zenoh(#[from] weir_connectors::zenoh_peer::SessionError),
    /// Stateful nodes' roles could not be assigned.
    #[error(transparent)]
    Hams(#[from] weir_hams_manager::ManagerError),
}

/// A graph running in this process, with its executors.
#[derive(Debug)]
pub struct RunningGraph {
    runtime: Arc<GraphRuntime>,
    factory: Arc<OperatorFactory>,
    /// The HAMS manager of stateful nodes on executors.
    hams: Option<Arc<HamsManager>>,
    /// The zenoh session remote replicas use; dropped after the runtime.
    _zenoh: Option<Arc<ZenohReplicas>>,
}

impl RunningGraph {
    /// The runtime, to submit requests.
    pub fn runtime(&self) -> &GraphRuntime {
        &self.runtime
    }

    /// A shared handle to the runtime (for connectors that outlive a borrow).
    pub fn runtime_handle(&self) -> Arc<GraphRuntime> {
        Arc::clone(&self.runtime)
    }

    /// Load counters of every model node's executor.
    pub fn executor_stats(&self) -> Vec<(String, LoadSnapshot)> {
        self.factory.executor_stats()
    }

    /// The live counters of model node `node`'s in-process executor (`None`: no such node, or it
    /// runs remotely).
    pub fn executor_load(&self, node: &str) -> Option<&weir_operators::model::LoadStats> {
        self.factory.executor(node).map(|e| e.load_stats())
    }

    /// `/metrics` lines for this graph's operators alone (see [`operator_metrics`]).
    pub fn executor_metrics(&self) -> weir_connectors::http::MetricsSource {
        operator_metrics(std::slice::from_ref(self))
    }

    /// This graph's operators, for [`operator_metrics`].
    fn operators(&self) -> weir_operators::metrics::GraphOperators {
        weir_operators::metrics::GraphOperators {
            graph: self.runtime.plan().name.clone(),
            factory: Arc::clone(&self.factory),
            replies: Arc::clone(self.runtime.replies()),
        }
    }

    /// SERF parallelism gauges of every `parallelism: auto` node, sorted by node.
    pub fn parallelism_stats(&self) -> Vec<(String, weir_operators::model::ParallelismSnapshot)> {
        self.factory.parallelism_stats()
    }

    /// Parity-coded model nodes (ParM): name and service (its counters), sorted.
    pub fn parity_services(&self) -> Vec<(String, weir_operators::parity::ParityService)> {
        self.factory.parity_services()
    }

    /// The HAMS manager, when stateful nodes run on executors.
    pub fn hams(&self) -> Option<&HamsManager> {
        self.hams.as_deref()
    }

    /// Stateful nodes' proxies (HAMS), in plan order.
    pub fn stateful_nodes(&self) -> Vec<Arc<weir_operators::stateful::StatefulNodeHandle>> {
        self.factory.stateful_nodes()
    }

    /// Replica pools (model nodes with several or remote replicas): name and pool, sorted.
    pub fn replica_pools(&self) -> Vec<(String, weir_operators::model::ReplicaPool)> {
        self.factory.replica_pools()
    }

    /// Stops admission, answers everything admitted, stops the workers and executors.
    pub fn shutdown(self) {
        self.runtime.shutdown();
    }
}

/// `/metrics` lines for the operators of every graph in `graphs`: executors (queue, calls, rows,
/// errors, busy time, batch sizes), replica pools, SERF parallelism and HAMS, per model node. Each
/// family is written once, with every graph's series under it.
pub fn operator_metrics(graphs: &[RunningGraph]) -> weir_connectors::http::MetricsSource {
    weir_connectors::http::metrics::source(weir_operators::metrics::OperatorMetrics::new(
        graphs.iter().map(RunningGraph::operators).collect(),
    ))
}

/// Starts executors for every model node, then the dataflow.
///
/// # Errors
/// When ONNX Runtime or a model cannot be loaded, or the dataflow cannot start.
pub fn start(plan: Plan, options: RuntimeOptions) -> Result<RunningGraph, StartError> {
    start_distributed(plan, options, &DistributedOptions::default())
}

/// How a graph reaches remote executors.
#[derive(Debug, Clone, Default)]
pub struct DistributedOptions {
    /// zenoh endpoints the graph listens on (for executors started with `--connect`).
    pub listen: Vec<String>,
    /// zenoh endpoints to connect to besides the executors' own.
    pub connect: Vec<String>,
    /// Run as one process of a timely cluster.
    pub cluster: Option<ClusterOptions>,
}

/// Every distinct endpoint of the remote executors `plan`'s model nodes run on.
fn executor_endpoints(plan: &Plan) -> (bool, Vec<String>) {
    let mut remote = false;
    let mut endpoints: Vec<String> = Vec::new();
    for n in &plan.nodes {
        let validate::NodeKind::Model(m) = &n.node.kind else {
            continue;
        };
        for r in &m.replicas {
            if let validate::ReplicaTarget::Remote(e) = r {
                remote = true;
                if let Some(ep) = &e.endpoint {
                    if !endpoints.contains(ep) {
                        endpoints.push(ep.clone());
                    }
                }
            }
        }
    }
    (remote, endpoints)
}

/// Whether `plan` has a stateful node on executors (one the HAMS manager drives).
fn has_managed_nodes(plan: &Plan) -> bool {
    plan.nodes.iter().any(|n| match &n.node.kind {
        validate::NodeKind::Model(m) => m.state.is_some() && weir_operators::on_executors(m),
        _ => false,
    })
}

/// As [`start`], reaching the remote executors the plan names over zenoh with `distributed`.
///
/// The shared handles are made before anything that uses them, and handed down through
/// constructors: the zenoh session; the request log, admission's counters and, when stateful
/// nodes run on executors, the HAMS manager's [`Coordinator`]; then the executors, replica pools
/// and stateful proxies (the factory); the reply table around the request log, with the
/// coordinator's release hook; the runtime around the table and the counters; and last the
/// manager, which takes the running graph and assigns the first roles.
///
/// # Errors
/// As [`start`], or when zenoh cannot start or a remote executor does not come alive.
pub fn start_distributed(
    plan: Plan,
    options: RuntimeOptions,
    distributed: &DistributedOptions,
) -> Result<RunningGraph, StartError> {
    let (remote, mut endpoints) = executor_endpoints(&plan);
    let zenoh = if remote || !distributed.listen.is_empty() {
        endpoints.extend(distributed.connect.iter().cloned());
        Some(Arc::new(ZenohReplicas::open(
            &distributed.listen,
            &endpoints,
        )?))
    } else {
        None
    };
    let kept = zenoh.clone();
    let remotes = zenoh
        .as_deref()
        .map(|z| z as &dyn weir_operators::RemoteReplicaSource);
    start_parts(plan, options, distributed.cluster.clone(), remotes, kept)
}

/// As [`start`], the plan's remote replicas made by `remotes` on the zenoh session `zenoh` that
/// the caller opened (and may share among many graphs): how model-less serving starts each
/// variant it runs on a remote executor.
///
/// # Errors
/// As [`start`], or when a remote executor does not come alive.
pub fn start_with_remotes(
    plan: Plan,
    options: RuntimeOptions,
    zenoh: Arc<ZenohReplicas>,
    remotes: &dyn weir_operators::RemoteReplicaSource,
) -> Result<RunningGraph, StartError> {
    start_parts(plan, options, None, Some(remotes), Some(zenoh))
}

fn start_parts(
    plan: Plan,
    options: RuntimeOptions,
    cluster: Option<ClusterOptions>,
    remotes: Option<&dyn weir_operators::RemoteReplicaSource>,
    zenoh: Option<Arc<ZenohReplicas>>,
) -> Result<RunningGraph, StartError> {
    let requests = Arc::new(RequestLog::default());
    let admission = AdmissionGauge::default();
    let coordinator =
        (zenoh.is_some() && has_managed_nodes(&plan)).then(|| Coordinator::new(&plan.name));
    let links = coordinator.as_ref().map(|c| ManagerLinks {
        requests: Arc::clone(&requests),
        suspicions: c.suspicions(),
    });
    let factory = Arc::new(OperatorFactory::start_with(
        &plan,
        SharedHandles {
            remotes,
            // In a cluster, requests admitted here may be served by another process's executor.
            admission: cluster.is_none().then_some(&admission),
            manager: links.as_ref(),
            // Only a graph whose requests are all admitted here knows every row's deadline.
            requests: cluster.is_none().then_some(&requests),
        },
    )?);
    let managed: Vec<_> = factory
        .stateful_nodes()
        .into_iter()
        .filter(|h| h.is_managed())
        .collect();
    let replies = Arc::new(ReplyTable::new(
        requests,
        replicated_nodes(&plan),
        coordinator
            .as_ref()
            .map(|c| c.release_hook(managed.clone())),
    ));
    let runtime = Arc::new(GraphRuntime::start_in(
        plan,
        factory.clone(),
        options,
        cluster,
        RuntimeParts { replies, admission },
    )?);
    let hams = match (coordinator, &zenoh) {
        (Some(c), Some(z)) => Some(Arc::new(c.start(
            z.session(),
            managed,
            z.member_sessions(),
            Arc::clone(&runtime),
            std::time::Duration::from_secs(15),
        )?)),
        _ => None,
    };
    Ok(RunningGraph {
        runtime,
        factory,
        hams,
        _zenoh: zenoh,
    })
}
