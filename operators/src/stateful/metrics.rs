//! `/metrics` of a graph's stateful nodes (HAMS): per node, its primary's epoch, the highest
//! version durable on a backup, rows recorded until their replies leave and batches not yet
//! durable; per graph, the replies the release gate holds and stale answers dropped.

use std::fmt;
use std::sync::Arc;

use prometheus_client::encoding::DescriptorEncoder;
use weir_engine::dataflow::egress::ReplyTable;
use weir_engine::metrics::{self as m, counter, gauge, node_labels, Value};

use super::{ProxyStatus, StatefulNodeHandle};

/// A per-node gauge: name, help, and how to read it from a proxy's status.
type NodeGauge = (&'static str, &'static str, fn(&ProxyStatus) -> Value);

const PER_NODE: [NodeGauge; 4] = [
    (
        m::HAMS_EPOCH,
        "Epoch of the node's primary (bumped by every promotion).",
        |s| s.epoch.into(),
    ),
    (
        m::HAMS_DURABLE_VERSION,
        "Highest state version applied on a backup.",
        |s| s.durable.into(),
    ),
    (
        m::HAMS_RECORDED_ROWS,
        "Rows whose outputs are kept until their replies leave.",
        |s| s.recorded.into(),
    ),
    (
        m::HAMS_UNDURABLE_BATCHES,
        "Batches sent and not yet durable.",
        |s| s.undurable.into(),
    ),
];

/// One graph's HAMS parts: its name, its stateful nodes and its reply table (the release gate).
pub type GraphState<'a> = (&'a str, Vec<Arc<StatefulNodeHandle>>, &'a ReplyTable);

/// Writes the HAMS families of every graph in `graphs`; graphs without stateful nodes write no
/// series, and nothing is written when no graph has one.
///
/// # Errors
/// When writing fails.
pub fn encode(encoder: &mut DescriptorEncoder, graphs: &[GraphState<'_>]) -> fmt::Result {
    let graphs: Vec<_> = graphs
        .iter()
        .filter(|(_, nodes, _)| !nodes.is_empty())
        .collect();
    if graphs.is_empty() {
        return Ok(());
    }
    let statuses: Vec<_> = graphs
        .iter()
        .flat_map(|(graph, nodes, _)| {
            nodes
                .iter()
                .map(move |h| (*graph, h.node.as_str(), h.status()))
        })
        .collect();
    for (name, help, value) in PER_NODE {
        gauge(
            encoder,
            name,
            help,
            statuses
                .iter()
                .map(|(graph, node, s)| (node_labels(graph, node), value(s))),
        )?;
    }
    gauge(
        encoder,
        m::HAMS_HELD_REPLIES,
        "Replies waiting for the states they depend on to be durable.",
        graphs
            .iter()
            .map(|(graph, _, replies)| ([("graph", *graph)], replies.held())),
    )?;
    counter(
        encoder,
        m::HAMS_STALE_ANSWERS_TOTAL,
        "Answers of superseded request attempts dropped.",
        graphs
            .iter()
            .map(|(graph, _, replies)| ([("graph", *graph)], replies.stale())),
    )
}
