//! `/metrics` of the HTTP server: its own request and connection metrics, then each graph's
//! sources (the executors and the other operator families add theirs through [`MetricsSource`]s,
//! so this module never reaches into them).
//!
//! Request outcomes and latencies are produced here, so they live in `prometheus-client`'s own
//! [`Counter`]s and [`Histogram`]s (fixed buckets), bumped once per request. One collector writes
//! every served graph's series under a single family each (a `graph` label), with the admission
//! gauge the engine keeps and the listener's connection counters, read at scrape time. The gRPC
//! server's requests are the same series under their own names ([`GRPC_FAMILIES`]), written
//! through a [`MetricsSource`] ([`requests_source`]) so one `/metrics` shows both protocols.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use tracing::warn;
use weir_engine::metrics::{
    counter, in_flight, registry_of, Collector, HTTP_CONNECTIONS_ACCEPTED_TOTAL,
    HTTP_CONNECTIONS_CLOSED_TOTAL, HTTP_CONNECTIONS_REFUSED_TOTAL, REQUESTS_TOTAL,
    REQUEST_DURATION_SECONDS,
};

use super::listener::ConnectionCounters;
use crate::models::{ModelTable, Models};

/// Appends Prometheus text lines for one part of the process.
pub type MetricsSource = Box<dyn Fn(&mut String) + Send + Sync>;

/// A [`MetricsSource`] that encodes `collector`'s families on each scrape.
pub fn source(collector: impl Collector) -> MetricsSource {
    let registry = registry_of(collector);
    Box::new(move |out| encode(out, &registry))
}

/// Appends `registry`'s families to `out`; a failure (a collector's own) is logged, and what was
/// written before it stays.
fn encode(out: &mut String, registry: &Registry) {
    if let Err(e) = weir_engine::metrics::encode(out, registry) {
        warn!(error = %e, "Metrics could not be encoded.");
    }
}

/// How a request ended, as a bounded label set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Answered with outputs.
    Ok,
    /// Refused as malformed or invalid.
    InvalidRequest,
    /// Refused at capacity.
    Overloaded,
    /// Refused while draining.
    Unavailable,
    /// A node failed.
    NodeFailed,
    /// The deadline passed first.
    DeadlineExceeded,
}

const OUTCOMES: [Outcome; 6] = [
    Outcome::Ok,
    Outcome::InvalidRequest,
    Outcome::Overloaded,
    Outcome::Unavailable,
    Outcome::NodeFailed,
    Outcome::DeadlineExceeded,
];

impl Outcome {
    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::InvalidRequest => "invalid_request",
            Outcome::Overloaded => "overloaded",
            Outcome::Unavailable => "unavailable",
            Outcome::NodeFailed => "node_failed",
            Outcome::DeadlineExceeded => "deadline_exceeded",
        }
    }
}

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS_S: [f64; 14] = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0,
];

/// Metrics of one served graph.
#[derive(Debug)]
pub struct GraphMetrics {
    outcomes: [Counter; OUTCOMES.len()],
    latency: Histogram,
    /// The latencies the histogram observed, summed in nanoseconds (the histogram keeps its sum
    /// to itself).
    answered_ns: AtomicU64,
}

impl Default for GraphMetrics {
    fn default() -> Self {
        GraphMetrics {
            outcomes: Default::default(),
            latency: Histogram::new(BUCKETS_S),
            answered_ns: AtomicU64::new(0),
        }
    }
}

impl GraphMetrics {
    /// Records one request's outcome and, when answered with outputs, its latency.
    pub fn record(&self, outcome: Outcome, elapsed: Duration) {
        if let Some(i) = OUTCOMES.iter().position(|o| *o == outcome) {
            self.outcomes[i].inc();
        }
        if outcome == Outcome::Ok {
            self.latency.observe(elapsed.as_secs_f64());
            let ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
            self.answered_ns.fetch_add(ns, Ordering::Relaxed);
        }
    }

    /// Requests that ended with `outcome`.
    pub fn count(&self, outcome: Outcome) -> u64 {
        OUTCOMES
            .iter()
            .position(|o| *o == outcome)
            .map(|i| self.outcomes[i].get())
            .unwrap_or(0)
    }

    /// Requests that ended other than [`Outcome::Ok`].
    pub fn failed(&self) -> u64 {
        OUTCOMES
            .iter()
            .filter(|o| **o != Outcome::Ok)
            .map(|o| self.count(*o))
            .sum()
    }

    /// Time taken by the requests answered with outputs, summed, in seconds.
    pub fn answered_seconds(&self) -> f64 {
        Duration::from_nanos(self.answered_ns.load(Ordering::Relaxed)).as_secs_f64()
    }
}

/// Each model's request metrics over one transport, by name: made when the server starts for
/// the models served then, and on its first request for a model loaded later. Entries stay when a
/// model is unloaded, so its counters never go back (a reload continues them); they are bounded
/// by the models a repository holds, since only names that resolved are recorded.
#[derive(Debug, Default)]
pub struct ModelMetrics {
    by_name: RwLock<BTreeMap<String, Arc<GraphMetrics>>>,
}

