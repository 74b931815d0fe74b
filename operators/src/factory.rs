//! The operator factory: the process-wide resources of a graph's nodes (one ONNX Runtime executor
//! per model node, replica pools, stateful proxies), started before any worker runs so a bad
//! model fails at start-up, and each node's operator built from them on every worker.
//!
//! It is longer than one idea usually takes because it is the one seam where every kind of
//! planned node (model, parity stages, stateful, inline op) meets the resources it runs on; its
//! pieces are short functions, each building one kind of part.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use weir_engine::compile::{CompileError, NodeFactory, ParityEncoded, ParityJoined};
use weir_engine::dataflow::egress::RequestLog;
use weir_engine::dataflow::exchange::route_rows;
use weir_engine::dataflow::gather_stats::{GatherSnapshot, GatherStats};
use weir_engine::dataflow::{BatchStream, ErrorStream};
use weir_engine::onnx::ElementType;
use weir_engine::plan::{parity_node_id, ModelNode, NodeKind, Plan, PlannedNode};
use weir_engine::runtime::AdmissionGauge;
use weir_engine::validate::{RemoteExecutor, ReplicaTarget};

use crate::model::expiry::Deadlines;
use crate::model::{
    ExecError, ExecutorConfig, InferenceService, LoadSnapshot, LocalReplica, ModelExecutor,
    ModelOperator, OrtRuntime, Replica, ReplicaPool,
};
use crate::parity::DecodeOperator;
use crate::stateful::{
    LocalStatefulTransport, ManagerLinks, StatefulNodeHandle, StatefulOperator, StatefulTransport,
};
use crate::tensor::operator::{OpSnapshot, OpStats, TensorOperator};
use crate::tensor::TensorOp;
use crate::{model, parity, stateful};

/// Makes replicas that run on remote executor processes. Implemented by the `weir-executor`
/// crate's zenoh client; the engine and operators stay free of any transport.
pub trait RemoteReplicaSource: Send + Sync {
    /// A replica of the node `config.node` on `executor` (serving the model under the node id).
    ///
    /// # Errors
    /// When the executor cannot be reached at all.
    fn replica(
        &self,
        executor: &RemoteExecutor,
        config: &ExecutorConfig,
    ) -> Result<Arc<dyn Replica>, ExecError>;

    /// The transport that runs stateful nodes' batches on executor processes (HAMS), if this
    /// source has one.
    fn stateful_transport(&self) -> Option<Arc<dyn stateful::StatefulTransport>> {
        None
    }
}

/// What the graph process made before the factory, handed to the nodes that use it.
#[derive(Clone, Copy, Default)]
pub struct SharedHandles<'a> {
    /// Replicas on remote executors and the stateful transport to them (none: every replica
    /// runs in this process).
    pub remotes: Option<&'a dyn RemoteReplicaSource>,
    /// The graph's admission counters, for the SERF control loop of a `parallelism: auto` node
    /// that takes every admitted request (see [`takes_every_request`]). None in a cluster, where
    /// requests admitted here may be served by another process's executor.
    pub admission: Option<&'a AdmissionGauge>,
    /// The HAMS manager's links, for the stateful nodes on executors.
    pub manager: Option<&'a ManagerLinks>,
    /// The graph's request log, whose deadlines model nodes keep to ([`model::expiry`]). None
    /// in a cluster, where rows admitted by another process have no entry in this one's log.
    pub requests: Option<&'a Arc<RequestLog>>,
    /// The request log whose trace book model nodes record sampled rows' calls in, when it is
    /// not `requests` (a cluster's process: the requests it admitted are sampled there, rows
    /// admitted elsewhere are not in it and record nothing here).
    pub traces: Option<&'a Arc<RequestLog>>,
}

impl std::fmt::Debug for SharedHandles<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedHandles")
            .field("remotes", &self.remotes.is_some())
            .field("admission", &self.admission)
            .field("manager", &self.manager)
            .field("requests", &self.requests.is_some())
            .field("traces", &self.traces.is_some())
            .finish()
    }
}

