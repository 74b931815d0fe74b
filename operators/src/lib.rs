//! weir's node operators: what each node kind does inside the timely dataflow.
//!
//! [`OperatorFactory`] implements the engine's [`NodeFactory`]: it owns the process-wide resources
//! (one ONNX Runtime executor per model node, started before any worker runs so a bad model fails
//! at start-up) and builds each node's operator on every worker. One folder per operator family:
//! [`model`] (ONNX Runtime executors) and [`tensor`] (inline tensor ops).

#![deny(missing_docs)]
#![warn(clippy::unwrap_used)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod model;
pub mod tensor;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use weir_engine::compile::{CompileError, NodeFactory};
use weir_engine::dataflow::{BatchStream, ErrorStream};
use weir_engine::onnx::ElementType;
use weir_engine::plan::{Plan, PlannedNode};
use weir_engine::validate::NodeKind;

use model::{ExecError, ExecutorConfig, LoadSnapshot, ModelExecutor, ModelOperator, OrtRuntime};
use tensor::operator::TensorOperator;
use tensor::TensorOp;

/// Builds node operators for one plan, owning its executors.
#[derive(Debug)]
pub struct OperatorFactory {
    executors: HashMap<String, Arc<ModelExecutor>>,
}

impl OperatorFactory {
    /// Starts an executor for every model node of `plan`.
    ///
    /// # Errors
    /// When ONNX Runtime is missing or a model's session cannot be created.
    pub fn start(plan: &Plan) -> Result<OperatorFactory, ExecError> {
        let mut executors = HashMap::new();
        let needs_runtime = plan
            .nodes
            .iter()
            .any(|n| matches!(n.node.kind, NodeKind::Model(_)));
        let runtime = if needs_runtime {
            Some(OrtRuntime::get()?)
        } else {
            None
        };
        for n in &plan.nodes {
            let NodeKind::Model(m) = &n.node.kind else {
                continue;
            };
            let Some(runtime) = &runtime else { continue };
            let config = ExecutorConfig {
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
            };
            executors.insert(
                n.node.id.clone(),
                Arc::new(ModelExecutor::start(runtime, config)?),
            );
        }
        Ok(OperatorFactory { executors })
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
                let executor = self.executors.get(&n.id).ok_or_else(|| CompileError {
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
