//! `Plan → timely dataflow`: one operator per node, wired by the plan's edges.
//!
//! The compiler knows the graph's structure, not what nodes do: it asks a [`NodeFactory`] (the
//! `weir-operators` crate) to build each node's operator, and places the structural operators of
//! [`crate::dataflow`] itself: the ingress, a join in front of every fan-in node and of the egress
//! when outputs come from several nodes, the split behind a fan-out node and every gather, and the
//! egress. Every node stream is cloned for each reader (timely streams fan out by themselves).
//! Errors of every node flow to the egress.
//!
//! A parity-coded model node (ParM, §4.1) is the plan's three stages wired as operators: the
//! factory's encoder on the node's input, the deployed model operator on the encoder's tagged
//! jobs, one model operator per parity model node on that model's parity queries, and the
//! factory's decoder joining the tags, the deployed model's rows and errors and every parity
//! model's outputs into the node's one output and error stream ([`ParityEncoded`],
//! [`ParityJoined`]).

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

    /// The encoder operator of parity-coded model node `node` on its `input`.
    ///
    /// # Errors
    /// When the node cannot run here; by default, a factory builds no parity coding.
    fn parity_encode<'s>(
        &self,
        node: &PlannedNode,
        _input: BatchStream<'s>,
    ) -> Result<ParityEncoded<'s>, CompileError> {
        Err(no_parity(node))
    }

    /// The model operator of parity model `t` of parity-coded node `node`, on its `queries`.
    ///
    /// # Errors
    /// When the node cannot run here; by default, a factory builds no parity coding.
    fn parity_model<'s>(
        &self,
        node: &PlannedNode,
        _t: usize,
        _queries: BatchStream<'s>,
    ) -> Result<(BatchStream<'s>, ErrorStream<'s>), CompileError> {
        Err(no_parity(node))
    }

    /// The decoder operator of parity-coded node `node`: the node's output and error streams.
    ///
    /// # Errors
    /// When the node cannot run here; by default, a factory builds no parity coding.
    fn parity_decode<'s>(
        &self,
        node: &PlannedNode,
        _joined: ParityJoined<'s>,
    ) -> Result<(BatchStream<'s>, ErrorStream<'s>), CompileError> {
        Err(no_parity(node))
    }
}

fn no_parity(node: &PlannedNode) -> CompileError {
    CompileError {
        node: node.node.id.clone(),
        message: "this factory builds no parity coding".into(),
    }
}

/// What a parity-coded node's encoder emits.
pub struct ParityEncoded<'s> {
    /// The node's jobs, each tagged with its coding group and position, for the deployed model
    /// operator (at once: encoding never delays dispatch).
    pub data: BatchStream<'s>,
    /// The same tagged jobs, for the decoder, which answers their rows.
    pub tags: BatchStream<'s>,
    /// Parity model `t`'s queries at index `t`, one batch per full coding group.
    pub queries: Vec<BatchStream<'s>>,
    /// Rows the encoder could not take (an input column missing).
    pub errors: ErrorStream<'s>,
}

/// What a parity-coded node's decoder joins by coding group.
pub struct ParityJoined<'s> {
    /// The encoder's tagged jobs.
    pub tags: BatchStream<'s>,
    /// The deployed model operator's rows and errors.
    pub data: (BatchStream<'s>, ErrorStream<'s>),
    /// Parity model `t`'s outputs and errors at index `t`.
    pub parity: Vec<(BatchStream<'s>, ErrorStream<'s>)>,
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
            NodeKind::Model(m) if m.parity.is_some() => {
                let r = m.parity.as_ref().map_or(0, |p| p.r());
                let encoded = factory.parity_encode(node, input)?;
                errors.push(encoded.errors);
                let data = factory.build(node, encoded.data)?;
                let mut parity = Vec::with_capacity(r);
                for (t, queries) in encoded.queries.into_iter().enumerate().take(r) {
                    parity.push(factory.parity_model(node, t, queries)?);
                }
                let joined = ParityJoined {
                    tags: encoded.tags,
                    data,
                    parity,
                };
                factory.parity_decode(node, joined)?
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