/// Whether model node `id` takes every request admitted to `plan`, so that the load at admission
/// is all its own: the plan's only model node, served by one in-process executor without
/// replicas, parity or state.
pub fn takes_every_request(plan: &Plan, id: &str) -> bool {
    let mut models = plan.nodes.iter().filter_map(|n| match &n.node.kind {
        NodeKind::Model(m) => Some((n, m)),
        _ => None,
    });
    match (models.next(), models.next()) {
        (Some((n, m)), None) => {
            n.node.id == id
                && m.replicas == [ReplicaTarget::Local]
                && m.parity.is_none()
                && m.state.is_none()
        }
        _ => false,
    }
}

/// Builds node operators for one plan, owning its executors.
pub struct OperatorFactory {
    /// In-process executors, by node id.
    executors: HashMap<String, Arc<ModelExecutor>>,
    /// Replica pools of nodes with more than one replica or a remote one, by node id.
    pools: HashMap<String, ReplicaPool>,
    /// What each model node's operator submits to, by node id.
    services: HashMap<String, Arc<dyn InferenceService>>,
    /// Parity-coded nodes' shared encoder and decoder, by node id (each parity model node's
    /// service is in `services` under its own id).
    parity: HashMap<String, parity::ParityNode>,
    /// Stateful nodes (HAMS): proxy and transport, by node id.
    stateful: HashMap<String, (Arc<StatefulNodeHandle>, Arc<dyn StatefulTransport>)>,
    /// Each stateless model node's request deadlines and count of rows expired, by node id.
    deadlines: HashMap<String, Deadlines>,
    /// Each tensor-op node's counters, by node id.
    ops: HashMap<String, Arc<OpStats>>,
    /// Each gather node's counters, by node id (the compiler builds gathers; they count here).
    gathers: HashMap<String, Arc<GatherStats>>,
    /// Whether the plan has one model node (not told to wait always), whose lone jobs may then
    /// run on the worker while its executor is idle (see [`ModelOperator`]).
    one_model_node: bool,
    /// The graph's admission counters, which tell that node's operator whether a lone job holds
    /// every request in flight ([`ModelOperator::in_flight`]).
    admission: Option<AdmissionGauge>,
}

impl std::fmt::Debug for OperatorFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OperatorFactory")
            .field("executors", &self.executors.keys().collect::<Vec<_>>())
            .field("pools", &self.pools)
            .finish()
    }
}

/// The scheduler settings of a `parallelism: auto` node: the defaults, or, where the YAML gives a
/// utilisation cap (validated to lie in `(0, 1]`), that one cap for every configuration, shown to
/// hold at the load or not (`weir_serf::scheduler`, *Earned headroom*).
fn scheduler_options(
    auto: &weir_engine::parallelism::AutoParallelism,
) -> weir_serf::scheduler::SchedulerOptions {
    let defaults = weir_serf::scheduler::SchedulerOptions::default();
    match auto.max_utilisation {
        Some(cap) => weir_serf::scheduler::SchedulerOptions {
            max_utilisation: cap,
            unproven_utilisation: None,
            ..defaults
        },
        None => defaults,
    }
}

fn executor_config(n: &PlannedNode, m: &ModelNode) -> ExecutorConfig {
    let inputs: Vec<String> = n.node.inputs.iter().map(|p| p.name.clone()).collect();
    let outputs: Vec<(String, weir_engine::tensor::DType)> = m
        .metadata
        .outputs
        .iter()
        .filter_map(|o| match o.element {
            ElementType::Supported(d) => Some((o.name.clone(), d)),
            _ => None,
        })
        .collect();
    ExecutorConfig {
        node: n.node.id.clone(),
        path: m.path.clone(),
        call: m.call,
        max_batch: m.call.call_rows(m.batching.max_size),
        max_delay: Duration::from_micros(m.batching.max_delay_us),
        wait: m.batching.wait,
        grow: m.batching.grow,
        instances: m.executor.instances,
        intra_op_threads: m.executor.intra_op_threads,
        queue_capacity: m.executor.queue_capacity,
        spinning: m.executor.spinning,
        pin_cores_from: m.executor.pin_cores_from,
        pad: m
            .pad
            .as_ref()
            .map(|plan| model::Padding::resolve(plan, &inputs, &outputs)),
        inputs,
        outputs,
        timeout: Some(Duration::from_millis(m.executor.timeout_ms.max(1))),
        device: m.executor.device,
        graph_level: m.executor.graph_optimization,
        warmup: m.warmup.clone(),
    }
}

