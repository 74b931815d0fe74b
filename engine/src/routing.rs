//! A model node's routing over its replicas (`routing:` in YAML): the rules that check it and what
//! it resolves to. The routing itself runs in `weir-operators` (the replica pool); Kairos's
//! matching and latency models are `weir-kairos`'s.
//!
//! Rules for `routing: {kairos: ...}` (notes/kairos.md §2):
//! - `qos_ms` is a positive number of milliseconds;
//! - every replica is a declared executor (not `local`, which has no instance type) carrying the
//!   labels `instance_type` and `cost_per_hour` (the planner's pool description);
//! - `profiles`, when given, is a readable Kairos latency profile (relative to the graph file's
//!   folder) listing every replica's instance type; its `cost_per_hour` differing from an
//!   executor's label is a warning (the label is the price; the profile only gives latencies).
//!
//! Without `profiles`, latencies are learned online by the pool (batch → latency per instance
//! type, from the node's own completed jobs), so a pool can be routed before anyone profiled it.
//! `round_robin` and `least_outstanding` take no settings; on a node with one in-process replica
//! they change nothing.

use std::path::{Path, PathBuf};

use weir_kairos::profile::ModelProfile;

use crate::diagnostic::{did_you_mean, Diagnostic};
use crate::paths::{read_text, FileRules};
use crate::placement::ReplicaTarget;
use crate::spec::{ModelSpec, RoutingSpec, LOCAL_REPLICA};

/// A model node's routing after validation.
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

/// Kairos routing of one model node, after validation.
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

fn node_field(id: &str, field: &str) -> String {
    format!("nodes.{id}.{field}")
}

