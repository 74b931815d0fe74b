//! How a model node's jobs are spread over its replicas: `routing:` on a model node.
//!
//! ```yaml
//! routing: least_outstanding   # default: the live replica with the fewest jobs outstanding
//! routing: round_robin         # each job to the next live replica in turn (the plain baseline)
//! routing:                     # Kairos query distribution (Kairos, §5.1): min-cost matching of
//!   kairos:                    # queued jobs to idle replicas of different instance types
//!     qos_ms: 50               # p99 latency target of the node, in milliseconds
//!     profiles: rm2.yaml       # optional: batch → latency per instance type; learned online if absent
//!     batch_queued_jobs: true  # optional, default true: an idle replica may take several queued
//!                              # jobs in one call (weir's addition; false: one job per call, as the paper)
//! ```
//!
//! Only the shape is read here; [`crate::validate`] checks the meaning (replicas with
//! `instance_type` and `cost_per_hour` labels, a profile naming every type, a positive target).

use std::path::PathBuf;

use serde::Deserialize;

use super::Spanned;

/// A model node's routing policy over its replicas.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RoutingSpec {
    /// The live replica with the fewest jobs outstanding, up to each replica's capacity.
    #[default]
    LeastOutstanding,
    /// Each job to the next live replica with room, in turn.
    RoundRobin,
    /// Kairos query distribution: jobs wait in the node's queue, and on every arrival and
    /// completion the queued jobs are matched to *idle* replicas by a min-cost assignment
    /// (cost = η × predicted finish time, pairs that would miss the QoS target penalised).
    Kairos(KairosRoutingSpec),
}

/// Settings of Kairos routing.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KairosRoutingSpec {
    /// The p99 latency target of this node in milliseconds (time in the node's queue plus
    /// service on a replica).
    pub qos_ms: Spanned<f64>,
    /// A Kairos latency profile (YAML: `instance_types` with `latency_ms: {batch: ms}` per type,
    /// the format `weir plan --profiles` reads), relative to the graph file's folder. Every
    /// replica's `instance_type` label must be one of its types. When absent, each type's
    /// batch → latency curve is learned online from the node's own completed jobs.
    #[serde(default)]
    pub profiles: Option<Spanned<PathBuf>>,
    /// Whether a job dispatched to an idle replica takes later queued jobs along in one call when
    /// the batch still meets the QoS target (weir's addition to Kairos, which dispatches one query
    /// per instance at a time; default true). `false` gives the paper's one job per call.
    #[serde(default = "default_batch_queued_jobs")]
    pub batch_queued_jobs: bool,
}

fn default_batch_queued_jobs() -> bool {
    true
}
