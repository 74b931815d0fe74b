//! Triton's model repository RPCs over gRPC — `RepositoryIndex`, `RepositoryModelLoad`,
//! `RepositoryModelUnload` — answered through the same [`ModelControl`] as the HTTP routes, with
//! the same parameter rules. A load runs on a blocking thread: starting a graph loads ONNX Runtime
//! sessions.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use tonic::{Code, Status};

use super::proto::model_repository_parameter::ParameterChoice;
use super::proto::repository_index_response::ModelIndex;
use super::proto::{ModelRepositoryParameter, RepositoryIndexResponse};
use crate::echo::cap_error;
use crate::models::control::{ControlError, LoadRequest, ModelControl, Parameter, UnloadRequest};

/// The status a refused control request gets.
fn status(e: &ControlError) -> Status {
    let code = match e {
        ControlError::NotAllowed(_) => Code::FailedPrecondition,
        ControlError::UnknownModel(_) => Code::NotFound,
        ControlError::Parameter { .. } | ControlError::LoadFailed { .. } => Code::InvalidArgument,
    };
    Status::new(code, cap_error(e.to_string()))
}

fn control(control: Option<&Arc<dyn ModelControl>>) -> Result<Arc<dyn ModelControl>, Status> {
    control.cloned().ok_or_else(|| {
        status(&ControlError::NotAllowed(
            "none (no --model-repository is served)",
        ))
    })
}

/// The request's parameters as the transports carry them; one without a value is refused by
/// name.
fn parameters(
    given: HashMap<String, ModelRepositoryParameter>,
) -> Result<BTreeMap<String, Parameter>, Status> {
    given
        .into_iter()
        .map(|(name, p)| {
            let value = match p.parameter_choice {
                Some(ParameterChoice::BoolParam(b)) => Parameter::Bool(b),
                Some(ParameterChoice::Int64Param(n)) => Parameter::Int(n),
                Some(ParameterChoice::StringParam(t)) => Parameter::Text(t),
                Some(ParameterChoice::BytesParam(b)) => Parameter::Bytes(b),
                None => {
                    return Err(status(&ControlError::Parameter {
                        name: crate::echo::quote(&name).into_owned(),
                        message: "has no value".into(),
                    }))
                }
            };
            Ok((name, value))
        })
        .collect()
}

/// `RepositoryIndex`: every model of the repositories (none without one).
pub(super) fn index(
    control: Option<&Arc<dyn ModelControl>>,
    ready_only: bool,
) -> RepositoryIndexResponse {
    let entries = control.map(|c| c.index(ready_only)).unwrap_or_default();
    RepositoryIndexResponse {
        models: entries
            .into_iter()
            .map(|e| ModelIndex {
                name: e.name,
                version: e.version,
                state: e.state.name().to_string(),
                reason: e.reason,
            })
            .collect(),
    }
}

/// `RepositoryModelLoad`.
pub(super) async fn load(
    control_of: Option<&Arc<dyn ModelControl>>,
    model: String,
    given: HashMap<String, ModelRepositoryParameter>,
) -> Result<(), Status> {
    let request = LoadRequest::from_parameters(parameters(given)?).map_err(|e| status(&e))?;
    let control = control(control_of)?;
    tokio::task::spawn_blocking(move || control.load(&model, request))
        .await
        .map_err(|_| Status::internal("the load stopped unexpectedly"))?
        .map_err(|e| status(&e))
}

/// `RepositoryModelUnload`.
pub(super) async fn unload(
    control_of: Option<&Arc<dyn ModelControl>>,
    model: String,
    given: HashMap<String, ModelRepositoryParameter>,
) -> Result<(), Status> {
    let request = UnloadRequest::from_parameters(parameters(given)?).map_err(|e| status(&e))?;
    let control = control(control_of)?;
    tokio::task::spawn_blocking(move || control.unload(&model, request))
        .await
        .map_err(|_| Status::internal("the unload stopped unexpectedly"))?
        .map_err(|e| status(&e))
}
