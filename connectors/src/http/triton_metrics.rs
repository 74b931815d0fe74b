//! Triton's metric names beside weir's own (`weir serve --metrics-compat triton`), so dashboards
//! and alerts built for Triton's `nv_inference_*` families read a weir server unchanged.
//!
//! Each served graph is a Triton model: labels `model` (the graph's name) and `version` (`"1"`,
//! the only version a graph has). The families are counters under Triton's exact names (no
//! `_total` suffix, which weir's own counters carry), written by hand since the encoder weir uses
//! would add one. Values come from counters weir already keeps; where weir has no exact quantity,
//! the closest one is used, as each line below says:
//!
//! | Triton family | filled from |
//! |---|---|
//! | `nv_inference_request_success` | HTTP and gRPC requests answered with outputs (exact) |
//! | `nv_inference_request_failure` | HTTP and gRPC requests refused or failed once their model was known (exact) |
//! | `nv_inference_count` | rows the graph answered (a request of batch n is n), from every front end, failures included; Triton counts successful ones |
//! | `nv_inference_exec_count` | inference calls of the graph's model nodes, summed over the nodes (exact for a one-model graph) |
//! | `nv_inference_request_duration_us` | latency of the requests answered with outputs, summed; Triton also sums failed ones |
//! | `nv_inference_queue_duration_us` | each node's time from a job's queueing to its answer, less its share of the call, summed over nodes |
//! | `nv_inference_compute_infer_duration_us` | each node's time inside its inference calls, each call counted once per job it served (as Triton counts a batch's compute once per request), summed over nodes |
//! | `nv_inference_compute_input_duration_us` | 0: weir times input preparation inside the call, so it is in `compute_infer` |
//! | `nv_inference_compute_output_duration_us` | 0: likewise, output extraction is in `compute_infer` |
//!
//! A job's share of its call is the node's busy time times jobs per call (exact when one job is
//! one call, the batch-size-1 case; under batching it assumes the node's calls took equal time).

use std::fmt::Write;
use std::sync::Arc;
use std::time::Duration;

use weir_engine::metrics::triton as names;
use weir_engine::runtime::GraphRuntime;

use super::metrics::{GraphMetrics, MetricsSource};

/// One model node's executor counters, as the Triton families read them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct NodeTotals {
    /// Inference calls.
    pub runs: u64,
    /// Jobs answered by a call (one per request at the node).
    pub jobs: u64,
    /// Time inside the calls, summed.
    pub busy: Duration,
    /// Time from queueing to answer, summed over jobs.
    pub sojourn: Duration,
}

impl NodeTotals {
    /// The calls' time attributed to the jobs they served (see the module docs).
    fn compute(&self) -> Duration {
        if self.runs == 0 {
            return Duration::ZERO;
        }
        self.busy.mul_f64(self.jobs as f64 / self.runs as f64)
    }

    fn queue(&self) -> Duration {
        self.sojourn.saturating_sub(self.compute())
    }
}

/// The counters of one served graph, read at scrape time.
pub struct TritonModel {
    /// The graph's name (the `model` label).
    pub name: String,
    /// Its request metrics, one per protocol serving it.
    pub requests: Vec<Arc<GraphMetrics>>,
    /// Its runtime (rows answered).
    pub runtime: Arc<GraphRuntime>,
    /// Its model nodes' executor counters now.
    pub nodes: Box<dyn Fn() -> Vec<NodeTotals> + Send + Sync>,
}

/// What one scrape writes for a model.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Values {
    success: u64,
    failure: u64,
    count: u64,
    exec_count: u64,
    request_us: u64,
    queue_us: u64,
    infer_us: u64,
}

impl TritonModel {
    fn values(&self) -> Values {
        let nodes = (self.nodes)();
        let sum = |f: fn(&NodeTotals) -> Duration| nodes.iter().map(f).sum::<Duration>();
        Values {
            success: self
                .requests
                .iter()
                .map(|m| m.count(super::metrics::Outcome::Ok))
                .sum(),
            failure: self.requests.iter().map(|m| m.failed()).sum(),
            count: self.runtime.answered(),
            exec_count: nodes.iter().map(|n| n.runs).sum(),
            request_us: micros(self.requests.iter().map(|m| m.answered_seconds()).sum()),
            queue_us: micros(sum(NodeTotals::queue).as_secs_f64()),
            infer_us: micros(sum(NodeTotals::compute).as_secs_f64()),
        }
    }
}

fn micros(seconds: f64) -> u64 {
    (seconds * 1e6).round() as u64
}