impl ModelMetrics {
    /// Metrics for every model of `models`.
    pub fn for_models(models: &Models) -> ModelMetrics {
        ModelMetrics {
            by_name: RwLock::new(
                models
                    .names()
                    .map(|n| (n.to_string(), Arc::default()))
                    .collect(),
            ),
        }
    }

    /// `name`'s metrics, made on first use.
    pub fn of(&self, name: &str) -> Arc<GraphMetrics> {
        if let Some(m) = self
            .by_name
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
        {
            return Arc::clone(m);
        }
        let mut all = self.by_name.write().unwrap_or_else(|p| p.into_inner());
        Arc::clone(all.entry(name.to_string()).or_default())
    }

    /// Every model's metrics, sorted by name.
    pub fn all(&self) -> Vec<(String, Arc<GraphMetrics>)> {
        self.by_name
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(n, m)| (n.clone(), Arc::clone(m)))
            .collect()
    }
}

/// The server's `/metrics`: its own families (one registry, built once), then the sources.
pub(super) struct ServerMetrics {
    registry: Registry,
    sources: Vec<MetricsSource>,
}

impl ServerMetrics {
    /// Request metrics of `graphs` with the admission of `models`, and `connections`, followed
    /// by `sources`.
    pub(super) fn new(
        models: Arc<ModelTable>,
        graphs: Arc<ModelMetrics>,
        connections: Arc<ConnectionCounters>,
        sources: Vec<MetricsSource>,
    ) -> Self {
        let registry = registry_of(RequestMetrics {
            models,
            graphs,
            connections,
        });
        ServerMetrics { registry, sources }
    }

    /// Appends `sources` after those already written.
    pub(super) fn extend(&mut self, sources: Vec<MetricsSource>) {
        self.sources.extend(sources);
    }

    /// Every family, in Prometheus text format.
    pub(super) fn render(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry);
        for source in &self.sources {
            source(&mut out);
        }
        out
    }
}

/// Requests, latencies and admission of every served graph, and the listener's connections.
#[derive(Debug)]
struct RequestMetrics {
    models: Arc<ModelTable>,
    graphs: Arc<ModelMetrics>,
    connections: Arc<ConnectionCounters>,
}

impl Collector for RequestMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let graphs = self.graphs.all();
        encode_graphs(
            &mut encoder,
            HTTP_FAMILIES,
            graphs.iter().map(|(g, m)| (g.as_str(), &**m)),
        )?;
        // The version an unversioned request reaches, of each model served now.
        let models = self.models.snapshot();
        in_flight(
            &mut encoder,
            models.names().filter_map(|name| {
                let latest = models.resolve(name, None).ok()?;
                Some((name, latest.runtime.in_flight()))
            }),
        )?;
        let c = &self.connections;
        encode_connections(
            &mut encoder,
            [&c.accepted, &c.closed, &c.refused].map(|n| n.load(Ordering::Relaxed)),
        )
    }
}

/// The names of one protocol's request families: requests by outcome, and latency.
type Families = (&'static str, &'static str);

/// HTTP's request families (the first weir served, so they carry no protocol in their name).
const HTTP_FAMILIES: Families = (REQUESTS_TOTAL, REQUEST_DURATION_SECONDS);

/// gRPC's request families: the same series as HTTP's, named for the protocol.
pub const GRPC_FAMILIES: Families = (
    "weir_grpc_requests_total",
    "weir_grpc_request_duration_seconds",
);

/// A [`MetricsSource`] writing the request metrics of `graphs` (name, metrics) under
/// `families`: how a second protocol's server shows its requests beside HTTP's.
pub fn requests_source(families: Families, graphs: Arc<ModelMetrics>) -> MetricsSource {
    source(ProtocolRequests { families, graphs })
}

#[derive(Debug)]
struct ProtocolRequests {
    families: Families,
    graphs: Arc<ModelMetrics>,
}

impl Collector for ProtocolRequests {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let graphs = self.graphs.all();
        encode_graphs(
            &mut encoder,
            self.families,
            graphs.iter().map(|(g, m)| (g.as_str(), &**m)),
        )
    }
}

/// Writes the request metrics of every graph (name, metrics) under `families`.
fn encode_graphs<'a>(
    encoder: &mut DescriptorEncoder,
    (requests_total, duration_seconds): Families,
    graphs: impl Iterator<Item = (&'a str, &'a GraphMetrics)> + Clone,
) -> fmt::Result {
    counter(
        encoder,
        requests_total,
        "Requests answered, by graph and outcome.",
        graphs.clone().flat_map(|(graph, m)| {
            OUTCOMES
                .iter()
                .zip(&m.outcomes)
                .map(move |(o, n)| ([("graph", graph), ("outcome", o.label())], n.get()))
        }),
    )?;
    let mut latency = encoder.encode_descriptor(
        duration_seconds,
        "Time from receiving a request to answering it with outputs.",
        None,
        MetricType::Histogram,
    )?;
    for (graph, m) in graphs {
        m.latency
            .encode(latency.encode_family(&[("graph", graph)])?)?;
    }
    Ok(())
}