/// Checks `m.routing` of node `id`, whose replicas resolved to `replicas` (`None` when the list
/// had errors, reported already). Diagnostics go to `diags`; `None` means an error was reported.
pub fn check_routing(
    id: &str,
    m: &ModelSpec,
    base_dir: &Path,
    files: &FileRules,
    replicas: Option<&[ReplicaTarget]>,
    diags: &mut Vec<Diagnostic>,
) -> Option<Routing> {
    let Some(routing) = &m.routing else {
        return Some(Routing::LeastOutstanding);
    };
    let k = match &routing.value {
        RoutingSpec::LeastOutstanding => return Some(Routing::LeastOutstanding),
        RoutingSpec::RoundRobin => return Some(Routing::RoundRobin),
        RoutingSpec::Kairos(k) => k,
    };
    let errors_before = diags
        .iter()
        .filter(|d| d.severity == crate::diagnostic::Severity::Error)
        .count();
    let qos_ms = k.qos_ms.value;
    if !(qos_ms.is_finite() && qos_ms > 0.0) {
        diags.push(Diagnostic::error(
            node_field(id, "routing.kairos.qos_ms"),
            k.qos_ms.location,
            format!("node `{id}`: kairos `qos_ms` must be a positive number of milliseconds, got {qos_ms}"),
        ));
    }
    let mut types = Vec::new();
    let mut costs = Vec::new();
    match (replicas, &m.replicas) {
        (_, None) => {
            diags.push(
                Diagnostic::error(
                    node_field(id, "routing"),
                    routing.location,
                    format!("node `{id}`: kairos routing needs `replicas:` on executors of different instance types; this node runs on one local replica"),
                )
                .with_help("list executors declared under `executors:` with `labels: {instance_type: ..., cost_per_hour: ...}`"),
            );
        }
        (None, Some(_)) => {} // the replica list has errors of its own
        (Some(targets), Some(list)) => {
            for (target, written) in targets.iter().zip(&list.value) {
                match target {
                    ReplicaTarget::Local => diags.push(
                        Diagnostic::error(
                            node_field(id, "replicas"),
                            written.location,
                            format!("node `{id}`: kairos routing cannot use `{LOCAL_REPLICA}`, which has no instance type or price"),
                        )
                        .with_help("serve the model from a `weir executor` declared under `executors:` with `instance_type` and `cost_per_hour` labels"),
                    ),
                    ReplicaTarget::Remote(e) => {
                        let ty = e.labels.get("instance_type");
                        let cost = e.cost_per_hour();
                        let mut missing = Vec::new();
                        if ty.is_none_or(|t| t.is_empty()) {
                            missing.push("instance_type");
                        }
                        if !e.labels.contains_key("cost_per_hour") {
                            missing.push("cost_per_hour");
                        }
                        if !missing.is_empty() {
                            diags.push(
                                Diagnostic::error(
                                    node_field(id, "routing"),
                                    routing.location,
                                    format!(
                                        "node `{id}`: kairos routing needs labels {} on executor `{}`",
                                        missing.iter().map(|l| format!("`{l}`")).collect::<Vec<_>>().join(" and "),
                                        e.name
                                    ),
                                )
                                .with_help(format!(
                                    "add them under `executors:`, e.g. `labels: {{instance_type: c5.large, cost_per_hour: \"0.085\"}}` on `{}`",
                                    e.name
                                )),
                            );
                        }
                        // An unparsable cost is reported by placement; only collect good ones.
                        if let (Some(t), Some(c)) = (ty, cost) {
                            types.push(t.clone());
                            costs.push(c);
                        }
                    }
                }
            }
        }
    }
    let mut profile = None;
    let mut profile_path = None;
    if let Some(p) = &k.profiles {
        let path = base_dir.join(&p.value);
        let field = node_field(id, "routing.kairos.profiles");
        let parsed = read_text(&path, files)
            .map_err(|e| e.to_string())
            .and_then(|text| ModelProfile::from_yaml(&text).map_err(|e| e.to_string()));
        match parsed {
            Err(e) => diags.push(
                Diagnostic::error(field, p.location, format!("node `{id}`: kairos profiles: {e}"))
                    .with_help("relative paths are relative to the graph file's folder; the format is `weir plan --profiles`'s (see kairos/src/profile)"),
            ),
            Ok(prof) => {
                let mut seen = Vec::new();
                for (ty, cost) in types.iter().zip(&costs) {
                    if seen.contains(ty) {
                        continue;
                    }
                    seen.push(ty.clone());
                    match prof.type_index(ty) {
                        None => {
                            let names = prof.types.iter().map(|t| t.instance.name.as_str());
                            let mut d = Diagnostic::error(
                                field.clone(),
                                p.location,
                                format!("node `{id}`: instance type `{ty}` of a replica is not in the kairos profile {}", path.display()),
                            );
                            d.help = Some(match did_you_mean(ty, names) {
                                Some(s) => format!("did you mean `{s}`?"),
                                None => format!(
                                    "the profile has: {}",
                                    prof.types.iter().map(|t| t.instance.name.as_str()).collect::<Vec<_>>().join(", ")
                                ),
                            });
                            diags.push(d);
                        }
                        Some(t) => {
                            let listed = prof.types[t].instance.cost_per_hour;
                            if (listed - cost).abs() > 1e-9 {
                                diags.push(Diagnostic::warning(
                                    field.clone(),
                                    p.location,
                                    format!("node `{id}`: the kairos profile prices `{ty}` at ${listed}/h, its executors' `cost_per_hour` label at ${cost}/h (the label is used)"),
                                ));
                            }
                        }
                    }
                }
                profile = Some(prof.with_qos_ms(qos_ms));
                profile_path = Some(path);
            }
        }
    }
    let errors_after = diags
        .iter()
        .filter(|d| d.severity == crate::diagnostic::Severity::Error)
        .count();
    (errors_after == errors_before && replicas.is_some()).then_some(Routing::Kairos(
        KairosRouting {
            qos_ms,
            replica_types: types,
            replica_costs: costs,
            profile,
            profile_path,
            batch_queued_jobs: k.batch_queued_jobs,
        },
    ))
}