/// Parity model node `p`'s executor configuration: the deployed node's signature and call shape
/// (`deployed`), with its own model, batching and executor settings.
fn parity_config(
    deployed: &ExecutorConfig,
    p: &weir_engine::plan::ParityModelNode,
) -> ExecutorConfig {
    ExecutorConfig {
        node: p.id.clone(),
        path: p.path.clone(),
        max_batch: deployed.call.call_rows(p.batching.max_size),
        max_delay: Duration::from_micros(p.batching.max_delay_us),
        wait: p.batching.wait,
        grow: p.batching.grow,
        instances: p.executor.instances,
        intra_op_threads: p.executor.intra_op_threads,
        queue_capacity: p.executor.queue_capacity,
        spinning: p.executor.spinning,
        pin_cores_from: p.executor.pin_cores_from,
        pad: None,
        timeout: Some(Duration::from_millis(p.executor.timeout_ms.max(1))),
        device: p.executor.device,
        graph_level: p.executor.graph_optimization,
        ..deployed.clone()
    }
}

impl OperatorFactory {
    /// Starts an executor for every model node of `plan`, all in this process.
    ///
    /// # Errors
    /// When ONNX Runtime is missing, a model's session cannot be created, or a node names a
    /// remote replica (use [`OperatorFactory::start_with`]).
    pub fn start(plan: &Plan) -> Result<OperatorFactory, ExecError> {
        OperatorFactory::start_with(plan, SharedHandles::default())
    }

    /// Starts every model node's replicas: in-process executors here, remote ones through
    /// `shared.remotes`; each node gets the handles of `shared` it uses.
    ///
    /// # Errors
    /// When ONNX Runtime is missing, a session cannot be created, or a remote replica cannot be
    /// reached.
    pub fn start_with(
        plan: &Plan,
        shared: SharedHandles<'_>,
    ) -> Result<OperatorFactory, ExecError> {
        let remotes = shared.remotes;
        let mut factory = OperatorFactory {
            executors: HashMap::new(),
            pools: HashMap::new(),
            services: HashMap::new(),
            parity: HashMap::new(),
            stateful: HashMap::new(),
            deadlines: HashMap::new(),
            ops: plan
                .nodes
                .iter()
                .filter(|n| matches!(n.node.kind, NodeKind::Op(_)))
                .map(|n| (n.node.id.clone(), Arc::default()))
                .collect(),
            gathers: plan
                .nodes
                .iter()
                .filter(|n| matches!(n.node.kind, NodeKind::Gather(_)))
                .map(|n| (n.node.id.clone(), Arc::default()))
                .collect(),
            // A node told to wait always (`batching.wait: always`) keeps its timer: it is not
            // run here, where a lone job would go at once.
            one_model_node: {
                let mut models = plan.nodes.iter().filter_map(|n| match &n.node.kind {
                    NodeKind::Model(m) => Some(m),
                    _ => None,
                });
                matches!(
                    (models.next(), models.next()),
                    (Some(m), None) if m.batching.wait != weir_engine::spec::BatchWait::Always
                )
            },
            admission: shared.admission.cloned(),
        };
        let needs_runtime = plan.nodes.iter().any(|n| match &n.node.kind {
            NodeKind::Model(m) => m.replicas.contains(&ReplicaTarget::Local) || m.parity.is_some(),
            _ => false,
        });
        let runtime = if needs_runtime {
            Some(OrtRuntime::get()?)
        } else {
            None
        };
        for n in &plan.nodes {
            let NodeKind::Model(m) = &n.node.kind else {
                continue;
            };
            if let Some(spec) = &m.state {
                let node = start_stateful(plan, n, m, spec, runtime.as_ref(), shared)?;
                factory.stateful.insert(n.node.id.clone(), node);
                continue;
            }
            let config = executor_config(n, m);
            let service = factory.serve(&config, &m.replicas, &m.routing, remotes, |config| {
                let Some(runtime) = &runtime else {
                    return Ok(None);
                };
                Ok(Some(match &m.auto_parallelism {
                    Some(auto) => ModelExecutor::start_auto(
                        runtime,
                        config.clone(),
                        model::AutoOptions {
                            candidates: weir_serf::table::Candidates::from_profile(&auto.profile),
                            initial: auto.initial,
                            scheduler: scheduler_options(auto),
                            admission: shared
                                .admission
                                .filter(|_| takes_every_request(plan, &n.node.id))
                                .cloned(),
                        },
                    )?,
                    None => ModelExecutor::start(runtime, config.clone())?,
                }))
            })?;
            if let (Some(plan), Some(runtime)) = (&m.parity, &runtime) {
                // Each parity model is a node of its own: its executor or replica pool.
                for p in &plan.models {
                    let parity_config = parity_config(&config, p);
                    let service = factory.serve(
                        &parity_config,
                        &p.replicas,
                        &weir_engine::routing::Routing::default(),
                        remotes,
                        |config| ModelExecutor::start(runtime, config.clone()).map(Some),
                    )?;
                    factory.services.insert(p.id.clone(), service);
                }
                let encoder = match plan.encoder.encoder {
                    weir_engine::spec::ParityEncoder::Sum => parity::Encoder::Sum,
                    weir_engine::spec::ParityEncoder::Concat => parity::Encoder::Concat,
                };
                let coded = parity::ParityNode::new(
                    &n.node.id,
                    plan.k(),
                    encoder,
                    (plan.decoder.decode, plan.decoder.floor),
                    plan.models.iter().map(|p| p.id.clone()).collect(),
                );
                factory.parity.insert(n.node.id.clone(), coded);
            }
            factory.services.insert(n.node.id.clone(), service);
            factory.deadlines.insert(
                n.node.id.clone(),
                Deadlines::new(shared.requests.cloned(), Arc::default())
                    .with_traces(shared.traces.or(shared.requests).cloned()),
            );
        }
        Ok(factory)
    }

