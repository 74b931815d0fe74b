//! Request metrics per served graph, and their Prometheus text rendering.
//!
//! Counters are atomics bumped once per request; the latency histogram has fixed buckets. Other
//! parts of the process (the executors) add their own metrics through [`MetricsSource`]s, so this
//! module never reaches into them.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use weir_engine::metrics::{
    HTTP_CONNECTIONS_ACCEPTED_TOTAL, HTTP_CONNECTIONS_CLOSED_TOTAL, HTTP_CONNECTIONS_REFUSED_TOTAL,
    REQUESTS_TOTAL, REQUEST_DURATION_SECONDS,
};

/// Appends Prometheus text lines for one part of the process.
pub type MetricsSource = Box<dyn Fn(&mut String) + Send + Sync>;

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
#[derive(Debug, Default)]
pub struct GraphMetrics {
    outcomes: [AtomicU64; OUTCOMES.len()],
    buckets: [AtomicU64; BUCKETS_S.len()],
    count: AtomicU64,
    sum_us: AtomicU64,
}

impl GraphMetrics {
    /// Records one request's outcome and, when answered with outputs, its latency.
    pub fn record(&self, outcome: Outcome, elapsed: Duration) {
        if let Some(i) = OUTCOMES.iter().position(|o| *o == outcome) {
            self.outcomes[i].fetch_add(1, Ordering::Relaxed);
        }
        if outcome == Outcome::Ok {
            let s = elapsed.as_secs_f64();
            if let Some(b) = BUCKETS_S.iter().position(|&le| s <= le) {
                self.buckets[b].fetch_add(1, Ordering::Relaxed);
            }
            self.count.fetch_add(1, Ordering::Relaxed);
            self.sum_us
                .fetch_add(elapsed.as_micros() as u64, Ordering::Relaxed);
        }
    }

    /// Requests that ended with `outcome`.
    pub fn count(&self, outcome: Outcome) -> u64 {
        OUTCOMES
            .iter()
            .position(|o| *o == outcome)
            .map(|i| self.outcomes[i].load(Ordering::Relaxed))
            .unwrap_or(0)
    }
}

/// Writes the metrics of every graph, in Prometheus text format.
pub fn render_graphs<'a>(
    out: &mut String,
    graphs: impl Iterator<Item = (&'a str, &'a GraphMetrics, usize)> + Clone,
) {
    let _ = writeln!(out, "# HELP {REQUESTS_TOTAL} Requests answered, by graph and outcome.\n# TYPE {REQUESTS_TOTAL} counter");
    for (graph, m, _) in graphs.clone() {
        for (i, o) in OUTCOMES.iter().enumerate() {
            let _ = writeln!(
                out,
                "{REQUESTS_TOTAL}{{graph=\"{graph}\",outcome=\"{}\"}} {}",
                o.label(),
                m.outcomes[i].load(Ordering::Relaxed)
            );
        }
    }
    let _ = writeln!(out, "# HELP {REQUEST_DURATION_SECONDS} Time from receiving a request to answering it with outputs.\n# TYPE {REQUEST_DURATION_SECONDS} histogram");
    for (graph, m, _) in graphs.clone() {
        let mut cumulative = 0;
        for (i, le) in BUCKETS_S.iter().enumerate() {
            cumulative += m.buckets[i].load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "{REQUEST_DURATION_SECONDS}_bucket{{graph=\"{graph}\",le=\"{le}\"}} {cumulative}"
            );
        }
        let count = m.count.load(Ordering::Relaxed);
        let _ = writeln!(
            out,
            "{REQUEST_DURATION_SECONDS}_bucket{{graph=\"{graph}\",le=\"+Inf\"}} {count}"
        );
        let _ = writeln!(
            out,
            "{REQUEST_DURATION_SECONDS}_sum{{graph=\"{graph}\"}} {}",
            m.sum_us.load(Ordering::Relaxed) as f64 / 1e6
        );
        let _ = writeln!(
            out,
            "{REQUEST_DURATION_SECONDS}_count{{graph=\"{graph}\"}} {count}"
        );
    }
    let _ = writeln!(out, "# HELP weir_graph_in_flight Requests admitted and not yet answered.\n# TYPE weir_graph_in_flight gauge");
    for (graph, _, in_flight) in graphs {
        let _ = writeln!(out, "weir_graph_in_flight{{graph=\"{graph}\"}} {in_flight}");
    }
}

/// Writes the HTTP listener's connection counters.
pub fn render_connections(out: &mut String, accepted: u64, closed: u64, refused: u64) {
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
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_is_cumulative_and_counts_only_answers() {
        let m = GraphMetrics::default();
        m.record(Outcome::Ok, Duration::from_micros(700));
        m.record(Outcome::Ok, Duration::from_millis(30));
        m.record(Outcome::InvalidRequest, Duration::ZERO);
        let mut s = String::new();
        render_graphs(&mut s, [("g", &m, 3usize)].into_iter());
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
}
