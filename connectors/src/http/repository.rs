//! Triton's model repository endpoints: `POST /v2/repository/index` lists the repository's
//! models and their states, `POST /v2/repository/models/{name}/load` loads or reloads one,
//! `POST /v2/repository/models/{name}/unload` unloads one (see [`crate::models::control`]).
//!
//! Behind the same bearer token as inference. A body is optional, bounded
//! ([`MAX_CONTROL_BODY`]) and read under a deadline; its `parameters` are checked by name before
//! anything is done. A load runs on a blocking thread, since starting a graph loads ONNX
//! Runtime sessions. The routes carry a state of their own and read nothing of the server's.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};

use super::auth::{authorized, AuthToken};
use super::error::ServeError;
use crate::echo::cap_error;
use crate::models::control::{ControlError, LoadRequest, ModelControl, Parameter, UnloadRequest};

/// Largest body a repository request may have: a configuration given as JSON (at most 1 MiB,
/// the repository's own bound) with room for its escaping.
pub const MAX_CONTROL_BODY: usize = 4 << 20;

/// Longest a repository request's body may take to arrive.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// What the repository endpoints read.
pub(super) struct RepositoryState {
    /// What loads and unloads; `None` when the server serves no model repository.
    pub(super) control: Option<Arc<dyn ModelControl>>,
    /// The server's bearer token, if it has one.
    pub(super) auth_token: Option<AuthToken>,
}

/// The repository routes over `state`.
pub(super) fn routes(state: RepositoryState) -> Router {
    Router::new()
        .route("/v2/repository/index", post(index))
        .route("/v2/repository/models/{name}/load", post(load))
        .route("/v2/repository/models/{name}/unload", post(unload))
        .with_state(Arc::new(state))
}

pub(super) fn reply(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// Why a control request (the repository's, shared memory's) is refused, answered once as a
/// response.
pub(super) enum Refusal {
    /// No or a wrong bearer token.
    Unauthorized,
    /// A status and the error document's message.
    Status(StatusCode, String),
}

impl From<ControlError> for Refusal {
    fn from(e: ControlError) -> Self {
        let status = match e {
            ControlError::NotAllowed(_) => StatusCode::FORBIDDEN,
            ControlError::UnknownModel(_) => StatusCode::NOT_FOUND,
            ControlError::Parameter { .. } | ControlError::LoadFailed { .. } => {
                StatusCode::BAD_REQUEST
            }
        };
        Refusal::Status(status, e.to_string())
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Refusal::Unauthorized => ServeError::Unauthorized.into_response(),
            Refusal::Status(status, message) => {
                reply(status, &json!({ "error": cap_error(message) }))
            }
        }
    }
}

/// A control request's body as JSON (`{}` when empty), once the caller is authorised by
/// `token`: at most [`MAX_CONTROL_BODY`] bytes, read within a deadline.
pub(super) async fn authorised_body(
    token: Option<&AuthToken>,
    headers: &HeaderMap,
    body: Body,
) -> Result<Value, Refusal> {
    if !authorized(token, headers) {
        return Err(Refusal::Unauthorized);
    }
    let bytes = match tokio::time::timeout(
        BODY_TIMEOUT,
        axum::body::to_bytes(body, MAX_CONTROL_BODY),
    )
    .await
    {
        Err(_) => {
            return Err(Refusal::Status(
                StatusCode::REQUEST_TIMEOUT,
                "the request body did not arrive in time".into(),
            ))
        }
        Ok(Err(_)) => {
            return Err(Refusal::Status(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the request body is over {MAX_CONTROL_BODY} bytes or broken off"),
            ))
        }
        Ok(Ok(b)) => b,
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err(bad("the request body must be a JSON object")),
        Err(e) => Err(bad(&format!("the request body is not JSON: {e}"))),
    }
}

pub(super) fn bad(message: &str) -> Refusal {
    Refusal::Status(StatusCode::BAD_REQUEST, message.to_string())
}

/// The body's `parameters`, each as the transports carry it.
fn parameters(body: &Value) -> Result<BTreeMap<String, Parameter>, Refusal> {
    let Some(given) = body.get("parameters") else {
        return Ok(BTreeMap::new());
    };
    let Some(object) = given.as_object() else {
        return Err(bad("`parameters` must be an object"));
    };
    let mut out = BTreeMap::new();
    for (name, value) in object {
        let p = match value {
            Value::Bool(b) => Parameter::Bool(*b),
            Value::String(t) => Parameter::Text(t.clone()),
            Value::Number(n) if n.is_i64() => Parameter::Int(n.as_i64().unwrap_or_default()),
            _ => {
                return Err(ControlError::Parameter {
                    name: crate::echo::quote(name).into_owned(),
                    message: "must be a boolean, an integer or a string".into(),
                }
                .into())
            }
        };
        out.insert(name.clone(), p);
    }
    Ok(out)
}

fn control(s: &RepositoryState) -> Result<Arc<dyn ModelControl>, Refusal> {
    s.control
        .clone()
        .ok_or_else(|| ControlError::NotAllowed("none (no --model-repository is served)").into())
}

async fn index(
    State(s): State<Arc<RepositoryState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Refusal> {
    let body = authorised_body(s.auth_token.as_ref(), &headers, body).await?;
    let ready_only = match body.get("ready") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(bad("`ready` must be a boolean")),
    };
    let entries = s
        .control
        .as_ref()
        .map(|c| c.index(ready_only))
        .unwrap_or_default();
    Ok(reply(StatusCode::OK, &json!(entries)))
}

/// Runs `act` on the control off the I/O threads.
async fn run(
    control: Arc<dyn ModelControl>,
    act: impl FnOnce(&dyn ModelControl) -> Result<(), ControlError> + Send + 'static,
) -> Result<StatusCode, Refusal> {
    match tokio::task::spawn_blocking(move || act(control.as_ref())).await {
        Ok(Ok(())) => Ok(StatusCode::OK),
        Ok(Err(e)) => Err(e.into()),
        Err(_) => Err(Refusal::Status(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the request stopped unexpectedly".into(),
        )),
    }
}

async fn load(
    State(s): State<Arc<RepositoryState>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<StatusCode, Refusal> {
    let body = authorised_body(s.auth_token.as_ref(), &headers, body).await?;
    let request = LoadRequest::from_parameters(parameters(&body)?)?;
    run(control(&s)?, move |c| c.load(&name, request)).await
}

async fn unload(
    State(s): State<Arc<RepositoryState>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<StatusCode, Refusal> {
    let body = authorised_body(s.auth_token.as_ref(), &headers, body).await?;
    let request = UnloadRequest::from_parameters(parameters(&body)?)?;
    run(control(&s)?, move |c| c.unload(&name, request)).await
}