/// Writes the HTTP listener's connection counters: accepted, closed, refused.
fn encode_connections(
    encoder: &mut DescriptorEncoder,
    [accepted, closed, refused]: [u64; 3],
) -> fmt::Result {
    const NO_LABELS: [(&str, &str); 0] = [];
    for (name, help, value) in [
        (
            HTTP_CONNECTIONS_ACCEPTED_TOTAL,
            "HTTP connections accepted and served.",
            accepted,
        ),
        (
            HTTP_CONNECTIONS_CLOSED_TOTAL,
            "HTTP connections served and since closed.",
            closed,
        ),
        (
            HTTP_CONNECTIONS_REFUSED_TOTAL,
            "HTTP connections refused at the connection limit.",
            refused,
        ),
    ] {
        counter(encoder, name, help, [(NO_LABELS, value)])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One graph's request metrics and fixed connection counts, as the server writes them.
    #[derive(Debug)]
    struct Fixed(GraphMetrics, usize, [u64; 3]);

    impl Collector for Fixed {
        fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
            encode_graphs(&mut encoder, HTTP_FAMILIES, [("g", &self.0)].into_iter())?;
            in_flight(&mut encoder, [("g", self.1)])?;
            encode_connections(&mut encoder, self.2)
        }
    }

    fn rendered(fixed: Fixed) -> String {
        let mut s = String::new();
        source(fixed)(&mut s);
        s
    }

    #[test]
    fn histogram_is_cumulative_and_counts_only_answers() {
        let m = GraphMetrics::default();
        m.record(Outcome::Ok, Duration::from_micros(700));
        m.record(Outcome::Ok, Duration::from_millis(30));
        m.record(Outcome::InvalidRequest, Duration::ZERO);
        let s = rendered(Fixed(m, 3, [0; 3]));
        assert!(
            s.contains("weir_requests_total{graph=\"g\",outcome=\"ok\"} 2"),
            "{s}"
        );
        assert!(
            s.contains("weir_requests_total{graph=\"g\",outcome=\"invalid_request\"} 1"),
            "{s}"
        );
        assert!(
            s.contains("weir_request_duration_seconds_bucket{graph=\"g\",le=\"0.001\"} 1"),
            "{s}"
        );
        assert!(
            s.contains("weir_request_duration_seconds_bucket{graph=\"g\",le=\"0.05\"} 2"),
            "{s}"
        );
        assert!(
            s.contains("weir_request_duration_seconds_count{graph=\"g\"} 2"),
            "{s}"
        );
        assert!(s.contains("weir_graph_in_flight{graph=\"g\"} 3"), "{s}");
    }

    #[test]
    fn grpc_requests_are_their_own_series() {
        let models = Arc::new(ModelMetrics::default());
        let m = models.of("g");
        m.record(Outcome::Ok, Duration::from_micros(700));
        m.record(Outcome::Overloaded, Duration::ZERO);
        assert!(Arc::ptr_eq(&m, &models.of("g")));
        let mut s = String::new();
        requests_source(GRPC_FAMILIES, models)(&mut s);
        assert!(
            s.contains("# TYPE weir_grpc_requests_total counter\n"),
            "{s}"
        );
        assert!(
            s.contains("weir_grpc_requests_total{graph=\"g\",outcome=\"overloaded\"} 1"),
            "{s}"
        );
        assert!(
            s.contains("weir_grpc_request_duration_seconds_count{graph=\"g\"} 1"),
            "{s}"
        );
        assert!(!s.contains("weir_requests_total"), "{s}");
    }

    #[test]
    fn every_family_keeps_its_name_type_and_help() {
        let s = rendered(Fixed(GraphMetrics::default(), 0, [5, 4, 1]));
        for (name, kind) in [
            ("weir_requests_total", "counter"),
            ("weir_request_duration_seconds", "histogram"),
            ("weir_graph_in_flight", "gauge"),
            ("weir_http_connections_accepted_total", "counter"),
        ] {
            assert!(s.contains(&format!("# TYPE {name} {kind}\n")), "{s}");
        }
        assert!(
            s.contains("# HELP weir_http_connections_refused_total HTTP connections refused at the connection limit.\n"),
            "{s}"
        );
        assert!(
            s.contains("\nweir_http_connections_accepted_total 5\n"),
            "{s}"
        );
        assert!(
            s.contains("weir_request_duration_seconds_bucket{graph=\"g\",le=\"+Inf\"} 0"),
            "{s}"
        );
        assert!(
            s.contains("weir_requests_total{graph=\"g\",outcome=\"deadline_exceeded\"} 0"),
            "{s}"
        );
    }
}
