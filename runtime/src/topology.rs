//! Starting a plan, in the order its parts depend on each other.
//!
//! [`TopologyBuilder::build`] reads as the start-up's table of contents: open the zenoh session
//! the plan's remote executors need, make the shared state (request log, admission counters,
//! the HAMS coordinator when stateful nodes run on executors), start the operators' executors
//! and pools, wrap the request log in the reply table, start the dataflow around it, and last
//! start the HAMS manager, which takes the running dataflow and assigns the first roles. Each
//! resource is made before what uses it and handed down through constructors.

use std::sync::Arc;
use std::time::Duration;

use weir_engine::dataflow::egress::{replicated_nodes, ReplyTable, RequestLog};
use weir_engine::plan::{NodeKind, Plan};
use weir_engine::runtime::{
    AdmissionGauge, ClusterOptions, GraphRuntime, RuntimeOptions, RuntimeParts,
};
use weir_engine::validate::ReplicaTarget;
use weir_executor::client::ZenohReplicas;
use weir_hams_manager::{Coordinator, HamsManager};
use weir_operators::stateful::{ManagerLinks, StatefulNodeHandle};
use weir_operators::{OperatorFactory, RemoteReplicaSource, SharedHandles};

use crate::running::RunningGraph;

/// How long the HAMS manager waits for every member of a stateful node to come alive.
const MEMBERS_ALIVE_WITHIN: Duration = Duration::from_secs(15);

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
    /// A stateful node on executors in a timely cluster of several processes (see
    /// [`refuse_managed_in_cluster`]).
    #[error(
        "node `{node}` is a stateful node on executors, replicated by a HAMS manager, which must \
         be one per node: a timely cluster of {processes} processes would start one in each, \
         assigning the node's roles several times over; serve this graph with one process (its \
         executors may still run on other hosts)"
    )]
    StatefulInCluster {
        /// The node's id.
        node: String,
        /// The processes in the cluster.
        processes: usize,
    },
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

/// Starts executors for every model node, then the dataflow.
///
/// # Errors
/// When ONNX Runtime or a model cannot be loaded, or the dataflow cannot start.
pub fn start(plan: Plan, options: RuntimeOptions) -> Result<RunningGraph, StartError> {
    TopologyBuilder::new(plan).options(options).build()
}

/// As [`start`], reaching the remote executors the plan names over zenoh with `distributed`.
///
/// # Errors
/// As [`start`], or when zenoh cannot start or a remote executor does not come alive.
pub fn start_distributed(
    plan: Plan,
    options: RuntimeOptions,
    distributed: &DistributedOptions,
) -> Result<RunningGraph, StartError> {
    TopologyBuilder::new(plan)
        .options(options)
        .distributed(distributed.clone())
        .build()
}

/// Where a graph's remote replicas come from.
enum Remotes<'a> {
    /// Its own zenoh session, opened at build when the plan names remote executors.
    Own(DistributedOptions),
    /// A session the caller opened (and may share among many graphs), with the source that
    /// makes replicas on it: how model-less serving starts each variant on a remote executor.
    Shared(Arc<ZenohReplicas>, &'a dyn RemoteReplicaSource),
}

/// A plan and how to start it; [`TopologyBuilder::build`] starts it.
pub struct TopologyBuilder<'a> {
    plan: Plan,
    options: RuntimeOptions,
    remotes: Remotes<'a>,
}

impl std::fmt::Debug for TopologyBuilder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TopologyBuilder")
            .field("graph", &self.plan.name)
            .finish_non_exhaustive()
    }
}

/// What the operators, the reply table and the manager share, made before any of them.
struct SharedState {
    requests: Arc<RequestLog>,
    admission: AdmissionGauge,
    coordinator: Option<Coordinator>,
}

impl<'a> TopologyBuilder<'a> {
    /// Starts `plan` in this process with default options and no remote executors beyond those
    /// the plan names.
    pub fn new(plan: Plan) -> Self {
        TopologyBuilder {
            plan,
            options: RuntimeOptions::default(),
            remotes: Remotes::Own(DistributedOptions::default()),
        }
    }

    /// The dataflow's options (workers, limits, timeouts).
    #[must_use]
    pub fn options(mut self, options: RuntimeOptions) -> Self {
        self.options = options;
        self
    }

