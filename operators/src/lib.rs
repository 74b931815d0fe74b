//! weir's node operators: what each node kind does inside the timely dataflow.
//!
//! [`OperatorFactory`] implements the engine's [`NodeFactory`]: it owns the process-wide resources
//! (one ONNX Runtime executor per model node, started before any worker runs so a bad model fails
//! at start-up) and builds each node's operator on every worker. One folder per operator family:
//! [`model`] (ONNX Runtime executors, replica pools), [`parity`] (ParM coding around a model node)
//! and [`tensor`] (inline tensor ops).

#![deny(missing_docs)]
#![warn(clippy::unwrap_used)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod model;
pub mod parity;
pub mod tensor;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use weir_engine::compile::{CompileError, NodeFactory};
use weir_engine::dataflow::{BatchStream, ErrorStream};
use weir_engine::onnx::ElementType;
use weir_engine::plan::{Plan, PlannedNode};
use weir_engine::validate::{NodeKind, RemoteExecutor, ReplicaTarget};

use model::{
    ExecError, ExecutorConfig, InferenceService, LoadSnapshot, LocalReplica, ModelExecutor,
    ModelOperator, OrtRuntime, Replica, ReplicaPool,
};
use tensor::operator::TensorOperator;
use tensor::TensorOp;

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
}

/// Builds node operators for one plan, owning its executors.
pub struct OperatorFactory {
    /// In-process executors, by node id.
    executors: HashMap<String, Arc<ModelExecutor>>,
    /// Replica pools of nodes with more than one replica or a remote one, by node id.
    pools: HashMap<String, ReplicaPool>,
    /// What each model node's operator submits to, by node id.
    services: HashMap<String, Arc<dyn InferenceService>>,
    /// Parity-coded nodes, by node id.
    parity: HashMap<String, parity::ParityService>,
}

impl std::fmt::Debug for OperatorFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OperatorFactory")
            .field("executors", &self.executors.keys().collect::<Vec<_>>())
            .field("pools", &self.pools)
            .finish()
    }
}

fn executor_config(n: &PlannedNode, m: &weir_engine::validate::ModelNode) -> ExecutorConfig {
    ExecutorConfig {
        node: n.node.id.clone(),
        path: m.path.clone(),
        batched: m.batched,
        max_batch: m.batching.max_size,
        max_delay: Duration::from_micros(m.batching.max_delay_us),
        instances: m.executor.instances,
        intra_op_threads: m.executor.intra_op_threads,
        queue_capacity: m.executor.queue_capacity,
        spinning: m.executor.spinning,
        inputs: n.node.inputs.iter().map(|p| p.name.clone()).collect(),
        outputs: m
            .metadata
            .outputs
            .iter()
            .filter_map(|o| match o.element {
                ElementType::Supported(d) => Some((o.name.clone(), d)),
                _ => None,
            })
            .collect(),
        timeout: Some(Duration::from_millis(m.executor.timeout_ms.max(1))),
        device: weir_engine::spec::Device::Cpu,
    }
}

impl OperatorFactory {
    /// Starts an executor for every model node of `plan`, all in this process.
    ///
    /// # Errors
    /// When ONNX Runtime is missing, a model's session cannot be created, or a node names a
    /// remote replica (use [`OperatorFactory::start_with_remotes`]).
    pub fn start(plan: &Plan) -> Result<OperatorFactory, ExecError> {
        OperatorFactory::start_with_remotes(plan, None)
    }