    /// The service of a model node (or a parity model node) configured by `config` on
    /// `targets`: its one in-process executor (made by `local`, `None` without a runtime), or a
    /// replica pool over all its replicas routed by `routing`. Executors and pools are kept by the
    /// node id, so each shows up in the node's own metrics.
    fn serve(
        &mut self,
        config: &ExecutorConfig,
        targets: &[ReplicaTarget],
        routing: &weir_engine::routing::Routing,
        remotes: Option<&dyn RemoteReplicaSource>,
        mut local: impl FnMut(&ExecutorConfig) -> Result<Option<ModelExecutor>, ExecError>,
    ) -> Result<Arc<dyn InferenceService>, ExecError> {
        let id = &config.node;
        let mut replicas: Vec<Arc<dyn Replica>> = Vec::new();
        let mut in_process = None;
        for target in targets {
            match target {
                ReplicaTarget::Local => {
                    let Some(executor) = local(config)? else {
                        continue;
                    };
                    let executor = Arc::new(executor);
                    self.executors.insert(id.clone(), Arc::clone(&executor));
                    replicas.push(Arc::new(LocalReplica::new(Arc::clone(&executor))));
                    in_process = Some(executor);
                }
                ReplicaTarget::Remote(executor) => {
                    let source = remotes.ok_or_else(|| ExecError::Unavailable {
                        node: id.clone(),
                        message: format!(
                            "replica `{}` is remote, but this process has no remote executor client",
                            executor.name
                        ),
                    })?;
                    replicas.push(source.replica(executor, config)?);
                }
            }
        }
        Ok(match (in_process, replicas.len()) {
            (Some(executor), 1) => executor,
            _ => {
                let rows = if config.call.batched() {
                    config.max_batch.max(1)
                } else {
                    1
                };
                let pool = ReplicaPool::with_routing(id, replicas, rows, routing).map_err(|e| {
                    ExecError::Unavailable {
                        node: id.clone(),
                        message: format!("routing: {e}"),
                    }
                })?;
                self.pools.insert(id.clone(), pool.clone());
                Arc::new(pool)
            }
        })
    }

    /// Stateful nodes' proxies (HAMS), in plan order.
    pub fn stateful_nodes(&self) -> Vec<Arc<StatefulNodeHandle>> {
        let mut v: Vec<_> = self.stateful.values().map(|(h, _)| Arc::clone(h)).collect();
        v.sort_by_key(|h| h.node_id);
        v
    }

