//! Model-less names read as models: what both transports answer for a task (or a variant named
//! directly) when a client asks for its metadata, configuration or statistics.
//!
//! A model-less name has no graph of its own to describe, so its front end describes it
//! ([`ModelLessModel`]): the task's signature, which every variant shares, as version 1. The
//! lookups here follow the model table's rules — an unversioned request or version 1 finds it,
//! any other version is refused naming the one served — so a client cannot tell a task from a
//! graph until it reads the reply's `parameters`.

use std::sync::Arc;

use serde_json::{json, Value};

use super::config::Signature;
use super::stats::version_stats;
use super::{LookupError, ModelVersion, Models};
use crate::oip::{ModelLess, ModelLessModel, MODELLESS_VERSION};

/// What a read of a model name finds.
pub enum Found {
    /// A version of a model of the table (a graph, or a repository model).
    Table(Arc<ModelVersion>),
    /// A name served model-less.
    ModelLess(ModelLessModel),
}

impl Found {
    /// Its signature, under the name it was asked by; a table model's platform and batching are
    /// its configuration's (`onnxruntime_onnx` for a repository model).
    pub fn signature(&self, name: &str) -> Signature {
        match self {
            Found::Table(v) => {
                let mut sig = Signature::of_graph(&v.runtime);
                sig.name = name.to_string();
                if let Some(p) = v.config.get("platform").and_then(Value::as_str) {
                    sig.platform = p.to_string();
                }
                // A repository model's configuration says whether requests carry a batch
                // dimension; a graph's has none to say, and batches.
                if v.config.get("max_batch_size").and_then(Value::as_i64) == Some(0) {
                    sig.max_batch = 0;
                }
                sig
            }
            Found::ModelLess(m) => m.signature.clone(),
        }
    }

    /// Its configuration in Triton's JSON form.
    pub fn config(&self) -> Value {
        match self {
            Found::Table(v) => v.config.clone(),
            Found::ModelLess(m) => m.signature.config(),
        }
    }

    /// Its configuration as an encoded `inference.ModelConfig`.
    pub fn config_proto(&self) -> Vec<u8> {
        match self {
            Found::Table(v) => v.config_proto.clone(),
            Found::ModelLess(m) => m.signature.config_proto(),
        }
    }
}

/// The model `name` at `version` (`None` or empty: unversioned) in the table, else served
/// model-less, and the versions it is served in.
///
/// # Errors
/// Neither serves the name, or not in that version.
pub fn find(
    models: &Models,
    modelless: Option<&dyn ModelLess>,
    name: &str,
    version: Option<&str>,
) -> Result<(Found, Vec<u64>), LookupError> {
    if models.contains(name) || modelless.is_none() {
        let v = models.resolve(name, version)?;
        return Ok((Found::Table(Arc::clone(v)), models.versions(name)));
    }
    let m = resolve(modelless, name, version)?;
    Ok((Found::ModelLess(m), vec![MODELLESS_VERSION]))
}

/// The model-less description of `name` at `version` (`None` or empty: unversioned).
///
/// # Errors
/// The name is not served model-less, or the version is not the one it is served as.
fn resolve(
    modelless: Option<&dyn ModelLess>,
    name: &str,
    version: Option<&str>,
) -> Result<ModelLessModel, LookupError> {
    let found = modelless
        .and_then(|m| m.describe(name))
        .ok_or_else(|| LookupError::UnknownModel(name.to_string()))?;
    match version.filter(|v| !v.is_empty()) {
        None => Ok(found),
        Some(v) if v.parse::<u64>().ok() == Some(MODELLESS_VERSION) => Ok(found),
        Some(v) => Err(LookupError::UnknownVersion {
            model: name.to_string(),
            version: crate::echo::quote(v)
                .chars()
                .take(super::MAX_QUOTED_VERSION)
                .collect(),
            served: MODELLESS_VERSION.to_string(),
        }),
    }
}

/// Triton's statistics document over the model table and the model-less names: every model of
/// both (`name: None`), or the one `name` finds, the table first.
///
/// # Errors
/// When `name` or `version` is served by neither.
pub fn statistics(
    models: &Models,
    modelless: Option<&dyn ModelLess>,
    name: Option<&str>,
    version: Option<&str>,
) -> Result<Value, LookupError> {
    let one = |n: &str| -> Option<Value> {
        let m = modelless?.describe(n)?;
        Some(version_stats(n, MODELLESS_VERSION, &m.stats, None))
    };
    match name {
        Some(n) if !models.contains(n) => {
            resolve(modelless, n, version)?;
            Ok(json!({"model_stats": one(n).into_iter().collect::<Vec<_>>()}))
        }
        Some(_) => models.statistics(name, version),
        None => {
            let mut doc = models.statistics(None, None)?;
            let extra = modelless
                .map(|m| m.names())
                .unwrap_or_default()
                .into_iter()
                .filter(|n| !models.contains(n))
                .filter_map(|n| one(&n));
            if let Some(list) = doc.get_mut("model_stats").and_then(Value::as_array_mut) {
                list.extend(extra);
            }
            Ok(doc)
        }
    }
}
