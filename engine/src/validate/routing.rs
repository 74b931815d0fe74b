//! A model node's `routing:` over its replicas; the Kairos rules are those of "KAIROS: Building
//! Cost-Efficient Machine Learning Inference Systems with Heterogeneous Cloud Resources" (Kairos, §5.1).
//!
//! Rules for `routing: {kairos: ...}`:
//! - `qos_ms` is a positive number of milliseconds;
//! - every replica is a declared executor (not `local`, which has no instance type) carrying the
//!   labels `instance_type` and `cost_per_hour`: the pool description Kairos's matching prices
//!   queries by;
//! - `profiles`, when given, is a readable Kairos latency profile (relative to the graph file's
//!   folder) listing every replica's instance type; its `cost_per_hour` differing from an
//!   executor's label is a warning (the label is the price; the profile only gives latencies).
//!
//! `round_robin` and `least_outstanding` take no settings. The profile read here is handed to the
//! plan, which builds the node's [`crate::routing::Routing`].

use weir_kairos::profile::ModelProfile;

use super::placement::Replica;
use super::{error_count, node_path, Validator};
use crate::diagnostic::{did_you_mean, Diagnostic};
use crate::paths::read_text;
use crate::spec::{ModelSpec, RoutingSpec, LOCAL_REPLICA};

impl Validator<'_, '_> {
    /// Checks `m.routing` of node `id` against its resolved replicas. Returns the Kairos latency
    /// profile `profiles:` names, when it was read and every rule held.
    pub(super) fn check_routing(&mut self, id: &str, m: &ModelSpec) -> Option<ModelProfile> {
        let (base_dir, files) = (self.base_dir, self.files);
        let replicas = self.replicas.of(id);
        let diags = &mut self.diags;
        let routing = m.routing.as_ref()?;
        let RoutingSpec::Kairos(k) = &routing.value else {
            return None;
        };
        let errors_before = error_count(diags);
        let qos_ms = k.qos_ms.value;
        if !(qos_ms.is_finite() && qos_ms > 0.0) {
            diags.push(Diagnostic::error(
                node_path(id, "routing.kairos.qos_ms"),
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
                        node_path(id, "routing"),
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
                        Replica::Local => diags.push(
                            Diagnostic::error(
                                node_path(id, "replicas"),
                                written.location,
                                format!("node `{id}`: kairos routing cannot use `{LOCAL_REPLICA}`, which has no instance type or price"),
                            )
                            .with_help("serve the model from a `weir executor` declared under `executors:` with `instance_type` and `cost_per_hour` labels"),
                        ),
                        Replica::Executor(e) => {
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
                                        node_path(id, "routing"),
                                        routing.location,
                                        format!(
                                            "node `{id}`: kairos routing needs labels {} on executor `{}`",
                                            missing.iter().map(|l| format!("`{l}`")).collect::<Vec<_>>().join(" and "),
                                            e.name.value
                                        ),
                                    )
                                    .with_help(format!(
                                        "add them under `executors:`, e.g. `labels: {{instance_type: c5.large, cost_per_hour: \"0.085\"}}` on `{}`",
                                        e.name.value
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
        if let Some(p) = &k.profiles {
            let path = base_dir.join(&p.value);
            let field = node_path(id, "routing.kairos.profiles");
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
                    profile = Some(prof);
                }
            }
        }
        (error_count(diags) == errors_before && replicas.is_some())
            .then_some(profile)
            .flatten()
    }
}
