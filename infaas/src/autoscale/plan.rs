//! The model-autoscaler's questions, read off a snapshot of the metadata store: one
//! [`Problem`] per architecture with instances running.
//!
//! An executor holds a variant once, so a variant's replicas are spread over the executors of
//! its type, and the question is asked per architecture rather than per executor: its candidates
//! are the architecture's variants of every type that has executors or may get one (those
//! meeting the accuracy floor queries asked for; only the running ones when queries name a
//! variant, since they would not follow a change) — so an upgrade may move the architecture to a
//! faster type and a downgrade to a cheaper one, as the paper's variants span hardware. `running`
//! counts instances loaded or loading on the type's executors, and a variant may have at most
//! one instance per executor of its type there is or may be started; the load is the larger of what
//! queries offered the architecture's variants (per second, over the last seconds) and what its
//! instances served in their last reports, and the resources are the type's executors'
//! together.

use std::collections::BTreeMap;

use super::demand::Demand;
use super::AutoscaleConfig;
use crate::scaling::{Candidate, Problem, Resources};
use crate::snapshot::{Snapshot, VariantId};

/// One architecture's question.
#[derive(Debug, Clone)]
pub(super) struct Group {
    /// Architecture (the registered model).
    pub architecture: String,
    /// The question.
    pub problem: Problem,
}

/// Every group with an instance running, sorted by architecture.
pub(super) fn groups(snapshot: &Snapshot, demand: &Demand, config: &AutoscaleConfig) -> Vec<Group> {
    let registry = snapshot.registry();
    // Architecture → (instances per variant, load).
    let mut running: BTreeMap<String, (BTreeMap<VariantId, u32>, f64)> = BTreeMap::new();
    for i in snapshot.instances() {
        let Some(v) = registry.get(i.variant) else {
            continue;
        };
        let entry = running.entry(v.model.clone()).or_default();
        *entry.0.entry(i.variant).or_default() += 1;
        entry.1 += i.qps.max(0.0);
    }
    let mut out = Vec::new();
    // Types with executors, or that executors may be started of.
    let launchable = |hw: &str| config.launchable.iter().any(|l| l == hw);
    let usable = |hw: &str| !snapshot.workers_of(hw).is_empty() || launchable(hw);
    // A variant's replicas each need an executor of its type: those there are, or as many as
    // the worker autoscaler may start.
    let executors_for = |hw: &str| {
        let now = u32::try_from(snapshot.workers_of(hw).len()).unwrap_or(u32::MAX);
        match launchable(hw) {
            true => now.max(config.workers.max_per_type),
            false => now,
        }
    };
    for (architecture, (counts, load_qps)) in running {
        // Every variant of the architecture: queries may have chosen one not running yet.
        let names = registry
            .variants()
            .iter()
            .filter(|v| v.model == architecture)
            .map(|v| v.name.as_str());
        let asked = demand.asked(names);
        // What arrives, or what was served when more than that (reports lag a little).
        let load_qps = load_qps.max(asked.arrival_qps);
        let floor = asked.min_accuracy.unwrap_or(0.0);
        let variants: Vec<VariantId> = (0..registry.variants().len() as VariantId)
            .filter(|id| {
                registry.get(*id).is_some_and(|v| {
                    v.model == architecture
                        && usable(&v.config.hardware)
                        && (counts.contains_key(id) || (!asked.explicit && v.accuracy >= floor))
                })
            })
            .collect();
        let candidates: Vec<Candidate> = variants
            .iter()
            .filter_map(|id| registry.get(*id).map(|v| (id, v)))
            .map(|(id, v)| Candidate {
                name: v.name.clone(),
                architecture: v.model.clone(),
                saturation_qps: v.profile.saturation_qps,
                inference_ms: v.profile.inference_ms(1).unwrap_or(f64::INFINITY),
                load_s: v.profile.load_ms / 1e3,
                price_per_s: v.price_per_s,
                needs: Resources {
                    cores: f64::from(v.config.intra_threads.max(1)),
                    memory_bytes: v.profile.peak_memory_bytes as f64,
                },
                running: counts.get(id).copied().unwrap_or(0),
                max_instances: Some(executors_for(&v.config.hardware)),
            })
            .collect();
        // Without a target from the queries, any latency will do.
        let slo_ms = asked.latency_ms.unwrap_or(f64::INFINITY);
        // The executors of the types the candidates run on, together; a type with none yet
        // (one that may be launched) counts as the one it would get.
        let types: std::collections::BTreeSet<&str> = variants
            .iter()
            .filter_map(|id| registry.get(*id))
            .map(|v| v.config.hardware.as_str())
            .collect();
        let executors = types
            .iter()
            .map(|t| snapshot.workers_of(t).len().max(1))
            .sum::<usize>() as f64;
        out.push(Group {
            problem: Problem {
                candidates,
                load_qps,
                slo_ms,
                slack_qps: config.slack_qps,
                lambda_per_s: config.lambda_per_s,
                capacity: Resources {
                    cores: executors * config.executor_cores,
                    memory_bytes: executors * config.executor_memory_bytes,
                },
            },
            architecture,
        });
    }
    out
}
