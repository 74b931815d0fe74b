//! `/metrics` of a graph's `parallelism: auto` nodes (SERF): the configuration in force, switches,
//! the arrival-rate estimate, the online re-profiling (re-evaluations, ranking changes,
//! explorations, measured rates per tuple), and each configuration's standing at the planned load
//! (predicted latency, utilisation, cap), read from each executor's [`ParallelismSnapshot`].

use std::fmt;

use prometheus_client::encoding::DescriptorEncoder;
use weir_engine::metrics::{self as m, counter, gauge, node_labels, per_node, Value};
use weir_serf::scheduler::Standing;

use super::{ParallelismSnapshot, ServiceRate};

/// Whether a family counts or measures.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
}

/// A per-node family: name, kind, help, and how to read it from a snapshot.
type NodeSeries = (
    &'static str,
    Kind,
    &'static str,
    fn(&ParallelismSnapshot) -> Value,
);

const PER_NODE: [NodeSeries; 11] = [
    (
        m::PARALLELISM_CONCURRENCY,
        Kind::Gauge,
        "Requests the executor runs at once now (SERF).",
        |p| p.concurrency.into(),
    ),
    (
        m::PARALLELISM_THREADS,
        Kind::Gauge,
        "Intra-op threads of each new request now (SERF).",
        |p| p.threads.into(),
    ),
    (
        m::PARALLELISM_SWITCHES_TOTAL,
        Kind::Counter,
        "Parallelism configuration switches applied.",
        |p| p.switches.into(),
    ),
    (
        m::ARRIVAL_RATE_ESTIMATE,
        Kind::Gauge,
        "The SERF scheduler's arrival-rate estimate, requests per second.",
        |p| p.arrival_rate.into(),
    ),
    (
        m::SERF_PROFILE_UPDATES_TOTAL,
        Kind::Counter,
        "Re-evaluations of the configurations with measured service rates (SERF).",
        |p| p.profile_updates.into(),
    ),
    (
        m::SERF_RANKING_CHANGES_TOTAL,
        Kind::Counter,
        "Re-evaluations that changed the configurations' ranking (SERF).",
        |p| p.ranking_changes.into(),
    ),
    (
        m::SERF_EXPLORATIONS_TOTAL,
        Kind::Counter,
        "Explorations of configurations without fresh measurements (SERF).",
        |p| p.explorations.into(),
    ),
    (
        m::SERF_BACKLOG_SWITCHES_TOTAL,
        Kind::Counter,
        "Switches away from a configuration whose queue kept growing (SERF's backlog guard).",
        |p| p.backlog_switches.into(),
    ),
    (
        m::SERF_WAITING,
        Kind::Gauge,
        "Requests waiting in front of the sessions at the last SERF control tick.",
        |p| p.waiting.into(),
    ),
    (
        m::SERF_SERVICE_SAMPLES_DROPPED_TOTAL,
        Kind::Counter,
        "Service times dropped because the SERF control thread fell behind.",
        |p| p.samples_dropped.into(),
    ),
    (
        m::SERF_SERVICE_SAMPLES_SETTLING_TOTAL,
        Kind::Counter,
        "Service times left out because their call began while a switch settled (SERF).",
        |p| p.samples_settling.into(),
    ),
];

/// A per-configuration family: name, help, and how to read it from a standing (`None`: no sample).
type ConfigSeries = (&'static str, &'static str, fn(&Standing) -> Option<f64>);

const PER_CONFIG: [ConfigSeries; 3] = [
    (
        m::SERF_PREDICTED_LATENCY,
        "Mean latency SERF predicted for the configuration at its last planned load, seconds.",
        |s| s.estimate.map(|e| e.latency),
    ),
    (
        m::SERF_PREDICTED_UTILISATION,
        "SERF's planned load over the configuration's capacity.",
        |s| Some(s.utilisation),
    ),
    (
        m::SERF_UTILISATION_CAP,
        "SERF's utilisation cap of the configuration now (another than the running one enters only below the cap's dead band).",
        |s| Some(s.cap),
    ),
];

/// Writes the SERF families of every graph in `graphs` (graph, its (node, snapshot) list); nothing
/// without `parallelism: auto` nodes.
///
/// # Errors
/// When writing fails.
pub fn encode(
    encoder: &mut DescriptorEncoder,
    graphs: &[(&str, Vec<(String, ParallelismSnapshot)>)],
) -> fmt::Result {
    let nodes = per_node(graphs);
    if nodes.is_empty() {
        return Ok(());
    }
    for (name, kind, help, value) in PER_NODE {
        let series = nodes
            .iter()
            .map(|(graph, node, p)| (node_labels(graph, node), value(p)));
        match kind {
            Kind::Counter => counter(encoder, name, help, series)?,
            Kind::Gauge => gauge(encoder, name, help, series)?,
        }
    }
    // Per tuple (running requests × intra-op threads).
    let rates = || {
        nodes.iter().flat_map(|(graph, node, p)| {
            p.service_rates.iter().map(move |r: &ServiceRate| {
                let labels = (
                    node_labels(graph, node),
                    [("running", r.running), ("threads", r.threads)],
                );
                (labels, r)
            })
        })
    };
    counter(
        encoder,
        m::SERF_SERVICE_SAMPLES_TOTAL,
        "Service times measured per tuple (running requests × intra-op threads) (SERF).",
        rates().map(|(labels, r)| (labels, r.samples)),
    )?;
    gauge(
        encoder,
        m::SERF_MEASURED_SERVICE_RATE,
        "Measured service rate per request of a tuple, requests per second, once it overrides the offline profile (SERF).",
        rates().filter_map(|(labels, r)| r.measured.map(|v| (labels, v))),
    )?;
    // Per configuration (concurrency × intra-op threads).
    for (name, help, value) in PER_CONFIG {
        gauge(
            encoder,
            name,
            help,
            nodes.iter().flat_map(|(graph, node, p)| {
                p.standings.iter().filter_map(move |s| {
                    let labels = (
                        node_labels(graph, node),
                        [
                            ("concurrency", s.config.concurrency),
                            ("threads", s.config.threads),
                        ],
                    );
                    value(s).map(|v| (labels, v))
                })
            }),
        )?;
    }
    Ok(())
}