    /// zenoh endpoints to listen on and connect to, and the timely cluster this process is in.
    #[must_use]
    pub fn distributed(mut self, distributed: DistributedOptions) -> Self {
        self.remotes = Remotes::Own(distributed);
        self
    }

    /// Makes remote replicas with `remotes` on the caller's session `zenoh` instead of opening
    /// one.
    #[must_use]
    pub fn shared_remotes(
        mut self,
        zenoh: Arc<ZenohReplicas>,
        remotes: &'a dyn RemoteReplicaSource,
    ) -> Self {
        self.remotes = Remotes::Shared(zenoh, remotes);
        self
    }

    /// Starts the graph.
    ///
    /// # Errors
    /// When zenoh cannot start, ONNX Runtime or a model cannot be loaded, a remote executor does
    /// not come alive, the dataflow cannot start or stateful nodes' roles cannot be assigned.
    pub fn build(self) -> Result<RunningGraph, StartError> {
        let TopologyBuilder {
            plan,
            options,
            remotes,
        } = self;
        if let Remotes::Own(DistributedOptions {
            cluster: Some(c), ..
        }) = &remotes
        {
            refuse_managed_in_cluster(&plan, c.addresses.len())?;
        }
        let (zenoh, source, cluster) = open_zenoh(&plan, remotes)?;
        // The graph's own session makes its remote replicas unless the caller gave a source.
        let source = source.or_else(|| zenoh.as_deref().map(|z| z as &dyn RemoteReplicaSource));
        let shared = SharedState::new(&plan, zenoh.is_some());
        let factory = Arc::new(start_operators(&plan, &shared, source, cluster.is_some())?);
        let managed = managed_nodes(&factory);
        let replies = shared.reply_table(&plan, &managed);
        let runtime = Arc::new(GraphRuntime::start_in(
            plan,
            factory.clone(),
            options,
            cluster,
            RuntimeParts {
                replies,
                admission: shared.admission,
            },
        )?);
        runtime.set_readiness(replicas_readiness(Arc::clone(&factory)));
        let hams = start_manager(shared.coordinator, zenoh.as_deref(), managed, &runtime)?;
        Ok(RunningGraph {
            runtime,
            factory,
            hams,
            _zenoh: zenoh,
        })
    }
}

/// The session remote replicas are made on (if any), the source that makes them, and the
/// cluster this process is part of.
type Links<'a> = (
    Option<Arc<ZenohReplicas>>,
    Option<&'a dyn RemoteReplicaSource>,
    Option<ClusterOptions>,
);

/// Opens the graph's own zenoh session when it has remote executors or listens for them, or
/// takes the caller's.
fn open_zenoh<'a>(plan: &Plan, remotes: Remotes<'a>) -> Result<Links<'a>, StartError> {
    match remotes {
        Remotes::Shared(zenoh, source) => Ok((Some(zenoh), Some(source), None)),
        Remotes::Own(distributed) => {
            let (remote, mut endpoints) = executor_endpoints(plan);
            let zenoh = if remote || !distributed.listen.is_empty() {
                endpoints.extend(distributed.connect.iter().cloned());
                Some(Arc::new(ZenohReplicas::open(
                    &distributed.listen,
                    &endpoints,
                )?))
            } else {
                None
            };
            Ok((zenoh, None, distributed.cluster))
        }
    }
}

impl SharedState {
    fn new(plan: &Plan, linked: bool) -> Self {
        SharedState {
            requests: Arc::new(RequestLog::default()),
            admission: AdmissionGauge::default(),
            coordinator: (linked && has_managed_nodes(plan)).then(|| Coordinator::new(&plan.name)),
        }
    }

    /// The reply table around the request log, with the coordinator's release hook for the
    /// managed stateful nodes.
    fn reply_table(&self, plan: &Plan, managed: &[Arc<StatefulNodeHandle>]) -> Arc<ReplyTable> {
        Arc::new(ReplyTable::new(
            Arc::clone(&self.requests),
            replicated_nodes(plan),
            self.coordinator
                .as_ref()
                .map(|c| c.release_hook(managed.to_vec())),
        ))
    }
}

