//! A model node's routing over its replicas, after "KAIROS: Building Cost-Efficient Machine
//! Learning Inference Systems with Heterogeneous Cloud Resources" (Kairos, §5.1) for `kairos`.
//!
//! Without `routing:` a node routes to the live replica with the fewest jobs outstanding. Under
//! Kairos the pool is described by its replicas' executor labels, in replica order (each replica's
//! `instance_type` and `cost_per_hour`), and the latency profile, when `profiles:` names one, takes
//! the node's `qos_ms` as its target.

use std::path::Path;

use weir_kairos::profile::ModelProfile;

use crate::placement::ReplicaTarget;
use crate::routing::{KairosRouting, Routing};
use crate::spec::{ModelSpec, RoutingSpec};

/// Model node `m`'s routing over `replicas`; `kairos_profile` is the latency profile validation
/// read from `profiles:`.
pub(super) fn routing(
    m: &ModelSpec,
    replicas: &[ReplicaTarget],
    base_dir: &Path,
    kairos_profile: Option<&ModelProfile>,
) -> Routing {
    let Some(spec) = &m.routing else {
        return Routing::LeastOutstanding;
    };
    let k = match &spec.value {
        RoutingSpec::LeastOutstanding => return Routing::LeastOutstanding,
        RoutingSpec::RoundRobin => return Routing::RoundRobin,
        RoutingSpec::Kairos(k) => k,
    };
    let (replica_types, replica_costs) = replicas
        .iter()
        .filter_map(|r| match r {
            ReplicaTarget::Remote(e) => {
                Some((e.labels.get("instance_type")?.clone(), e.cost_per_hour()?))
            }
            ReplicaTarget::Local => None,
        })
        .unzip();
    let qos_ms = k.qos_ms.value;
    Routing::Kairos(KairosRouting {
        qos_ms,
        replica_types,
        replica_costs,
        profile: kairos_profile.map(|p| p.clone().with_qos_ms(qos_ms)),
        profile_path: k.profiles.as_ref().map(|p| base_dir.join(&p.value)),
        batch_queued_jobs: k.batch_queued_jobs,
    })
}