/// The families in Triton's order: name, Triton's help text, value.
type Family = (&'static str, &'static str, fn(&Values) -> u64);

const FAMILIES: [Family; 9] = [
    (
        names::REQUEST_SUCCESS,
        "Number of successful inference requests, all batch sizes",
        |v| v.success,
    ),
    (
        names::REQUEST_FAILURE,
        "Number of failed inference requests, all batch sizes",
        |v| v.failure,
    ),
    (
        names::COUNT,
        "Number of inferences performed (does not include cached requests)",
        |v| v.count,
    ),
    (
        names::EXEC_COUNT,
        "Number of model executions performed (does not include cached requests)",
        |v| v.exec_count,
    ),
    (
        names::REQUEST_DURATION_US,
        "Cumulative inference request duration in microseconds (includes cached requests)",
        |v| v.request_us,
    ),
    (
        names::QUEUE_DURATION_US,
        "Cumulative inference queuing duration in microseconds (includes cached requests)",
        |v| v.queue_us,
    ),
    (
        names::COMPUTE_INPUT_DURATION_US,
        "Cumulative compute input duration in microseconds (does not include cached requests)",
        |_| 0,
    ),
    (
        names::COMPUTE_INFER_DURATION_US,
        "Cumulative compute inference duration in microseconds (does not include cached requests)",
        |v| v.infer_us,
    ),
    (
        names::COMPUTE_OUTPUT_DURATION_US,
        "Cumulative inference compute output duration in microseconds (does not include cached requests)",
        |_| 0,
    ),
];

/// A [`MetricsSource`] writing Triton's families for `models`.
pub fn triton_source(models: Vec<TritonModel>) -> MetricsSource {
    Box::new(move |out| {
        let values: Vec<(&str, Values)> = models
            .iter()
            .map(|m| (m.name.as_str(), m.values()))
            .collect();
        write_families(out, &values);
    })
}

fn write_families(out: &mut String, models: &[(&str, Values)]) {
    for (name, help, value) in FAMILIES {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
        for (model, v) in models {
            let _ = writeln!(
                out,
                "{name}{{model=\"{}\",version=\"1\"}} {}",
                escape(model),
                value(v)
            );
        }
    }
}

/// A label value as the text format writes it.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_per_call_puts_the_rest_of_its_time_in_the_queue() {
        let node = NodeTotals {
            runs: 4,
            jobs: 4,
            busy: Duration::from_millis(40),
            sojourn: Duration::from_millis(100),
        };
        assert_eq!(node.compute(), Duration::from_millis(40));
        assert_eq!(node.queue(), Duration::from_millis(60));
        let batched = NodeTotals {
            runs: 2,
            jobs: 8,
            busy: Duration::from_millis(20),
            sojourn: Duration::from_millis(100),
        };
        assert_eq!(batched.compute(), Duration::from_millis(80));
        assert_eq!(batched.queue(), Duration::from_millis(20));
        assert_eq!(NodeTotals::default().queue(), Duration::ZERO);
    }

    #[test]
    fn families_carry_tritons_names_and_labels() {
        let v = Values {
            success: 5,
            failure: 1,
            count: 6,
            exec_count: 3,
            request_us: 1500,
            queue_us: 200,
            infer_us: 900,
        };
        let mut out = String::new();
        write_families(&mut out, &[("mlp", v), ("a\"b", Values::default())]);
        for line in [
            "# TYPE nv_inference_request_success counter",
            "nv_inference_request_success{model=\"mlp\",version=\"1\"} 5",
            "nv_inference_request_failure{model=\"mlp\",version=\"1\"} 1",
            "nv_inference_count{model=\"mlp\",version=\"1\"} 6",
            "nv_inference_exec_count{model=\"mlp\",version=\"1\"} 3",
            "nv_inference_request_duration_us{model=\"mlp\",version=\"1\"} 1500",
            "nv_inference_queue_duration_us{model=\"mlp\",version=\"1\"} 200",
            "nv_inference_compute_input_duration_us{model=\"mlp\",version=\"1\"} 0",
            "nv_inference_compute_infer_duration_us{model=\"mlp\",version=\"1\"} 900",
            "nv_inference_compute_output_duration_us{model=\"mlp\",version=\"1\"} 0",
            "nv_inference_count{model=\"a\\\"b\",version=\"1\"} 0",
        ] {
            assert!(out.lines().any(|l| l == line), "{line}\n{out}");
        }
        assert_eq!(out.matches("# TYPE").count(), 9, "{out}");
    }
}
