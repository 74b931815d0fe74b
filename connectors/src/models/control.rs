//! Model control as Triton's repository API names it: the index of a model repository, and
//! loading, reloading and unloading one model. The transports (`POST /v2/repository/…`, gRPC
//! `RepositoryIndex` / `RepositoryModelLoad` / `RepositoryModelUnload`) parse and answer; what a
//! load does (reading the repository, starting graphs, swapping them into the [`ModelTable`])
//! is the server's, behind [`ModelControl`], so this crate starts no graph itself.
//!
//! [`ModelTable`]: super::ModelTable

use std::collections::BTreeMap;

use serde::Serialize;

/// A model's state in the index, with Triton's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ModelState {
    /// Serving.
    Ready,
    /// Not serving: never loaded, unloaded, or its load failed (the reason says which).
    Unavailable,
    /// Being loaded or reloaded.
    Loading,
    /// Being unloaded: admits nothing new, finishing what it admitted.
    Unloading,
}

impl ModelState {
    /// Triton's name for it.
    pub fn name(self) -> &'static str {
        match self {
            ModelState::Ready => "READY",
            ModelState::Unavailable => "UNAVAILABLE",
            ModelState::Loading => "LOADING",
            ModelState::Unloading => "UNLOADING",
        }
    }
}

/// One row of the repository index: a model, or one version of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IndexEntry {
    /// The model's name.
    pub name: String,
    /// The version, when the row is about one (empty for a model that never loaded).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// Its state.
    pub state: ModelState,
    /// Why it is in that state, when not ready.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// A load's parameters (Triton's `parameters` of a load request).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadRequest {
    /// `config`: the model's configuration as JSON, used instead of its `config.pbtxt`.
    pub config: Option<String>,
}

/// An unload's parameters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UnloadRequest {
    /// `unload_dependents`: also unload the ensembles that use the model.
    pub unload_dependents: bool,
}

/// Why a control request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    /// Loads and unloads are not taken in this model control mode.
    #[error("explicit model load / unload is not allowed in model control mode `{0}` (start the server with --model-control-mode explicit)")]
    NotAllowed(&'static str),
    /// No model of that name in any repository.
    #[error("no model `{0}` in the model repository")]
    UnknownModel(String),
    /// A request parameter is malformed; the parameter is named.
    #[error("parameter `{name}`: {message}")]
    Parameter {
        /// The parameter.
        name: String,
        /// What is wrong with it.
        message: String,
    },
    /// The model could not be loaded; it is unavailable with this reason.
    #[error("failed to load `{model}`: {reason}")]
    LoadFailed {
        /// The model.
        model: String,
        /// Why.
        reason: String,
    },
}

/// What the repository API acts on. Loads block until the model serves or fails (callers run
/// them off their I/O threads); an unload returns once new requests are refused, the old graphs
/// finishing in the background. Unloading a model that is not loaded does nothing, as in Triton.
pub trait ModelControl: Send + Sync {
    /// Every model of the repositories with its state; only ready ones when `ready_only`.
    fn index(&self, ready_only: bool) -> Vec<IndexEntry>;

    /// Loads `model`, or reloads it when loaded: the new versions serve once all have started,
    /// and the old ones then finish what they admitted and stop.
    ///
    /// # Errors
    /// [`ControlError`] naming why; a failed reload leaves the loaded versions serving.
    fn load(&self, model: &str, request: LoadRequest) -> Result<(), ControlError>;

    /// Unloads `model`.
    ///
    /// # Errors
    /// [`ControlError`] naming why.
    fn unload(&self, model: &str, request: UnloadRequest) -> Result<(), ControlError>;
}

/// A request parameter as the transports carry it (Triton's `ModelRepositoryParameter`, or a JSON
/// value).
#[derive(Debug, Clone, PartialEq)]
pub enum Parameter {
    /// `bool_param`.
    Bool(bool),
    /// `int64_param`.
    Int(i64),
    /// `string_param`.
    Text(String),
    /// `bytes_param`.
    Bytes(Vec<u8>),
}

impl LoadRequest {
    /// A load's parameters: `config` (text); a `file:` parameter (a model file sent inline) is
    /// refused by name, and so is any other.
    ///
    /// # Errors
    /// [`ControlError::Parameter`] naming the parameter.
    pub fn from_parameters(parameters: BTreeMap<String, Parameter>) -> Result<Self, ControlError> {
        let mut request = LoadRequest::default();
        for (name, value) in parameters {
            match (name.as_str(), value) {
                ("config", Parameter::Text(text)) => request.config = Some(text),
                ("config", _) => return Err(parameter(&name, "must be a string of JSON")),
                (n, _) if n.starts_with("file:") => {
                    return Err(parameter(
                        &name,
                        "model files sent with the load request are not taken; place them in the repository",
                    ))
                }
                _ => return Err(parameter(&name, "not a load parameter")),
            }
        }
        Ok(request)
    }
}

impl UnloadRequest {
    /// An unload's parameters: `unload_dependents` (bool); any other is refused by name.
    ///
    /// # Errors
    /// [`ControlError::Parameter`] naming the parameter.
    pub fn from_parameters(parameters: BTreeMap<String, Parameter>) -> Result<Self, ControlError> {
        let mut request = UnloadRequest::default();
        for (name, value) in parameters {
            match (name.as_str(), value) {
                ("unload_dependents", Parameter::Bool(b)) => request.unload_dependents = b,
                ("unload_dependents", _) => return Err(parameter(&name, "must be a boolean")),
                _ => return Err(parameter(&name, "not an unload parameter")),
            }
        }
        Ok(request)
    }
}

/// The longest parameter name quoted back in an error.
const MAX_QUOTED_NAME: usize = 64;

fn parameter(name: &str, message: &str) -> ControlError {
    ControlError::Parameter {
        name: crate::echo::quote(name)
            .chars()
            .take(MAX_QUOTED_NAME)
            .collect(),
        message: message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_taken_by_name_and_type() {
        let load = LoadRequest::from_parameters(BTreeMap::from([(
            "config".to_string(),
            Parameter::Text("{}".into()),
        )]))
        .unwrap();
        assert_eq!(load.config.as_deref(), Some("{}"));
        let err = LoadRequest::from_parameters(BTreeMap::from([(
            "file:1/model.onnx".to_string(),
            Parameter::Bytes(vec![1]),
        )]))
        .unwrap_err();
        assert!(err.to_string().contains("file:1/model.onnx"), "{err}");
        let unload = UnloadRequest::from_parameters(BTreeMap::from([(
            "unload_dependents".to_string(),
            Parameter::Bool(true),
        )]))
        .unwrap();
        assert!(unload.unload_dependents);
        assert!(UnloadRequest::from_parameters(BTreeMap::from([(
            "unload_dependents".to_string(),
            Parameter::Int(1),
        )]))
        .is_err());
    }
}