    /// Parity-coded nodes (ParM) by node id, sorted.
    pub fn parity_services(&self) -> Vec<(String, parity::ParityNode)> {
        by_node(self.parity.iter().map(|(k, p)| (k.clone(), p.clone())))
    }

    /// Replica pools by node id (nodes with several or remote replicas), sorted.
    pub fn replica_pools(&self) -> Vec<(String, ReplicaPool)> {
        by_node(self.pools.iter().map(|(k, p)| (k.clone(), p.clone())))
    }

    /// Parallelism gauges of every switchable (`parallelism: auto`) executor, by node id, sorted.
    pub fn parallelism_stats(&self) -> Vec<(String, model::ParallelismSnapshot)> {
        by_node(
            self.executors
                .iter()
                .filter_map(|(k, e)| e.parallelism().map(|p| (k.clone(), p))),
        )
    }

    /// The in-process executor of model node `node`, if it has one.
    pub fn executor(&self, node: &str) -> Option<&ModelExecutor> {
        self.executors.get(node).map(|e| &**e)
    }

    /// Load counters of every model node's executor, by node id.
    pub fn executor_stats(&self) -> Vec<(String, LoadSnapshot)> {
        by_node(self.executors.iter().map(|(k, e)| (k.clone(), e.stats())))
    }

    /// Counters of every tensor-op node, by node id.
    pub fn op_stats(&self) -> Vec<(String, OpSnapshot)> {
        by_node(self.ops.iter().map(|(k, s)| (k.clone(), s.snapshot())))
    }

    /// Counters of every gather node, by node id.
    pub fn gather_stats(&self) -> Vec<(String, GatherSnapshot)> {
        by_node(self.gathers.iter().map(|(k, s)| (k.clone(), s.snapshot())))
    }

    /// Rows each stateless model node answered expired instead of running, by node id.
    pub fn expired_rows(&self) -> Vec<(String, u64)> {
        by_node(
            self.deadlines
                .iter()
                .map(|(k, d)| (k.clone(), d.expired_rows())),
        )
    }
}

