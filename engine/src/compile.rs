//! `Plan → timely dataflow`: one operator per node, wired by the plan's edges.
//!
//! The compiler knows the graph's structure, not what nodes do: it asks a [`NodeFactory`] (the
//! `weir-operators` crate) to build each node's operator, and places the structural operators of
//! [`crate::dataflow`] itself: the ingress, a join in front of every fan-in node and of the egress
//! when outputs come from several nodes, the split behind a fan-out node and every gather, and the
//! egress. Every node stream is cloned for each reader (timely streams fan out by themselves).
//! Errors of every node flow to the egress.

use std::collections::HashMap;
use std::sync::Arc;

use timely::dataflow::operators::Concatenate;
use timely::dataflow::Scope;

use crate::dataflow::egress::{egress, ReplyTable};
use crate::dataflow::exchange::{
    origin_worker, route_errors, route_rows, spread_worker, ClusterTraces,
};
use crate::dataflow::fanout::{gather_parts, split_parts, GatherNode};
use crate::dataflow::gather_stats::GatherStats;
use crate::dataflow::join::join_by_request;
use crate::dataflow::{BatchStream, ErrorStream};
use crate::lineage::INGRESS;
use crate::plan::{NodeKind, Plan, PlannedNode};

/// Errors building a node's operator (the environment, never the spec).
#[derive(Debug, thiserror::Error)]
#[error("node `{node}`: {message}")]
pub struct CompileError {
    /// The node.
    pub node: String,
    /// What went wrong.
    pub message: String,
}

/// Builds node operators. Implemented by `weir-operators`; shared by every worker of a process.
pub trait NodeFactory: Send + Sync + 'static {
    /// Builds the operator for `node` reading `input`; returns its output and error streams.
    ///
    /// # Errors
    /// When the node cannot run here (its executor is missing, say).
    fn build<'s>(
        &self,
        node: &PlannedNode,
        input: BatchStream<'s>,
    ) -> Result<(BatchStream<'s>, ErrorStream<'s>), CompileError>;

    /// The counters of gather node `node`, shared by its operator on every worker (the
    /// compiler builds gathers itself; a factory that keeps them for the status board returns
    /// the same counters to every worker). By default, fresh counters nobody reads.
    fn gather_counters(&self, _node: &str) -> Arc<GatherStats> {
        Arc::default()
    }
}

/// Compiles `plan` into `scope`, reading requests from `ingress` and answering through `replies`.
///
/// # Errors
/// The first [`CompileError`] a node factory returns.
///
/// On a cluster (`threads_per_process` given), the ingress's rows are spread over every worker of
/// every process by request id, and the final rows and errors go back to the process each request
/// entered at, whose reply table answers it.
pub fn compile<'s>(
    plan: &Plan,
    scope: Scope<'s, u64>,
    ingress: BatchStream<'s>,
    factory: &dyn NodeFactory,
    replies: Arc<ReplyTable>,
    threads_per_process: Option<usize>,
) -> Result<(), CompileError> {
    let peers = scope.peers() as u64;
    let traces = threads_per_process.map(|threads| ClusterTraces {
        log: Arc::clone(replies.requests()),
        process: (scope.index() / threads.max(1)) as u64,
    });
    let ingress = match &traces {
        Some(t) => route_rows(
            ingress,
            "ingress",
            move |id| spread_worker(id, peers),
            Some(t.clone()),
        ),
        None => ingress,
    };
    let mut streams: HashMap<u32, BatchStream<'s>> = HashMap::new();
    streams.insert(INGRESS, ingress);
    let mut errors: Vec<ErrorStream<'s>> = Vec::new();
    let upstream = |streams: &HashMap<u32, BatchStream<'s>>, ids: &[u32], name: &str| {
        let inputs: Vec<BatchStream<'s>> = ids
            .iter()
            .filter_map(|id| streams.get(id).cloned())
            .collect();
        if inputs.len() == 1 {
            inputs.into_iter().next()
        } else if inputs.len() == ids.len() {
            Some(join_by_request(scope, name, inputs))
        } else {
            None
        }
    };
    // Per fan-out node, the parents its split sends to the gathers that close it.
    let mut parents: HashMap<u32, BatchStream<'s>> = HashMap::new();
    for node in &plan.nodes {
        let missing = |what: &str| CompileError {
            node: node.node.id.clone(),
            message: format!("{what} has no stream (plan out of topological order)"),
        };
        let input = upstream(&streams, &node.producer_ids, &node.node.id)
            .ok_or_else(|| missing("a producer"))?;
        let (out, err) = match &node.node.kind {
            NodeKind::Gather(g) => {
                let fanout_parents = parents
                    .get(&g.fanout)
                    .cloned()
                    .ok_or_else(|| missing("its fan-out"))?;
                let gather = GatherNode {
                    node: node.node.id.clone(),
                    lineage_id: node.lineage_id,
                    producer_ids: node.producer_ids.clone(),
                    plan: g.clone(),
                    stats: factory.gather_counters(&node.node.id),
                };
                gather_parts(scope, gather, fanout_parents, input)
            }
            _ => factory.build(node, input)?,
        };
        errors.push(err);
        let out = if node.fans_out() {
            let (parts, node_parents, split_errors) =
                split_parts(out, &node.node.id, node.lineage_id);
            parents.insert(node.lineage_id, node_parents);
            errors.push(split_errors);
            parts
        } else {
            out
        };
        streams.insert(node.lineage_id, out);
    }
    let final_stream =
        upstream(&streams, &plan.output_producer_ids(), "egress").ok_or_else(|| CompileError {
            node: "egress".into(),
            message: "an output producer has no stream".into(),
        })?;
    let mut errors = scope.concatenate(errors);
    let mut final_stream = final_stream;
    if let (Some(threads), Some(traces)) = (threads_per_process, traces) {
        let threads = threads as u64;
        final_stream = route_rows(
            final_stream,
            "egress",
            move |id| origin_worker(id, threads),
            Some(traces.clone()),
        );
        errors = route_errors(errors, move |id| origin_worker(id, threads), traces);
    }
    egress(final_stream, errors, plan.outputs.clone(), replies);
    Ok(())
}
