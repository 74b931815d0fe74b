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
pub mod serf;
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
    BatchingSpec, Device, ExecutorSpec, GraphBuilder, GraphSpec, ModelBuilder, RemoteExecutorSpec,
};
pub use weir_engine::stream::{StreamConnector, StreamEnd};
pub use weir_engine::tensor::{DType, NamedTensor, Tensor, TensorData};
pub use weir_engine::{lineage, validate};
use weir_executor::client::ZenohReplicas;
pub use weir_hams as hams;
use weir_hams_manager::{Coordinator, HamsManager};
use weir_operators::model::executor::{BATCH_BUCKET_BOUNDS, CALL_SECONDS_BOUNDS};
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
    let spec = GraphSpec::from_yaml(&text, &name).map_err(|e| match e {
        weir_engine::spec::SpecError::Invalid(d) => LoadError::Invalid(d),
        weir_engine::spec::SpecError::Read { path, source } => LoadError::Read { path, source },
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

    /// `/metrics` lines for this graph's executors: queue, calls, rows, errors, busy time and
    /// batch sizes per model node.
    pub fn executor_metrics(&self) -> weir_connectors::http::MetricsSource {
        let factory = Arc::clone(&self.factory);
        let graph = self.runtime.plan().name.clone();
        let replies = Arc::clone(self.runtime.replies());
        Box::new(move |out| {
            render_executor_metrics(out, &graph, &factory.executor_stats());
            render_replica_metrics(out, &graph, &factory.replica_pools());
            render_parallelism_metrics(out, &graph, &factory.parallelism_stats());
            render_hams_metrics(out, &graph, &factory.stateful_nodes(), &replies);
        })
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
            remotes: zenoh
                .as_deref()
                .map(|z| z as &dyn weir_operators::RemoteReplicaSource),
            // In a cluster, requests admitted here may be served by another process's executor.
            admission: distributed.cluster.is_none().then_some(&admission),
            manager: links.as_ref(),
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
        distributed.cluster.clone(),
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

/// A counter's name, help text, and how to read it from a snapshot.
type CounterSpec = (&'static str, &'static str, fn(&LoadSnapshot) -> f64);

fn render_executor_metrics(out: &mut String, graph: &str, stats: &[(String, LoadSnapshot)]) {
    use std::fmt::Write;
    use weir_engine::metrics as m;
    let counters: [CounterSpec; 8] = [
        (
            m::EXECUTOR_ENQUEUED_TOTAL,
            "Batches queued for an executor.",
            |s| s.enqueued as f64,
        ),
        (
            m::EXECUTOR_DEQUEUED_TOTAL,
            "Batches taken by a session.",
            |s| s.dequeued as f64,
        ),
        (m::EXECUTOR_RUNS_TOTAL, "Inference calls.", |s| {
            s.runs as f64
        }),
        (m::EXECUTOR_ROWS_TOTAL, "Requests inferred.", |s| {
            s.rows as f64
        }),
        (
            m::EXECUTOR_ERRORS_TOTAL,
            "Inference calls that failed.",
            |s| s.errors as f64,
        ),
        (
            m::EXECUTOR_BUSY_SECONDS_TOTAL,
            "Time inside ONNX Runtime, summed over sessions.",
            |s| s.busy.as_secs_f64(),
        ),
        (
            m::EXECUTOR_JOBS_ANSWERED_TOTAL,
            "Jobs answered by an inference call.",
            |s| s.jobs_answered as f64,
        ),
        (
            m::EXECUTOR_JOB_SECONDS_TOTAL,
            "Time from queued to answered (queue wait plus call), summed over jobs.",
            |s| s.sojourn.as_secs_f64(),
        ),
    ];
    for (name, help, value) in counters {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
        for (node, s) in stats {
            let _ = writeln!(
                out,
                "{name}{{graph=\"{graph}\",node=\"{node}\"}} {}",
                value(s)
            );
        }
    }
    let sizes: Vec<String> = BATCH_BUCKET_BOUNDS.iter().map(|b| b.to_string()).collect();
    render_histogram(
        out,
        graph,
        stats,
        m::NODE_BATCH_SIZE,
        "Rows per inference call.",
        &sizes,
        |s| (&s.batch_sizes[..], s.rows as f64),
    );
    let seconds: Vec<String> = CALL_SECONDS_BOUNDS.iter().map(|b| b.to_string()).collect();
    render_histogram(
        out,
        graph,
        stats,
        m::EXECUTOR_INFERENCE_SECONDS,
        "Duration of each inference call.",
        &seconds,
        |s| (&s.call_seconds[..], s.busy.as_secs_f64()),
    );
}

/// Replica pools: per replica, liveness, jobs outstanding and dispatched; per node, re-dispatches,
/// jobs failed for want of a live replica, and suppressed late answers.
/// HAMS gauges and counters per stateful node: epoch, failovers, rows recorded until their
/// replies leave, batches not yet durable; and the replies the release gate holds.
fn render_hams_metrics(
    out: &mut String,
    graph: &str,
    nodes: &[Arc<weir_operators::stateful::StatefulNodeHandle>],
    replies: &weir_engine::dataflow::egress::ReplyTable,
) {
    use std::fmt::Write;
    if nodes.is_empty() {
        return;
    }
    let statuses: Vec<_> = nodes.iter().map(|h| (h.node.clone(), h.status())).collect();
    type Field = fn(&weir_operators::stateful::ProxyStatus) -> f64;
    let per_node: [(&str, &str, Field); 4] = [
        (
            "weir_hams_epoch",
            "Epoch of the node's primary (bumped by every promotion).",
            |s| s.epoch as f64,
        ),
        (
            "weir_hams_durable_version",
            "Highest state version applied on a backup.",
            |s| s.durable as f64,
        ),
        (
            "weir_hams_recorded_rows",
            "Rows whose outputs are kept until their replies leave.",
            |s| s.recorded as f64,
        ),
        (
            "weir_hams_undurable_batches",
            "Batches sent and not yet durable.",
            |s| s.undurable as f64,
        ),
    ];
    for (name, help, field) in per_node {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
        for (node, s) in &statuses {
            let _ = writeln!(
                out,
                "{name}{{graph=\"{graph}\",node=\"{node}\"}} {}",
                field(s)
            );
        }
    }
    let _ = writeln!(out, "# HELP weir_hams_held_replies Replies waiting for the states they depend on to be durable.\n# TYPE weir_hams_held_replies gauge");
    let _ = writeln!(
        out,
        "weir_hams_held_replies{{graph=\"{graph}\"}} {}",
        replies.held()
    );
    let _ = writeln!(out, "# HELP weir_hams_stale_answers_total Answers of superseded request attempts dropped.\n# TYPE weir_hams_stale_answers_total counter");
    let _ = writeln!(
        out,
        "weir_hams_stale_answers_total{{graph=\"{graph}\"}} {}",
        replies.stale()
    );
}

fn render_replica_metrics(
    out: &mut String,
    graph: &str,
    pools: &[(String, weir_operators::model::ReplicaPool)],
) {
    use std::fmt::Write;
    use weir_engine::metrics as m;
    if pools.is_empty() {
        return;
    }
    type ReplicaValue = fn(&(String, bool, usize, u64)) -> f64;
    let per_replica: [(&str, &str, &str, ReplicaValue); 3] = [
        (
            m::REPLICA_ALIVE,
            "gauge",
            "Whether the replica is alive (1) or not (0).",
            |r| f64::from(u8::from(r.1)),
        ),
        (
            m::REPLICA_OUTSTANDING,
            "gauge",
            "Jobs sent to the replica and not answered yet.",
            |r| r.2 as f64,
        ),
        (
            m::REPLICA_DISPATCHED_TOTAL,
            "counter",
            "Jobs sent to the replica.",
            |r| r.3 as f64,
        ),
    ];
    for (name, kind, help, value) in per_replica {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (node, pool) in pools {
            for r in pool.replica_states() {
                let _ = writeln!(
                    out,
                    "{name}{{graph=\"{graph}\",node=\"{node}\",replica=\"{}\"}} {}",
                    r.0,
                    value(&r)
                );
            }
        }
    }
    type PoolValue = fn(&weir_operators::model::PoolStats) -> u64;
    let per_node: [(&str, &str, PoolValue); 3] = [
        (
            m::REPLICA_REDISPATCHED_TOTAL,
            "Jobs re-dispatched after a replica died, timed out or shed them.",
            |s| s.redispatched,
        ),
        (
            m::REPLICA_FAILED_TOTAL,
            "Jobs failed because no replica was alive.",
            |s| s.failed,
        ),
        (
            m::REPLICA_LATE_ANSWERS_TOTAL,
            "Answers that came after the job was answered (suppressed).",
            |s| s.late_answers,
        ),
    ];
    for (name, help, value) in per_node {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
        for (node, pool) in pools {
            let _ = writeln!(
                out,
                "{name}{{graph=\"{graph}\",node=\"{node}\"}} {}",
                value(&pool.stats())
            );
        }
    }
}

/// SERF `parallelism: auto` nodes: the configuration in force, switches, the arrival-rate
/// estimate, the online re-profiling (re-evaluations, ranking changes, explorations, measured
/// rates per tuple), and each configuration's standing at the planned load (predicted latency,
/// utilisation, cap).
fn render_parallelism_metrics(
    out: &mut String,
    graph: &str,
    nodes: &[(String, weir_operators::model::ParallelismSnapshot)],
) {
    use std::fmt::Write;
    use weir_engine::metrics as m;
    if nodes.is_empty() {
        return;
    }
    type Value = fn(&weir_operators::model::ParallelismSnapshot) -> f64;
    let series: [(&str, &str, &str, Value); 11] = [
        (
            m::PARALLELISM_CONCURRENCY,
            "gauge",
            "Requests the executor runs at once now (SERF).",
            |p| p.concurrency as f64,
        ),
        (
            m::PARALLELISM_THREADS,
            "gauge",
            "Intra-op threads of each new request now (SERF).",
            |p| p.threads as f64,
        ),
        (
            m::PARALLELISM_SWITCHES_TOTAL,
            "counter",
            "Parallelism configuration switches applied.",
            |p| p.switches as f64,
        ),
        (
            m::ARRIVAL_RATE_ESTIMATE,
            "gauge",
            "The SERF scheduler's arrival-rate estimate, requests per second.",
            |p| p.arrival_rate,
        ),
        (
            m::SERF_PROFILE_UPDATES_TOTAL,
            "counter",
            "Re-evaluations of the configurations with measured service rates (SERF).",
            |p| p.profile_updates as f64,
        ),
        (
            m::SERF_RANKING_CHANGES_TOTAL,
            "counter",
            "Re-evaluations that changed the configurations' ranking (SERF).",
            |p| p.ranking_changes as f64,
        ),
        (
            m::SERF_EXPLORATIONS_TOTAL,
            "counter",
            "Explorations of configurations without fresh measurements (SERF).",
            |p| p.explorations as f64,
        ),
        (
            m::SERF_BACKLOG_SWITCHES_TOTAL,
            "counter",
            "Switches away from a configuration whose queue kept growing (SERF's backlog guard).",
            |p| p.backlog_switches as f64,
        ),
        (
            m::SERF_WAITING,
            "gauge",
            "Requests waiting in front of the sessions at the last SERF control tick.",
            |p| p.waiting as f64,
        ),
        (
            m::SERF_SERVICE_SAMPLES_DROPPED_TOTAL,
            "counter",
            "Service times dropped because the SERF control thread fell behind.",
            |p| p.samples_dropped as f64,
        ),
        (
            m::SERF_SERVICE_SAMPLES_SETTLING_TOTAL,
            "counter",
            "Service times left out because their call began while a switch settled (SERF).",
            |p| p.samples_settling as f64,
        ),
    ];
    for (name, kind, help, value) in series {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (node, p) in nodes {
            let _ = writeln!(
                out,
                "{name}{{graph=\"{graph}\",node=\"{node}\"}} {}",
                value(p)
            );
        }
    }
    type RateValue = fn(&weir_operators::model::ServiceRate) -> Option<f64>;
    let per_tuple: [(&str, &str, &str, RateValue); 2] = [
        (
            m::SERF_SERVICE_SAMPLES_TOTAL,
            "counter",
            "Service times measured per tuple (running requests × intra-op threads) (SERF).",
            |r| Some(r.samples as f64),
        ),
        (
            m::SERF_MEASURED_SERVICE_RATE,
            "gauge",
            "Measured service rate per request of a tuple, requests per second, once it overrides the offline profile (SERF).",
            |r| r.measured,
        ),
    ];
    for (name, kind, help, value) in per_tuple {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (node, p) in nodes {
            for r in &p.service_rates {
                if let Some(v) = value(r) {
                    let _ = writeln!(
                        out,
                        "{name}{{graph=\"{graph}\",node=\"{node}\",running=\"{}\",threads=\"{}\"}} {v}",
                        r.running, r.threads
                    );
                }
            }
        }
    }
    type StandingValue = fn(&weir_serf::scheduler::Standing) -> Option<f64>;
    let per_config: [(&str, &str, StandingValue); 3] = [
        (
            m::SERF_PREDICTED_LATENCY,
            "Mean latency SERF predicted for the configuration at its last planned load, seconds.",
            |s| s.estimate.map(|e| e.latency),
        ),
        (
            m::SERF_PREDICTED_UTILISATION,
            "SERF's planned load over the configuration's capacity.",
            |s| Some(s.utilisation),
        ),
        (
            m::SERF_UTILISATION_CAP,
            "SERF's utilisation cap of the configuration now (another than the running one enters only below the cap's dead band).",
            |s| Some(s.cap),
        ),
    ];
    for (name, help, value) in per_config {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
        for (node, p) in nodes {
            for s in &p.standings {
                if let Some(v) = value(s) {
                    let _ = writeln!(
                        out,
                        "{name}{{graph=\"{graph}\",node=\"{node}\",concurrency=\"{}\",threads=\"{}\"}} {v}",
                        s.config.concurrency, s.config.threads
                    );
                }
            }
        }
    }
}

/// One Prometheus histogram per node: cumulative buckets at `bounds` (then `+Inf`), sum, count.
fn render_histogram(
    out: &mut String,
    graph: &str,
    stats: &[(String, LoadSnapshot)],
    name: &str,
    help: &str,
    bounds: &[String],
    read: fn(&LoadSnapshot) -> (&[u64], f64),
) {
    use std::fmt::Write;
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
    for (node, s) in stats {
        let (buckets, sum) = read(s);
        let mut cumulative = 0;
        for (i, count) in buckets.iter().enumerate() {
            cumulative += count;
            let le = bounds.get(i).map(String::as_str).unwrap_or("+Inf");
            let _ = writeln!(
                out,
                "{name}_bucket{{graph=\"{graph}\",node=\"{node}\",le=\"{le}\"}} {cumulative}"
            );
        }
        let _ = writeln!(out, "{name}_sum{{graph=\"{graph}\",node=\"{node}\"}} {sum}");
        let _ = writeln!(
            out,
            "{name}_count{{graph=\"{graph}\",node=\"{node}\"}} {}",
            s.runs
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_engine::batch::TensorColumn;
    use weir_operators::model::{InferenceService, Job, Replica, ReplicaDone, ReplicaPool};

    /// A replica that answers every job with its inputs, or is down.
    struct Echo(&'static str, bool);

    impl Replica for Echo {
        fn name(&self) -> &str {
            self.0
        }
        fn is_alive(&self) -> bool {
            self.1
        }
        fn capacity(&self) -> usize {
            4
        }
        fn dispatch(&self, inputs: Vec<TensorColumn>, _: std::time::Instant, done: ReplicaDone) {
            done(Ok(inputs));
        }
    }

    #[test]
    fn replica_metrics_name_every_replica_and_count_dispatches() {
        let pool = ReplicaPool::new(
            "m",
            vec![Arc::new(Echo("a", true)), Arc::new(Echo("b", false))],
            1,
        );
        for _ in 0..3 {
            let col = TensorColumn::from_data("x", vec![1], 1, TensorData::F32(vec![1.0])).unwrap();
            let job = Job {
                inputs: vec![col],
                enqueued_at: std::time::Instant::now(),
                done: Box::new(|r| assert!(r.is_ok())),
            };
            assert!(pool.try_submit(job).is_ok());
        }
        let mut out = String::new();
        render_replica_metrics(&mut out, "g", &[("m".into(), pool)]);
        assert!(
            out.contains("weir_replica_alive{graph=\"g\",node=\"m\",replica=\"a\"} 1"),
            "{out}"
        );
        assert!(
            out.contains("weir_replica_alive{graph=\"g\",node=\"m\",replica=\"b\"} 0"),
            "{out}"
        );
        assert!(
            out.contains("weir_replica_dispatched_total{graph=\"g\",node=\"m\",replica=\"a\"} 3"),
            "{out}"
        );
        assert!(
            out.contains("weir_replica_redispatched_total{graph=\"g\",node=\"m\"} 0"),
            "{out}"
        );
        assert!(
            out.contains("# TYPE weir_replica_outstanding gauge"),
            "{out}"
        );
    }
}