/// `(node id, item)` pairs sorted by node id.
fn by_node<T>(items: impl Iterator<Item = (String, T)>) -> Vec<(String, T)> {
    let mut v: Vec<_> = items.collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

impl NodeFactory for OperatorFactory {
    fn gather_counters(&self, node: &str) -> Arc<GatherStats> {
        self.gathers.get(node).cloned().unwrap_or_default()
    }

    fn build<'s>(
        &self,
        node: &PlannedNode,
        input: BatchStream<'s>,
    ) -> Result<(BatchStream<'s>, ErrorStream<'s>), CompileError> {
        let n = &node.node;
        let input_columns: Vec<String> = n.inputs.iter().map(|p| p.column.clone()).collect();
        let output_columns = output_columns(node);
        match TensorOp::from_kind(&n.kind) {
            Some(op) => Ok(TensorOperator {
                node: n.id.clone(),
                lineage_id: node.lineage_id,
                producer_ids: node.producer_ids.clone(),
                input_columns,
                output_columns,
                op,
                stats: self.ops.get(&n.id).cloned().unwrap_or_default(),
            }
            .build(input)),
            None if self.stateful.contains_key(&n.id) => {
                let (handle, transport) = &self.stateful[&n.id];
                // One sequence of state versions: every row goes to the first worker (without
                // its trace: the node records no call).
                let input = if input.scope().peers() > 1 {
                    route_rows(input, &n.id, |_| 0, None)
                } else {
                    input
                };
                Ok(StatefulOperator {
                    handle: Arc::clone(handle),
                    producer_ids: node.producer_ids.clone(),
                    input_columns,
                    output_columns,
                }
                .build(input, Arc::clone(transport)))
            }
            None => {
                let executor = self.service(&n.id)?;
                let coded = self.parity.contains_key(&n.id);
                Ok(ModelOperator {
                    node: n.id.clone(),
                    lineage_id: node.lineage_id,
                    producer_ids: node.producer_ids.clone(),
                    input_columns,
                    output_columns: model_outputs(node, output_columns),
                    deadlines: self
                        .deadlines
                        .get(&n.id)
                        .cloned()
                        .unwrap_or_else(|| Deadlines::new(None, Arc::default())),
                    // A parity-coded node's worker must stay free for its decoder's deadlines.
                    run_here: self.one_model_node && !coded,
                    in_flight: self.admission.clone().filter(|_| self.one_model_node),
                }
                .build(input, executor))
            }
        }
    }

    fn parity_encode<'s>(
        &self,
        node: &PlannedNode,
        input: BatchStream<'s>,
    ) -> Result<ParityEncoded<'s>, CompileError> {
        let coded = self.parity_node(node)?;
        let max_rows = self.service(&node.node.id)?.rows_per_job();
        let input_columns = node.node.inputs.iter().map(|p| p.column.clone()).collect();
        Ok(coded
            .encoder()
            .build(&node.node.id, input, input_columns, max_rows))
    }

    fn parity_model<'s>(
        &self,
        node: &PlannedNode,
        t: usize,
        queries: BatchStream<'s>,
    ) -> Result<(BatchStream<'s>, ErrorStream<'s>), CompileError> {
        let id = parity_node_id(&node.node.id, t);
        let service = self.service(&id)?;
        let n = &node.node;
        Ok(ModelOperator {
            node: id,
            lineage_id: node.lineage_id,
            producer_ids: node.producer_ids.clone(),
            input_columns: n.inputs.iter().map(|p| p.column.clone()).collect(),
            output_columns: model_outputs(node, output_columns(node)),
            // Parity queries are no client's rows: no deadline, no trace.
            deadlines: Deadlines::new(None, Arc::default()),
            run_here: false,
            in_flight: None,
        }
        .build(queries, service))
    }

    fn parity_decode<'s>(
        &self,
        node: &PlannedNode,
        joined: ParityJoined<'s>,
    ) -> Result<(BatchStream<'s>, ErrorStream<'s>), CompileError> {
        let coded = self.parity_node(node)?;
        let all = output_columns(node);
        let flag_column = all.last().cloned().ok_or_else(|| CompileError {
            node: node.node.id.clone(),
            message: "a parity-coded node has no `reconstructed` output".into(),
        })?;
        Ok(DecodeOperator {
            node: node.node.id.clone(),
            lineage_id: node.lineage_id,
            producer_ids: node.producer_ids.clone(),
            output_columns: model_outputs(node, all),
            flag_column,
            deadlines: self
                .deadlines
                .get(&node.node.id)
                .cloned()
                .unwrap_or_else(|| Deadlines::new(None, Arc::default())),
        }
        .build(coded, joined))
    }
}

impl OperatorFactory {
    /// What model node (or parity model node) `id`'s operator submits to.
    fn service(&self, id: &str) -> Result<Arc<dyn InferenceService>, CompileError> {
        self.services.get(id).cloned().ok_or_else(|| CompileError {
            node: id.to_string(),
            message: "no executor was started for this model node".into(),
        })
    }

    /// Parity-coded node `node`'s shared encoder and decoder.
    fn parity_node(&self, node: &PlannedNode) -> Result<&parity::ParityNode, CompileError> {
        self.parity.get(&node.node.id).ok_or_else(|| CompileError {
            node: node.node.id.clone(),
            message: "no parity coding was started for this node".into(),
        })
    }
}

/// Node `node`'s output column names, in its output order.
fn output_columns(node: &PlannedNode) -> Vec<Arc<str>> {
    let n = &node.node;
    n.outputs
        .iter()
        .map(|(o, _)| Arc::from(n.column(o).as_str()))
        .collect()
}

/// The columns a model computes: `all` of node `node`'s outputs, less the last
/// (`reconstructed`, which its decoder adds) when it is parity-coded.
fn model_outputs(node: &PlannedNode, mut all: Vec<Arc<str>>) -> Vec<Arc<str>> {
    if matches!(&node.node.kind, NodeKind::Model(m) if m.parity.is_some()) {
        all.pop();
    }
    all
}

/// Whether a stateful node runs on executors (the graph's HAMS manager drives it).
pub fn on_executors(m: &ModelNode) -> bool {
    m.replicas
        .iter()
        .any(|r| matches!(r, ReplicaTarget::Remote(_)))
}

