//! A model node's routing over its replicas (`routing:` in YAML), as planned. The routing itself
//! runs in `weir-operators` (the replica pool); Kairos's matching and latency models are
//! `weir-kairos`'s, after "KAIROS: Building Cost-Efficient Machine Learning Inference Systems with
//! Heterogeneous Cloud Resources" (Kairos, §5.1). The rules `routing:` must meet are checked by
//! [`crate::validate`].
//!
//! Under Kairos without a latency profile, latencies are learned online by the pool (batch →
//! latency per instance type, from the node's own completed jobs), so a pool can be routed before
//! anyone profiled it. `round_robin` and `least_outstanding` take no settings; on a node with one
//! in-process replica they change nothing.

use std::path::PathBuf;

use weir_kairos::profile::ModelProfile;

/// A model node's routing, as planned.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Routing {
    /// Least outstanding among the live replicas (the default).
    #[default]
    LeastOutstanding,
    /// Each job to the next live replica in turn.
    RoundRobin,
    /// Kairos min-cost distribution over a heterogeneous pool.
    Kairos(KairosRouting),
}

impl Routing {
    /// The YAML name of the policy (`least_outstanding`, `round_robin`, `kairos`).
    pub fn name(&self) -> &'static str {
        match self {
            Routing::LeastOutstanding => "least_outstanding",
            Routing::RoundRobin => "round_robin",
            Routing::Kairos(_) => "kairos",
        }
    }
}

/// Kairos routing of one model node, as planned.
#[derive(Debug, Clone, PartialEq)]
pub struct KairosRouting {
    /// p99 target of the node (queue + service), in ms.
    pub qos_ms: f64,
    /// Each replica's instance type (its executor's `instance_type` label), in replica order.
    pub replica_types: Vec<String>,
    /// Each replica's price per hour (its `cost_per_hour` label), in replica order.
    pub replica_costs: Vec<f64>,
    /// The latency profile given by `profiles:` (with `qos_ms` as its target), or `None` to learn
    /// latencies online.
    pub profile: Option<ModelProfile>,
    /// The file `profile` was read from.
    pub profile_path: Option<PathBuf>,
    /// Whether an idle replica may take several queued jobs in one call (YAML
    /// `batch_queued_jobs`, default true).
    pub batch_queued_jobs: bool,
}
