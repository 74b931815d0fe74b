//! The models a server answers, by name and version, as Triton's clients and tools see them:
//! each served version's graph, its configuration in Triton's JSON form, and the statistics
//! Triton reports for it.
//!
//! A graph file is one model of version 1, its configuration written from its plan
//! ([`config::Signature::of_graph`]); a model of a Triton repository may have several versions, each its
//! own graph, with the configuration its repository gave (auto-completed). HTTP and gRPC share one
//! table, so a model's statistics count its requests whichever transport brought them.
//! An unversioned request goes to the highest version served; a version not served is refused
//! naming it.

pub mod config;
pub mod control;
pub mod modelless;
pub mod stats;
mod table;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;
use weir_engine::runtime::GraphRuntime;

pub use stats::{Execution, ExecutionStats, InferStats};
pub use table::ModelTable;

/// The protocol extensions the server metadata names (Triton's names): the binary tensor
/// format, model configuration and statistics. Tools such as `perf_analyzer` read server-side
/// statistics only from a server that names `statistics`.
/// `model_repository` names the repository API (index, load, unload), answered in every model
/// control mode (loads and unloads are refused outside `explicit` and `poll`, as Triton does).
pub const EXTENSIONS: [&str; 4] = [
    "binary_tensor_data",
    "model_configuration",
    "model_repository",
    "statistics",
];

/// The extensions a server names: [`EXTENSIONS`], and `system_shared_memory` when it serves
/// shared memory regions.
pub fn extensions(shared_memory: bool) -> Vec<&'static str> {
    let mut all = EXTENSIONS.to_vec();
    if shared_memory {
        all.push("system_shared_memory");
    }
    all
}

/// One served version of a model.
pub struct ModelVersion {
    /// The graph that answers it.
    pub runtime: Arc<GraphRuntime>,
    /// Its version number.
    pub version: u64,
    /// Its configuration in Triton's JSON form (`GET …/config`).
    pub config: Value,
    /// The same configuration as an encoded `inference.ModelConfig` message (gRPC `ModelConfig`).
    pub config_proto: Vec<u8>,
    /// Its request counts and times.
    pub stats: InferStats,
    /// Its executors' counts and times, when the graph reports them.
    pub execution: Option<Arc<dyn ExecutionStats>>,
}

impl std::fmt::Debug for ModelVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelVersion")
            .field("graph", &self.runtime.plan().name)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

impl ModelVersion {
    /// The rows a request carries whose first input is `name` with `dims` dimensions led by
    /// `first`: `first` when that input has one dimension more than the graph's (a batch), else
    /// one.
    pub fn rows(&self, name: &str, dims: usize, first: Option<u64>) -> u64 {
        let declared = self
            .runtime
            .plan()
            .inputs
            .iter()
            .find(|g| g.client() == name);
        match (declared, first) {
            (Some(g), Some(n)) if dims == g.ty.shape.len() + 1 => n,
            _ => 1,
        }
    }

    /// Version 1 of a graph served under its own name, its configuration written from its plan.
    pub fn of_graph(runtime: Arc<GraphRuntime>) -> ModelVersion {
        let signature = config::Signature::of_graph(&runtime);
        ModelVersion {
            config: signature.config(),
            config_proto: signature.config_proto(),
            runtime,
            version: 1,
            stats: InferStats::default(),
            execution: None,
        }
    }
}

/// Why a name and version do not resolve to a served model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    /// No model of that name.
    #[error("unknown model `{0}`")]
    UnknownModel(String),
    /// The model is served, but not in that version.
    #[error("model `{model}` has no version `{version}` (served: {served})")]
    UnknownVersion {
        /// The model.
        model: String,
        /// The version asked for, as given (cut to a bound).
        version: String,
        /// The versions served, comma-separated.
        served: String,
    },
}

/// The longest version text quoted back in an error.
const MAX_QUOTED_VERSION: usize = 32;

/// Every served model, by name, with its versions.
#[derive(Debug, Default, Clone)]
pub struct Models {
    by_name: BTreeMap<String, BTreeMap<u64, Arc<ModelVersion>>>,
}