/// Starts a stateful node: its proxy (with the manager's links when it runs on executors), and
/// the transport its batches run over (a thread of this process for an unreplicated local node,
/// the remote source's HAMS transport otherwise).
fn start_stateful(
    plan: &Plan,
    n: &PlannedNode,
    m: &ModelNode,
    spec: &weir_engine::stateful::StatefulNode,
    runtime: Option<&OrtRuntime>,
    shared: SharedHandles<'_>,
) -> Result<(Arc<StatefulNodeHandle>, Arc<dyn StatefulTransport>), ExecError> {
    let replicated = weir_engine::dataflow::egress::replicated_nodes(plan);
    let inputs: Vec<String> = n.node.inputs.iter().map(|p| p.name.clone()).collect();
    let outputs: Vec<(String, weir_engine::tensor::DType)> = m
        .metadata
        .outputs
        .iter()
        .filter(|o| !spec.is_state_output(&o.name))
        .filter_map(|o| match o.element {
            ElementType::Supported(d) => Some((o.name.clone(), d)),
            _ => None,
        })
        .collect();
    let handle = Arc::new(StatefulNodeHandle::new(
        n.node.id.clone(),
        n.lineage_id,
        spec.clone(),
        m.replicas.clone(),
        inputs.clone(),
        outputs.iter().map(|(o, _)| o.clone()).collect(),
        if m.batched() { m.batching.max_size } else { 1 }.max(1),
        replicated,
        shared.manager.filter(|_| on_executors(m)).cloned(),
    ));
    let local = m.replicas.first() == Some(&ReplicaTarget::Local);
    let transport: Arc<dyn StatefulTransport> = if local {
        let runtime = runtime.ok_or_else(|| ExecError::RuntimeMissing("no runtime".into()))?;
        let slots = spec.state.clone();
        let mut model = stateful::step::StatefulModel::load(
            runtime,
            &n.node.id,
            &m.path,
            m.executor.intra_op_threads,
            m.batched(),
            inputs,
            outputs,
            slots,
        )?;
        let constants = weir_engine::stateful::constant_tensors(&m.metadata, &spec.constants)
            .map_err(|message| ExecError::Inference {
                node: n.node.id.clone(),
                message,
            })?;
        model = model.with_constants(constants);
        if let Some(layout) = &spec.sequences {
            let one_per_call =
                stateful::step::fixed_batch_axis(&m.metadata, &spec.state, layout.batch_axis);
            model = model.per_sequence(layout.clone(), one_per_call);
        }
        handle.assign_primary(1, LOCAL_PRIMARY.to_string());
        Arc::new(LocalStatefulTransport::start(&n.node.id, model))
    } else {
        shared
            .remotes
            .and_then(RemoteReplicaSource::stateful_transport)
            .ok_or_else(|| ExecError::Unavailable {
                node: n.node.id.clone(),
                message: "a stateful node on executors needs a process with a zenoh session (weir serve/run with executors)".into(),
            })?
    };
    Ok((handle, transport))
}

/// The primary name of a stateful node run in this process.
pub const LOCAL_PRIMARY: &str = "local";

#[cfg(test)]
mod tests {
    use super::scheduler_options;
    use weir_engine::parallelism::AutoParallelism;
    use weir_serf::config::Config;
    use weir_serf::profile::Profile;
    use weir_serf::scheduler::SchedulerOptions;

    /// The YAML's `max_utilisation` reaches the scheduler as the one cap of every configuration;
    /// without it the default caps hold (earned and unproven), and nothing else moves either way.
    #[test]
    fn the_yaml_utilisation_cap_reaches_the_scheduler() {
        let auto = |max_utilisation| AutoParallelism {
            profile_path: "m.serf.json".into(),
            profile: Profile::from_rates(2, &[(1, vec![4.0, 3.5]), (2, vec![5.0])]).unwrap(),
            initial: Config::new(2, 1),
            max_utilisation,
        };
        let defaults = SchedulerOptions::default();
        let capped = scheduler_options(&auto(Some(0.6)));
        assert_eq!(capped.max_utilisation, 0.6);
        assert_eq!(capped.unproven_utilisation, None);
        assert_eq!(capped.utilisation_band, defaults.utilisation_band);
        assert_eq!(capped.window, defaults.window);
        assert_eq!(scheduler_options(&auto(None)), defaults);
    }
}