/// The executors, replica pools and stateful proxies of every node, given what they share.
fn start_operators(
    plan: &Plan,
    shared: &SharedState,
    remotes: Option<&dyn RemoteReplicaSource>,
    in_cluster: bool,
) -> Result<OperatorFactory, StartError> {
    let links = shared.coordinator.as_ref().map(|c| ManagerLinks {
        requests: Arc::clone(&shared.requests),
        suspicions: c.suspicions(),
    });
    Ok(OperatorFactory::start_with(
        plan,
        SharedHandles {
            remotes,
            // In a cluster, requests admitted here may be served by another process's executor.
            admission: (!in_cluster).then_some(&shared.admission),
            manager: links.as_ref(),
            // Only a graph whose requests are all admitted here knows every row's deadline.
            requests: (!in_cluster).then_some(&shared.requests),
            // Sampled requests admitted here are traced here either way.
            traces: Some(&shared.requests),
        },
    )?)
}

/// The stateful nodes whose members the HAMS manager drives.
fn managed_nodes(factory: &OperatorFactory) -> Vec<Arc<StatefulNodeHandle>> {
    factory
        .stateful_nodes()
        .into_iter()
        .filter(|h| h.is_managed())
        .collect()
}

/// Starts the HAMS manager over the running dataflow, when the graph has managed nodes.
fn start_manager(
    coordinator: Option<Coordinator>,
    zenoh: Option<&ZenohReplicas>,
    managed: Vec<Arc<StatefulNodeHandle>>,
    runtime: &Arc<GraphRuntime>,
) -> Result<Option<Arc<HamsManager>>, StartError> {
    let (Some(coordinator), Some(zenoh)) = (coordinator, zenoh) else {
        return Ok(None);
    };
    Ok(Some(Arc::new(coordinator.start(
        zenoh.session(),
        managed,
        zenoh.member_sessions(),
        Arc::clone(runtime),
        MEMBERS_ALIVE_WITHIN,
    )?)))
}

/// Every distinct endpoint of the remote executors `plan`'s model nodes (and their parity model
/// nodes) run on, and whether any node has a remote replica at all.
fn executor_endpoints(plan: &Plan) -> (bool, Vec<String>) {
    let mut remote = false;
    let mut endpoints: Vec<String> = Vec::new();
    for n in &plan.nodes {
        let NodeKind::Model(m) = &n.node.kind else {
            continue;
        };
        for r in m.every_replica() {
            if let ReplicaTarget::Remote(e) = r {
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
    first_managed_node(plan).is_some()
}

/// The id of the plan's first stateful node on executors (the HAMS manager's charge), if any.
fn first_managed_node(plan: &Plan) -> Option<&str> {
    plan.nodes.iter().find_map(|n| match &n.node.kind {
        NodeKind::Model(m) if m.state.is_some() && weir_operators::on_executors(m) => {
            Some(n.node.id.as_str())
        }
        _ => None,
    })
}

/// Refuses a plan with a stateful node on executors in a timely cluster of more than one
/// process. Every process of a cluster builds the whole topology, so each would start a HAMS
/// manager of its own, and two managers assign one node's roles independently (each its own
/// epoch 1 to the same members): requests meet two views of who is primary. One manager per
/// node is what HAMS assumes (§III-A); a stateful node is served by one process, whose workers
/// and executors carry its load.
fn refuse_managed_in_cluster(plan: &Plan, processes: usize) -> Result<(), StartError> {
    match first_managed_node(plan) {
        Some(node) if processes > 1 => Err(StartError::StatefulInCluster {
            node: node.to_string(),
            processes,
        }),
        _ => Ok(()),
    }
}

/// The graph can answer while every replicated model node has a live replica: readiness probes
/// turn it away meanwhile (its requests would get 503 anyway).
fn replicas_readiness(factory: Arc<OperatorFactory>) -> weir_engine::runtime::ReadinessCheck {
    Arc::new(move || {
        for (node, pool) in factory.replica_pools() {
            let states = pool.replica_states();
            if !states.iter().any(|(_, alive, _, _)| *alive) {
                let names: Vec<&str> = states.iter().map(|(n, ..)| n.as_str()).collect();
                return Err(format!(
                    "node `{node}` has no live replica (replicas: {})",
                    names.join(", ")
                ));
            }
        }
        Ok(())
    })
}
