//! `/metrics` of a graph's parity-coded nodes: reconstructions by reason (`late`: the prediction
//! was later than its deadline; `failed`: its replica failed), real answers, failures that could
//! not be reconstructed, the fraction of answers reconstructed, and the late deadline now.

use std::fmt;

use prometheus_client::encoding::DescriptorEncoder;
use weir_engine::metrics::{self as m, counter, gauge, node_labels, per_node, Value};

use super::{ParityService, ParityStats};

/// Writes the parity families of every graph in `graphs` (graph, its (node, service) list);
/// nothing without parity-coded nodes.
///
/// # Errors
/// When writing fails.
pub fn encode(
    encoder: &mut DescriptorEncoder,
    graphs: &[(&str, Vec<(String, ParityService)>)],
) -> fmt::Result {
    let nodes = per_node(graphs);
    if nodes.is_empty() {
        return Ok(());
    }
    let stats: Vec<(&str, &str, ParityStats, &ParityService)> = nodes
        .iter()
        .map(|&(g, n, s)| (g, n, s.stats(), s))
        .collect();
    counter(
        encoder,
        m::PARITY_RECONSTRUCTIONS_TOTAL,
        "Jobs answered by reconstruction, by reason: late (later than the decode deadline) or failed (the replica failed).",
        stats.iter().flat_map(|(g, n, s, _)| {
            [("late", s.reconstructed_late), ("failed", s.reconstructed_failed)]
                .map(|(reason, v)| ((node_labels(g, n), [("reason", reason)]), v))
        }),
    )?;
    counter(
        encoder,
        m::PARITY_REAL_ANSWERS_TOTAL,
        "Jobs answered with their real prediction.",
        stats.iter().map(|(g, n, s, _)| (node_labels(g, n), s.real)),
    )?;
    counter(
        encoder,
        m::PARITY_UNRECOVERED_TOTAL,
        "Failed jobs whose coding group could not reconstruct them (answered with their error).",
        stats
            .iter()
            .map(|(g, n, s, _)| (node_labels(g, n), s.unrecovered)),
    )?;
    gauge(
        encoder,
        m::PARITY_RECONSTRUCTED_FRACTION,
        "The fraction of the node's answers that were reconstructed.",
        stats
            .iter()
            .map(|(g, n, s, _)| (node_labels(g, n), Value::Real(s.reconstructed_fraction()))),
    )?;
    gauge(
        encoder,
        m::PARITY_DEADLINE_SECONDS,
        "How long after dispatch a prediction counts as late now (absent under first_available).",
        stats.iter().filter_map(|(g, n, _, svc)| {
            svc.deadline()
                .map(|d| (node_labels(g, n), Value::Real(d.as_secs_f64())))
        }),
    )
}
