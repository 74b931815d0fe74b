//! `ValidGraph → Plan`: the graph as it will run, with lineage ids and what each node becomes.
//!
//! Validation proves a spec can run; planning decides how, and cannot fail. It resolves each model
//! node's replica set into local and remote executors (`placement.rs`), its parity coding into an
//! encoder, parity model nodes and a decoder (`parity.rs`), its SERF parallelism into the executor
//! configuration it starts in (`parallelism.rs`), its padded batching into axes (`padding.rs`), its routing over the replicas (`routing.rs`) and,
//! for a HAMS stateful node, its state layout and replication (`stateful.rs`); it resolves the
//! graph's streaming connectors (`streams.rs`) and numbers the nodes for lineage. Last, chains of
//! element-wise pre-processing (`cast → transpose → normalize`) whose intermediate tensors
//! nothing else reads become one node (`fusion.rs`), keeping the lineage ids of the rest. Every mechanism
//! is decided here, never in the compiler, which only wires what the plan says.
//!
//! Planning is pure and deterministic, so its text and DOT forms ([`Plan::describe`],
//! [`Plan::dot`]) can be golden-tested and printed by `weir validate`. A node becomes one stage,
//! preceded by a join when it reads from more than one producer.

mod describe;
mod fusion;
mod node;
mod padding;
mod parallelism;
mod parity;
mod placement;
mod routing;
mod stateful;
mod streams;

pub use node::{GatherColumn, GatherPlan, ModelNode, NodeKind, ValidNode};
pub use padding::PadPlan;
pub use parity::{
    parity_node_id, ParityDecodeStage, ParityEncodeStage, ParityModelNode, ParityPlan,
};

use crate::lineage::INGRESS;
use crate::stream::StreamConnector;
use crate::validate::{GraphInput, GraphOutput, Producer, ValidGraph};

/// A node as it will run.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedNode {
    /// Its id in lineage entries (`1..`; `0` is the ingress).
    pub lineage_id: u32,
    /// The node, resolved.
    pub node: ValidNode,
    /// Lineage ids of the distinct producers it reads from.
    pub producer_ids: Vec<u32>,
}

impl PlannedNode {
    /// Whether a join by request id runs in front of this node.
    pub fn needs_join(&self) -> bool {
        self.producer_ids.len() > 1
    }

    /// Whether the node fans out: each request's output rows are split into one row per part.
    pub fn fans_out(&self) -> bool {
        matches!(&self.node.kind, NodeKind::Op(op) if op.fans_out())
    }
}

/// The graph as it will run.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Graph name.
    pub name: String,
    /// Inputs, in the order request tensors are laid out.
    pub inputs: Vec<GraphInput>,
    /// Nodes in topological order.
    pub nodes: Vec<PlannedNode>,
    /// Outputs.
    pub outputs: Vec<GraphOutput>,
    /// Streaming connectors to run besides any HTTP server.
    pub streams: Vec<StreamConnector>,
}

/// Lineage id of a producer.
pub fn lineage_id(p: Producer) -> u32 {
    match p {
        Producer::Ingress => INGRESS,
        Producer::Node(i) => i as u32 + 1,
    }
}

/// Plans a validated graph.
pub fn plan(valid: &ValidGraph<'_>) -> Plan {
    let executors = placement::executors(valid.spec);
    let nodes: Vec<PlannedNode> = valid
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| PlannedNode {
            lineage_id: i as u32 + 1,
            node: node::resolve(n, valid.base_dir, &executors),
            producer_ids: n.producers().into_iter().map(lineage_id).collect(),
        })
        .collect();
    Plan {
        name: valid.spec.name.value.clone(),
        inputs: valid.inputs.clone(),
        nodes: fusion::fuse(nodes, &valid.outputs),
        outputs: valid.outputs.clone(),
        streams: streams::connectors(valid.spec, valid.base_dir),
    }
}

impl Plan {
    /// The node or `ingress` that lineage id `id` names.
    pub fn producer_name(&self, id: u32) -> &str {
        if id == INGRESS {
            "ingress"
        } else {
            // Fusion removes nodes, so a lineage id is not an index.
            self.nodes
                .iter()
                .find(|n| n.lineage_id == id)
                .map_or("?", |n| n.node.id.as_str())
        }
    }

    /// Lineage ids of the distinct producers of the graph outputs.
    pub fn output_producer_ids(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = self
            .outputs
            .iter()
            .map(|o| lineage_id(o.producer))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

#[cfg(test)]
mod tests;
