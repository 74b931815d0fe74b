//! The `executors:` section: remote ONNX Runtime executor processes a graph's model nodes may run
//! on, reached over zenoh. A model node names them in its `replicas:` list.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::Spanned;

/// The replica name that means "an executor inside this process".
pub const LOCAL_REPLICA: &str = "local";

/// One remote executor process (`weir executor`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteExecutorSpec {
    /// Name, unique in the graph; what `replicas:` lists and what the executor was started with
    /// (`weir executor --name`).
    pub name: Spanned<String>,
    /// A zenoh locator where the executor listens, e.g. `tcp/127.0.0.1:7447`. The graph connects
    /// to it; when omitted, the executor must be reachable through the graph's other endpoints
    /// (it connected to one of them itself).
    #[serde(default)]
    pub endpoint: Option<Spanned<String>>,
    /// Key-expression prefix the executor serves under (default `weir/executor/<name>`).
    #[serde(default)]
    pub key: Option<Spanned<String>>,
    /// Device the executor runs models on (a label for routing; the executor itself was started
    /// with it).
    #[serde(default)]
    pub device: Device,
    /// Intra-op threads per session on that host (a label for planning).
    #[serde(default)]
    pub threads: Option<usize>,
    /// Free labels for routing and planning, such as `instance_type` and `cost_per_hour`.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

impl RemoteExecutorSpec {
    /// The key-expression prefix the executor serves under.
    pub fn key_prefix(&self) -> String {
        match &self.key {
            Some(k) => k.value.trim_end_matches('/').to_string(),
            None => format!("weir/executor/{}", self.name.value),
        }
    }

    /// The `cost_per_hour` label as a number, when it holds one.
    pub fn cost_per_hour(&self) -> Option<f64> {
        self.labels
            .get("cost_per_hour")
            .and_then(|c| c.parse().ok())
    }
}

/// Where an executor runs its models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Device {
    /// CPU.
    #[default]
    Cpu,
    /// An NVIDIA GPU through ONNX Runtime's CUDA execution provider.
    Cuda,
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Device::Cpu => "cpu",
            Device::Cuda => "cuda",
        })
    }
}