impl Models {
    /// Each graph as version 1 of the model named by its graph.
    pub fn from_graphs(graphs: impl IntoIterator<Item = Arc<GraphRuntime>>) -> Models {
        let mut models = Models::default();
        for g in graphs {
            let name = g.plan().name.clone();
            models.insert(&name, ModelVersion::of_graph(g));
        }
        models
    }

    /// Serves `version` under `name` (replacing a version of the same number).
    pub fn insert(&mut self, name: &str, version: ModelVersion) {
        self.by_name
            .entry(name.to_string())
            .or_default()
            .insert(version.version, Arc::new(version));
    }

    /// Stops serving `name`; the versions it served.
    pub fn remove(&mut self, name: &str) -> Vec<Arc<ModelVersion>> {
        self.by_name
            .remove(name)
            .map(|vs| vs.into_values().collect())
            .unwrap_or_default()
    }

    /// Whether a model of this name is served.
    pub fn contains(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    /// The model names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }

    /// Every served version of every model, sorted by name then version.
    pub fn all(&self) -> impl Iterator<Item = (&str, &Arc<ModelVersion>)> {
        self.by_name
            .iter()
            .flat_map(|(n, vs)| vs.values().map(move |v| (n.as_str(), v)))
    }

    /// Why some served model cannot answer now (the first one found: a node with no live
    /// replica, say); `None` when every one can.
    pub fn unready(&self) -> Option<String> {
        self.all().find_map(|(name, v)| {
            v.runtime
                .unready()
                .map(|why| format!("model `{name}`: {why}"))
        })
    }

    /// The versions of `name`, ascending (empty when not served).
    pub fn versions(&self, name: &str) -> Vec<u64> {
        self.by_name
            .get(name)
            .map(|vs| vs.keys().copied().collect())
            .unwrap_or_default()
    }

    /// The version of `name` a request answers: `version` when given (decimal, as in a URL or
    /// a gRPC `model_version`; empty means unversioned), else the highest served.
    ///
    /// # Errors
    /// [`LookupError`] naming the model, or the version and those served.
    pub fn resolve(
        &self,
        name: &str,
        version: Option<&str>,
    ) -> Result<&Arc<ModelVersion>, LookupError> {
        let versions = self
            .by_name
            .get(name)
            .ok_or_else(|| LookupError::UnknownModel(name.to_string()))?;
        let wanted = version.filter(|v| !v.is_empty());
        let found = match wanted {
            None => versions.values().next_back(),
            Some(v) => v.parse::<u64>().ok().and_then(|n| versions.get(&n)),
        };
        found.ok_or_else(|| LookupError::UnknownVersion {
            model: name.to_string(),
            version: crate::echo::quote(wanted.unwrap_or(""))
                .chars()
                .take(MAX_QUOTED_VERSION)
                .collect(),
            served: versions
                .keys()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", "),
        })
    }

    /// Triton's statistics document (`GET /v2/models[/{m}[/versions/{v}]]/stats`): every served
    /// version of every model, of `name`, or of one version of it.
    ///
    /// # Errors
    /// When `name` or `version` is not served.
    pub fn statistics(
        &self,
        name: Option<&str>,
        version: Option<&str>,
    ) -> Result<Value, LookupError> {
        let chosen: Vec<(&str, &Arc<ModelVersion>)> =
            match (name, version.filter(|v| !v.is_empty())) {
                (None, _) => self.all().collect(),
                (Some(n), Some(_)) => vec![(n, self.resolve(n, version)?)],
                (Some(n), None) => {
                    let vs = self
                        .by_name
                        .get(n)
                        .ok_or_else(|| LookupError::UnknownModel(n.to_string()))?;
                    vs.values().map(|v| (n, v)).collect()
                }
            };
        Ok(serde_json::json!({
            "model_stats": chosen.iter().map(|(n, v)| stats::model_stats(n, v)).collect::<Vec<_>>()
        }))
    }
}
