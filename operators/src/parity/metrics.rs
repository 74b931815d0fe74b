//! `/metrics` of a graph's parity-coded nodes, one series per stage the plan draws: the encoder
//! (`<node>.parity_encode`: coding groups formed), each parity model node (`<node>.parity`,
//! `<node>.parity1`, ...: its parity jobs by outcome; its executor's load is in the executor
//! families under the same node id) and the decoder (`<node>.parity_decode`: reconstructions by
//! reason — `late`, the prediction was later than its deadline; `failed`, its replica failed —,
//! real answers, late real predictions dropped, failures that could not be reconstructed, the
//! fraction of answers reconstructed, and the late deadline now).

use std::fmt;

use prometheus_client::encoding::DescriptorEncoder;
use weir_engine::metrics::{self as m, counter, gauge, node_labels, per_node, Value};

use super::{DecoderStats, EncoderStats, ParityNode};

/// Writes the parity families of every graph in `graphs` (graph, its (node, service) list);
/// nothing without parity-coded nodes.
///
/// # Errors
/// When writing fails.
pub fn encode(
    encoder: &mut DescriptorEncoder,
    graphs: &[(&str, Vec<(String, ParityNode)>)],
) -> fmt::Result {
    let nodes = per_node(graphs);
    if nodes.is_empty() {
        return Ok(());
    }
    let stats: Vec<(&str, EncoderStats, DecoderStats, &ParityNode)> = nodes
        .iter()
        .map(|&(g, _, s)| (g, s.encoder().stats(), s.decoder().stats(), s))
        .collect();
    counter(
        encoder,
        m::PARITY_GROUPS_TOTAL,
        "Coding groups the encoder formed.",
        stats
            .iter()
            .map(|(g, e, _, s)| (node_labels(g, s.encoder().id()), e.groups)),
    )?;
    counter(
        encoder,
        m::PARITY_JOBS_TOTAL,
        "Parity queries of a parity model node, by outcome: dispatched, answered, failed.",
        stats.iter().flat_map(|(g, e, _, _)| {
            e.parity_jobs.iter().flat_map(move |(id, j)| {
                [
                    ("dispatched", j.dispatched),
                    ("answered", j.answered),
                    ("failed", j.failed),
                ]
                .map(|(outcome, v)| ((node_labels(g, id), [("outcome", outcome)]), v))
            })
        }),
    )?;
    let decoders: Vec<(&str, &str, &DecoderStats, &ParityNode)> = stats
        .iter()
        .map(|(g, _, d, s)| (*g, s.decoder().id(), d, *s))
        .collect();
    counter(
        encoder,
        m::PARITY_RECONSTRUCTIONS_TOTAL,
        "Jobs answered by reconstruction, by reason: late (later than the decode deadline) or failed (the replica failed).",
        decoders.iter().flat_map(|(g, n, d, _)| {
            [("late", d.reconstructed_late), ("failed", d.reconstructed_failed)]
                .map(|(reason, v)| ((node_labels(g, n), [("reason", reason)]), v))
        }),
    )?;
    counter(
        encoder,
        m::PARITY_REAL_ANSWERS_TOTAL,
        "Jobs answered with their real prediction.",
        decoders
            .iter()
            .map(|(g, n, d, _)| (node_labels(g, n), d.real)),
    )?;
    counter(
        encoder,
        m::PARITY_LATE_REAL_TOTAL,
        "Real predictions that came after their job was reconstructed (dropped).",
        decoders
            .iter()
            .map(|(g, n, d, _)| (node_labels(g, n), d.late_real)),
    )?;
    counter(
        encoder,
        m::PARITY_UNRECOVERED_TOTAL,
        "Failed jobs whose coding group could not reconstruct them (answered with their error).",
        decoders
            .iter()
            .map(|(g, n, d, _)| (node_labels(g, n), d.unrecovered)),
    )?;
    gauge(
        encoder,
        m::PARITY_RECONSTRUCTED_FRACTION,
        "The fraction of the node's answers that were reconstructed.",
        decoders.iter().map(|(g, n, _, s)| {
            (
                node_labels(g, n),
                Value::Real(s.stats().reconstructed_fraction()),
            )
        }),
    )?;
    gauge(
        encoder,
        m::PARITY_DEADLINE_SECONDS,
        "How long after dispatch a prediction counts as late now (absent under first_available).",
        decoders.iter().filter_map(|(g, n, _, s)| {
            s.deadline()
                .map(|d| (node_labels(g, n), Value::Real(d.as_secs_f64())))
        }),
    )
}
