//! Triton's shared memory endpoints over HTTP (`crate::shared_memory` holds the regions and
//! says why they are shaped so):
//!
//! - `GET /v2/systemsharedmemory[/region/{name}]/status`: the registered regions, as
//!   `[{"name", "key", "offset", "byte_size"}]` (a name not registered is a 404);
//! - `POST /v2/systemsharedmemory/region/{name}/register` with `{"key", "offset", "byte_size"}`;
//! - `POST /v2/systemsharedmemory[/region/{name}]/unregister`;
//! - the same under `/v2/cudasharedmemory`: no region is ever registered there (a registration is
//!   refused saying why), so a client that clears both kinds before it starts goes on.
//!
//! Behind the server's bearer token; a body is a bounded control body read under a deadline
//! (`repository.rs`); a registration carries the client's address for the loopback check.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{Extensions, HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};

use super::auth::{authorized, AuthToken};
use super::repository::{authorised_body, bad, reply, Refusal};
use crate::echo::quote;
use crate::shared_memory::{SharedMemory, SharedMemoryError};

/// What the shared memory routes read.
pub(super) struct SharedMemoryState {
    pub(super) regions: Arc<SharedMemory>,
    pub(super) auth_token: Option<AuthToken>,
}

type Shared = State<Arc<SharedMemoryState>>;

/// The shared memory routes over `state`.
pub(super) fn routes(state: SharedMemoryState) -> Router {
    Router::new()
        .route("/v2/systemsharedmemory/status", get(status_all))
        .route("/v2/systemsharedmemory/region/{name}/status", get(status))
        .route(
            "/v2/systemsharedmemory/region/{name}/register",
            post(register),
        )
        .route("/v2/systemsharedmemory/unregister", post(unregister_all))
        .route(
            "/v2/systemsharedmemory/region/{name}/unregister",
            post(unregister),
        )
        .route("/v2/cudasharedmemory/status", get(cuda_status_all))
        .route(
            "/v2/cudasharedmemory/region/{name}/status",
            get(cuda_status),
        )
        .route(
            "/v2/cudasharedmemory/region/{name}/register",
            post(cuda_register),
        )
        .route("/v2/cudasharedmemory/unregister", post(cuda_unregister))
        .route(
            "/v2/cudasharedmemory/region/{name}/unregister",
            post(cuda_unregister),
        )
        .with_state(Arc::new(state))
}

impl From<SharedMemoryError> for Refusal {
    fn from(e: SharedMemoryError) -> Self {
        let status = match e {
            SharedMemoryError::NotLocal { .. } => StatusCode::FORBIDDEN,
            SharedMemoryError::Unknown(_) => StatusCode::NOT_FOUND,
            _ => StatusCode::BAD_REQUEST,
        };
        Refusal::Status(status, e.to_string())
    }
}

fn authorise(s: &SharedMemoryState, headers: &HeaderMap) -> Result<(), Refusal> {
    if authorized(s.auth_token.as_ref(), headers) {
        Ok(())
    } else {
        Err(Refusal::Unauthorized)
    }
}

fn statuses(s: &SharedMemoryState, name: Option<&str>) -> Result<Response, Refusal> {
    let regions: Vec<Value> = s
        .regions
        .status(name)?
        .into_iter()
        .map(
            |r| json!({"name": r.name, "key": r.key, "offset": r.offset, "byte_size": r.byte_size}),
        )
        .collect();
    Ok(reply(StatusCode::OK, &Value::Array(regions)))
}

async fn status_all(State(s): Shared, headers: HeaderMap) -> Result<Response, Refusal> {
    authorise(&s, &headers)?;
    statuses(&s, None)
}

async fn status(
    State(s): Shared,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Result<Response, Refusal> {
    authorise(&s, &headers)?;
    statuses(&s, Some(&name))
}

/// A byte count of the body, `key` in it.
fn count(body: &Value, key: &str, default: Option<u64>) -> Result<u64, Refusal> {
    match body.get(key) {
        None => default.ok_or_else(|| bad(&format!("{key}: missing"))),
        Some(v) => v
            .as_u64()
            .ok_or_else(|| bad(&format!("{key}: must be a non-negative integer"))),
    }
}

async fn register(
    State(s): Shared,
    Path(name): Path<String>,
    extensions: Extensions,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Refusal> {
    let body = authorised_body(s.auth_token.as_ref(), &headers, body).await?;
    let key = match body.get("key") {
        Some(Value::String(k)) => k.as_str(),
        Some(_) => return Err(bad("key: must be a string")),
        None => return Err(bad("key: missing")),
    };
    let offset = count(&body, "offset", Some(0))?;
    let byte_size = count(&body, "byte_size", None)?;
    let peer = extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(a)| *a);
    s.regions.register(&name, key, offset, byte_size, peer)?;
    tracing::info!(region = %quote(&name), key = %quote(key), offset, byte_size, "Shared memory region registered.");
    Ok(reply(StatusCode::OK, &json!({})))
}

async fn unregister_all(
    State(s): Shared,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Refusal> {
    authorised_body(s.auth_token.as_ref(), &headers, body).await?;
    s.regions.unregister(None);
    Ok(reply(StatusCode::OK, &json!({})))
}

async fn unregister(
    State(s): Shared,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Refusal> {
    authorised_body(s.auth_token.as_ref(), &headers, body).await?;
    s.regions.unregister(Some(&name));
    Ok(reply(StatusCode::OK, &json!({})))
}

async fn cuda_status_all(State(s): Shared, headers: HeaderMap) -> Result<Response, Refusal> {
    authorise(&s, &headers)?;
    Ok(reply(StatusCode::OK, &json!([])))
}

async fn cuda_status(
    State(s): Shared,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Result<Response, Refusal> {
    authorise(&s, &headers)?;
    Err(SharedMemoryError::Unknown(quote(&name).into_owned()).into())
}

async fn cuda_register(
    State(s): Shared,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Refusal> {
    authorised_body(s.auth_token.as_ref(), &headers, body).await?;
    Err(SharedMemoryError::Cuda.into())
}

async fn cuda_unregister(
    State(s): Shared,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Refusal> {
    authorised_body(s.auth_token.as_ref(), &headers, body).await?;
    Ok(reply(StatusCode::OK, &json!({})))
}