    /// Starts every model node's replicas: in-process executors here, remote ones through
    /// `remotes`.
    ///
    /// # Errors
    /// When ONNX Runtime is missing, a session cannot be created, or a remote replica cannot be
    /// reached.
    pub fn start_with_remotes(
        plan: &Plan,
        remotes: Option<&dyn RemoteReplicaSource>,
    ) -> Result<OperatorFactory, ExecError> {
        let mut factory = OperatorFactory {
            executors: HashMap::new(),
            pools: HashMap::new(),
            services: HashMap::new(),
            parity: HashMap::new(),
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
            let config = executor_config(n, m);
            let mut replicas: Vec<Arc<dyn Replica>> = Vec::new();
            let mut local = None;
            for target in &m.replicas {
                match target {
                    ReplicaTarget::Local => {
                        let Some(runtime) = &runtime else { continue };
                        let executor = Arc::new(match &m.auto_parallelism {
                            Some(auto) => ModelExecutor::start_auto(
                                runtime,
                                config.clone(),
                                model::AutoOptions {
                                    candidates: weir_serf::table::Candidates::from_profile(
                                        &auto.profile,
                                    ),
                                    initial: auto.initial,
                                    scheduler: weir_serf::scheduler::SchedulerOptions::default(),
                                },
                            )?,
                            None => ModelExecutor::start(runtime, config.clone())?,
                        });
                        factory
                            .executors
                            .insert(n.node.id.clone(), Arc::clone(&executor));
                        replicas.push(Arc::new(LocalReplica::new(Arc::clone(&executor))));
                        local = Some(executor);
                    }
                    ReplicaTarget::Remote(executor) => {
                        let source = remotes.ok_or_else(|| ExecError::Unavailable {
                            node: n.node.id.clone(),
                            message: format!(
                                "replica `{}` is remote, but this process has no remote executor client",
                                executor.name
                            ),
                        })?;
                        replicas.push(source.replica(executor, &config)?);
                    }
                }
            }
            let service: Arc<dyn InferenceService> = match (local, replicas.len()) {
                (Some(executor), 1) => executor,
                _ => {
                    let rows = if config.batched {
                        config.max_batch.max(1)
                    } else {
                        1
                    };
                    let pool = ReplicaPool::with_routing(&n.node.id, replicas, rows, &m.routing)
                        .map_err(|e| ExecError::Unavailable {
                            node: n.node.id.clone(),
                            message: format!("routing: {e}"),
                        })?;
                    factory.pools.insert(n.node.id.clone(), pool.clone());
                    Arc::new(pool)
                }
            };
            let service = match (&m.parity, &runtime) {
                (Some(plan), Some(runtime)) => {
                    // m/k parity instances for m deployed ones (at least one).
                    let parity_config = ExecutorConfig {
                        node: format!("{}.parity", n.node.id),
                        path: plan.path.clone(),
                        instances: config.instances.div_ceil(plan.k).max(1),
                        ..config.clone()
                    };
                    let parity = Arc::new(ModelExecutor::start(runtime, parity_config)?);
                    let encoder = match plan.encoder {
                        weir_engine::spec::ParityEncoder::Sum => parity::Encoder::Sum,
                        weir_engine::spec::ParityEncoder::Concat => parity::Encoder::Concat,
                    };
                    let coded =
                        parity::ParityService::new(&n.node.id, plan.k, encoder, service, parity);
                    factory.parity.insert(n.node.id.clone(), coded.clone());
                    Arc::new(coded) as Arc<dyn InferenceService>
                }
                _ => service,
            };
            factory.services.insert(n.node.id.clone(), service);
        }
        Ok(factory)
    }

    /// Parity-coded nodes (ParM) by node id, sorted.
    pub fn parity_services(&self) -> Vec<(String, parity::ParityService)> {
        let mut v: Vec<_> = self
            .parity
            .iter()
            .map(|(k, p)| (k.clone(), p.clone()))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// Replica pools by node id (nodes with several or remote replicas), sorted.
    pub fn replica_pools(&self) -> Vec<(String, ReplicaPool)> {
        let mut v: Vec<_> = self
            .pools
            .iter()
            .map(|(k, p)| (k.clone(), p.clone()))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// Parallelism gauges of every switchable (`parallelism: auto`) executor, by node id, sorted.
    pub fn parallelism_stats(&self) -> Vec<(String, model::ParallelismSnapshot)> {
        let mut v: Vec<_> = self
            .executors
            .iter()
            .filter_map(|(k, e)| e.parallelism().map(|p| (k.clone(), p)))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// Load counters of every model node's executor, by node id.
    pub fn executor_stats(&self) -> Vec<(String, LoadSnapshot)> {
        let mut v: Vec<_> = self
            .executors
            .iter()
            .map(|(k, e)| (k.clone(), e.stats()))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }
}

impl NodeFactory for OperatorFactory {
    fn build<'s>(
        &self,
        node: &PlannedNode,
        input: BatchStream<'s>,
    ) -> Result<(BatchStream<'s>, ErrorStream<'s>), CompileError> {
        let n = &node.node;
        let input_columns: Vec<String> = n.inputs.iter().map(|p| p.column.clone()).collect();
        let output_columns = n
            .outputs
            .iter()
            .map(|(o, _)| Arc::from(n.column(o).as_str()))
            .collect();
        match TensorOp::from_kind(&n.kind) {
            Some(op) => Ok(TensorOperator {
                node: n.id.clone(),
                lineage_id: node.lineage_id,
                producer_ids: node.producer_ids.clone(),
                input_columns,
                output_columns,
                op,
            }
            .build(input)),
            None => {
                let executor = self.services.get(&n.id).ok_or_else(|| CompileError {
                    node: n.id.clone(),
                    message: "no executor was started for this model node".into(),
                })?;
                Ok(ModelOperator {
                    node: n.id.clone(),
                    lineage_id: node.lineage_id,
                    producer_ids: node.producer_ids.clone(),
                    input_columns,
                    output_columns,
                }
                .build(input, Arc::clone(executor)))
            }
        }
    }
}
