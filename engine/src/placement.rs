//! Placement: where each model node's replicas run. Checks the graph's `executors:` section and
//! every model node's `replicas:` list, and resolves them into [`ReplicaTarget`]s.
//!
//! Rules: executor names are unique and well-formed; an endpoint is a zenoh locator
//! (`<protocol>/<address>`); `threads` is at least 1; `cost_per_hour`, when labelled, is a
//! non-negative number; a replica names `local` or a declared executor (with a did-you-mean), at
//! most once per node, and a node lists at least one replica.

use std::collections::{BTreeMap, HashMap};

use crate::diagnostic::{did_you_mean, Diagnostic, Location};
use crate::spec::{Device, GraphSpec, NodeSpec, RemoteExecutorSpec, LOCAL_REPLICA};

/// A remote executor after validation.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteExecutor {
    /// Name (as `weir executor --name` was given).
    pub name: String,
    /// zenoh locator the graph connects to, if given.
    pub endpoint: Option<String>,
    /// Key-expression prefix it serves under.
    pub key_prefix: String,
    /// Device label.
    pub device: Device,
    /// Intra-op threads label.
    pub threads: Option<usize>,
    /// Free labels (`instance_type`, `cost_per_hour`, ...).
    pub labels: BTreeMap<String, String>,
}

impl RemoteExecutor {
    /// The `cost_per_hour` label as a number (validated when present).
    pub fn cost_per_hour(&self) -> Option<f64> {
        self.labels
            .get("cost_per_hour")
            .and_then(|c| c.parse().ok())
    }

    /// The key expression serving `model` on this executor.
    pub fn model_key(&self, model: &str) -> String {
        format!("{}/model/{model}", self.key_prefix)
    }

    /// The liveliness key this executor declares while it serves.
    pub fn alive_key(&self) -> String {
        format!("{}/alive", self.key_prefix)
    }
}

/// Where one replica of a model node runs.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplicaTarget {
    /// An executor inside this process.
    Local,
    /// A remote executor process.
    Remote(RemoteExecutor),
}

impl ReplicaTarget {
    /// The replica's name: `local` or the executor's name.
    pub fn name(&self) -> &str {
        match self {
            ReplicaTarget::Local => LOCAL_REPLICA,
            ReplicaTarget::Remote(r) => &r.name,
        }
    }
}

/// The resolved placement of a graph.
#[derive(Debug, Default)]
pub(crate) struct Placement {
    pub executors: Vec<RemoteExecutor>,
    /// Model node id → its replicas (only for nodes whose list resolved).
    pub replicas: HashMap<String, Vec<ReplicaTarget>>,
}

fn executor_of(spec: &RemoteExecutorSpec) -> RemoteExecutor {
    RemoteExecutor {
        name: spec.name.value.clone(),
        endpoint: spec.endpoint.as_ref().map(|e| e.value.clone()),
        key_prefix: spec.key_prefix(),
        device: spec.device,
        threads: spec.threads,
        labels: spec.labels.clone(),
    }
}

fn valid_executor_name(name: &str) -> bool {
    !name.is_empty()
        && name != LOCAL_REPLICA
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Checks `spec`'s executors and replica lists, pushing errors to `diags`.
pub(crate) fn check_placement(spec: &GraphSpec, diags: &mut Vec<Diagnostic>) -> Placement {
    let mut placement = Placement::default();
    let mut by_name: HashMap<&str, (usize, Location)> = HashMap::new();
    for e in &spec.executors {
        let name = &e.name;
        let path = format!("executors.{}", name.value);
        if !valid_executor_name(name) {
            diags.push(Diagnostic::error(
                format!("{path}.name"),
                name.location,
                format!("executor name `{}` must be letters, digits, `_` and `-`, and not `{LOCAL_REPLICA}` (that name means in-process)", name.value),
            ));
        }
        if let Some((_, first)) = by_name.get(name.value.as_str()) {
            diags.push(Diagnostic::error(
                format!("{path}.name"),
                name.location,
                format!(
                    "duplicate executor name `{}` (first declared at line {})",
                    name.value, first.line
                ),
            ));
            continue;
        }
        if let Some(ep) = &e.endpoint {
            let ok = ep
                .value
                .split_once('/')
                .is_some_and(|(proto, addr)| !proto.is_empty() && !addr.is_empty());
            if !ok {
                let mut d = Diagnostic::error(
                    format!("{path}.endpoint"),
                    ep.location,
                    format!(
                        "executor `{}`: endpoint `{}` is not a zenoh locator",
                        name.value, ep.value
                    ),
                );
                d.help = Some("write `<protocol>/<address>`, e.g. `tcp/127.0.0.1:7447`".into());
                diags.push(d);
            }
        }
        if e.threads == Some(0) {
            diags.push(Diagnostic::error(
                format!("{path}.threads"),
                e.location,
                format!("executor `{}`: `threads` must be at least 1", name.value),
            ));
        }
        if let Some(cost) = e.labels.get("cost_per_hour") {
            if !cost.parse::<f64>().is_ok_and(|c| c.is_finite() && c >= 0.0) {
                diags.push(Diagnostic::error(
                    format!("{path}.labels.cost_per_hour"),
                    e.location,
                    format!(
                        "executor `{}`: `cost_per_hour` must be a non-negative number, got `{cost}`",
                        name.value
                    ),
                ));
            }
        }
        by_name.insert(
            name.value.as_str(),
            (placement.executors.len(), name.location),
        );
        placement.executors.push(executor_of(e));
    }
    for node in &spec.nodes {
        let NodeSpec::Model(m) = &node.value else {
            continue;
        };
        let id = m.id.value.as_str();
        let Some(list) = &m.replicas else {
            placement
                .replicas
                .insert(id.to_string(), vec![ReplicaTarget::Local]);
            continue;
        };
        let path = format!("nodes.{id}.replicas");
        if list.value.is_empty() {
            diags.push(Diagnostic::error(
                path.clone(),
                list.location,
                format!("node `{id}`: `replicas` lists no replica"),
            ));
            continue;
        }
        let mut targets = Vec::new();
        let mut ok = true;
        for r in &list.value {
            let target = if r.value == LOCAL_REPLICA {
                Some(ReplicaTarget::Local)
            } else {
                by_name
                    .get(r.value.as_str())
                    .map(|(i, _)| ReplicaTarget::Remote(placement.executors[*i].clone()))
            };
            let Some(target) = target else {
                let names = std::iter::once(LOCAL_REPLICA)
                    .chain(spec.executors.iter().map(|e| e.name.value.as_str()));
                let mut d = Diagnostic::error(
                    path.clone(),
                    r.location,
                    format!(
                        "node `{id}`: replica `{}` is not a declared executor",
                        r.value
                    ),
                );
                d.help = Some(match did_you_mean(&r.value, names) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None => format!(
                        "declare it under `executors:`, or use `{LOCAL_REPLICA}` for this process"
                    ),
                });
                diags.push(d);
                ok = false;
                continue;
            };
            if targets
                .iter()
                .any(|t: &ReplicaTarget| t.name() == target.name())
            {
                diags.push(Diagnostic::error(
                    path.clone(),
                    r.location,
                    format!("node `{id}`: replica `{}` is listed twice", r.value),
                ));
                ok = false;
                continue;
            }
            targets.push(target);
        }
        if ok {
            placement.replicas.insert(id.to_string(), targets);
        }
    }
    placement
}
