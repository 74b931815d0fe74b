//! Replica sets: each model node's `replicas:` list resolved into the executors that run it, in
//! list order (for a replicated stateful node, `[primary, backup]`). A node that lists none runs on
//! one executor in this process. A parity-coded node's parity model nodes resolve their own list
//! the same way.

use crate::placement::{RemoteExecutor, ReplicaTarget};
use crate::spec::{GraphSpec, ModelSpec, Spanned, LOCAL_REPLICA};

/// The graph's remote executors, in `executors:` order.
pub(super) fn executors(spec: &GraphSpec) -> Vec<RemoteExecutor> {
    spec.executors
        .iter()
        .map(|e| RemoteExecutor {
            name: e.name.value.clone(),
            endpoint: e.endpoint.as_ref().map(|ep| ep.value.clone()),
            key_prefix: e.key_prefix(),
            device: e.device,
            threads: e.threads,
            labels: e.labels.clone(),
        })
        .collect()
}

/// Where model node `m`'s replicas run. Validation proved every name is `local` or one of
/// `executors`.
pub(super) fn replica_set(m: &ModelSpec, executors: &[RemoteExecutor]) -> Vec<ReplicaTarget> {
    resolve(m.replicas.as_ref(), executors)
}

/// A `replicas:` list resolved against `executors` (none: one local replica).
pub(super) fn resolve(
    list: Option<&Spanned<Vec<Spanned<String>>>>,
    executors: &[RemoteExecutor],
) -> Vec<ReplicaTarget> {
    let Some(list) = list else {
        return vec![ReplicaTarget::Local];
    };
    list.value
        .iter()
        .filter_map(|name| {
            if name.value == LOCAL_REPLICA {
                return Some(ReplicaTarget::Local);
            }
            executors
                .iter()
                .find(|e| e.name == name.value)
                .map(|e| ReplicaTarget::Remote(e.clone()))
        })
        .collect()
}
