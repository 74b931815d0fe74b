//! Remote executors (`executors:`) and each model node's replica list (`replicas:`).
//!
//! Rules: executor names are unique and well-formed, and not `local` (which means in-process); an
//! endpoint is a zenoh locator (`<protocol>/<address>`); `threads` is at least 1; `cost_per_hour`,
//! when labelled, is a non-negative number; a replica names `local` or a declared executor (with a
//! did-you-mean), at most once per node, and a node lists at least one replica; the same holds for
//! a parity-coded node's `resilience.parity.replicas`.
//!
//! The lists resolved here ([`ReplicaLists`]) are what the routing, parallelism and state rules
//! check against; what a replica becomes at run time is the plan's ([`crate::plan`]).

use std::collections::HashMap;

use super::{is_locator, Validator};
use crate::diagnostic::{did_you_mean, Diagnostic, Location};
use crate::spec::{GraphSpec, NodeSpec, RemoteExecutorSpec, Spanned, LOCAL_REPLICA};

/// A replica a node lists, resolved to what it names.
#[derive(Debug, Clone, Copy)]
pub(super) enum Replica<'a> {
    /// This process (`local`).
    Local,
    /// A declared executor.
    Executor(&'a RemoteExecutorSpec),
}

impl Replica<'_> {
    /// The name as written: `local` or the executor's name.
    pub fn name(&self) -> &str {
        match self {
            Replica::Local => LOCAL_REPLICA,
            Replica::Executor(e) => &e.name.value,
        }
    }
}

/// Each model node's replicas (one `local` when the node lists none).
#[derive(Debug, Default)]
pub(super) struct ReplicaLists<'a> {
    by_node: HashMap<&'a str, Vec<Replica<'a>>>,
}

impl<'a> ReplicaLists<'a> {
    /// Node `id`'s replicas, or `None` when its list had errors (reported already).
    pub fn of(&self, id: &str) -> Option<&[Replica<'a>]> {
        self.by_node.get(id).map(Vec::as_slice)
    }
}

/// Whether `replicas` is the one in-process replica.
pub(super) fn only_local(replicas: &[Replica<'_>]) -> bool {
    matches!(replicas, [Replica::Local])
}

fn valid_executor_name(name: &str) -> bool {
    !name.is_empty()
        && name != LOCAL_REPLICA
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl<'a> Validator<'a, '_> {
    /// Checks the graph's executors and replica lists, and keeps each node's resolved list.
    pub(super) fn check_placement(&mut self) {
        let spec = self.spec;
        let diags = &mut self.diags;
        let mut by_name: HashMap<&str, (&RemoteExecutorSpec, Location)> = HashMap::new();
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
                if !is_locator(ep) {
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
            by_name.insert(name.value.as_str(), (&e.value, name.location));
        }
        let mut lists = ReplicaLists::default();
        for node in &spec.nodes {
            let NodeSpec::Model(m) = &node.value else {
                continue;
            };
            let id = m.id.value.as_str();
            // A parity-coded node's parity model nodes list their own replicas.
            let parity = m.resilience.as_ref().and_then(|r| r.parity.as_ref());
            if let Some(list) = parity.and_then(|p| p.replicas.as_ref()) {
                let path = format!("nodes.{id}.resilience.parity.replicas");
                replica_list(spec, &by_name, id, &path, list, diags);
            }
            let Some(list) = &m.replicas else {
                lists.by_node.insert(id, vec![Replica::Local]);
                continue;
            };
            let path = format!("nodes.{id}.replicas");
            if let Some(replicas) = replica_list(spec, &by_name, id, &path, list, diags) {
                lists.by_node.insert(id, replicas);
            }
        }
        self.replicas = lists;
    }
}

/// Replica list `list` of node `id` (at `path`) resolved against the declared executors
/// `by_name`; `None`, with the errors pushed, when a name is unknown or repeated or it is empty.
fn replica_list<'a>(
    spec: &'a GraphSpec,
    by_name: &HashMap<&str, (&'a RemoteExecutorSpec, Location)>,
    id: &str,
    path: &str,
    list: &Spanned<Vec<Spanned<String>>>,
    diags: &mut Vec<Diagnostic>,
) -> Option<Vec<Replica<'a>>> {
    if list.value.is_empty() {
        diags.push(Diagnostic::error(
            path.to_string(),
            list.location,
            format!("node `{id}`: `replicas` lists no replica"),
        ));
        return None;
    }
    let mut replicas: Vec<Replica<'a>> = Vec::new();
    let mut ok = true;
    for r in &list.value {
        let replica = if r.value == LOCAL_REPLICA {
            Some(Replica::Local)
        } else {
            by_name
                .get(r.value.as_str())
                .map(|(e, _)| Replica::Executor(e))
        };
        let Some(replica) = replica else {
            let names = std::iter::once(LOCAL_REPLICA)
                .chain(spec.executors.iter().map(|e| e.name.value.as_str()));
            let mut d = Diagnostic::error(
                path.to_string(),
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
        if replicas.iter().any(|t| t.name() == replica.name()) {
            diags.push(Diagnostic::error(
                path.to_string(),
                r.location,
                format!("node `{id}`: replica `{}` is listed twice", r.value),
            ));
            ok = false;
            continue;
        }
        replicas.push(replica);
    }
    ok.then_some(replicas)
}

#[cfg(test)]
mod tests {
    use super::valid_executor_name;

    #[test]
    fn local_is_not_an_executor_name() {
        assert!(valid_executor_name("gpu-a_1"));
        for bad in ["", "local", "a.b", "a b"] {
            assert!(!valid_executor_name(bad), "{bad}");
        }
    }
}
