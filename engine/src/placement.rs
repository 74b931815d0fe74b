//! Placement: where each model node's replicas run, in this process or in a remote executor
//! process reached over zenoh. The graph's `executors:` section and each model node's `replicas:`
//! list are checked by [`crate::validate`] and resolved into [`ReplicaTarget`]s by
//! [`crate::plan`]; the operators and the executor client read them.

use std::collections::BTreeMap;

use crate::spec::{Device, LOCAL_REPLICA};

/// A remote executor, as planned.
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
