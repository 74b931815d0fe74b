//! The offline-job endpoints: `POST /v2/offline` submits a job, `GET /v2/offline` lists them,
//! `GET /v2/offline/{id}` reads one, `DELETE /v2/offline/{id}` cancels it (see
//! [`crate::offline`]). Behind the same bearer token as inference; a server started without an
//! offline folder answers 404 naming the flag.
//!
//! The routes carry a state of their own ([`OfflineState`]: the jobs, the token, the upload
//! deadline), and the server merges them into its router, so they read nothing of the server's.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::Router;
use serde_json::{json, Value};

use super::auth::{authorized, AuthToken};
use super::error::ServeError;
use crate::echo::cap_error;
use crate::offline::{OfflineError, OfflineJobs, MAX_SUBMISSION_BYTES};

/// What the offline endpoints read.
pub(super) struct OfflineState {
    /// The jobs; `None` while offline jobs are off.
    pub(super) jobs: Option<Arc<OfflineJobs>>,
    /// The server's bearer token, if it has one.
    pub(super) auth_token: Option<AuthToken>,
    /// Longest a submission's upload may take.
    pub(super) request_timeout: Duration,
}

/// `/v2/offline` and `/v2/offline/{id}`, over `state`.
pub(super) fn routes(state: OfflineState) -> Router {
    Router::new()
        .route("/v2/offline", post(submit).get(list))
        .route("/v2/offline/{id}", get(status).merge(delete(cancel)))
        .with_state(Arc::new(state))
}

fn reply(status: StatusCode, body: Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn error(status: StatusCode, message: String) -> Response {
    reply(status, json!({ "error": cap_error(message) }))
}

fn failed(e: OfflineError) -> Response {
    let status = match e {
        OfflineError::Field { .. } => StatusCode::BAD_REQUEST,
        OfflineError::UnknownJob(_) => StatusCode::NOT_FOUND,
        OfflineError::TooManyJobs(_) => StatusCode::TOO_MANY_REQUESTS,
    };
    let mut response = error(status, e.to_string());
    if status == StatusCode::TOO_MANY_REQUESTS {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
    }
    response
}

/// The jobs, once the caller is authorised and offline jobs are on.
fn jobs(s: &OfflineState, headers: &HeaderMap) -> Result<Arc<OfflineJobs>, Box<Response>> {
    if !authorized(s.auth_token.as_ref(), headers) {
        return Err(Box::new(ServeError::Unauthorized.into_response()));
    }
    s.jobs.clone().ok_or_else(|| {
        Box::new(error(
            StatusCode::NOT_FOUND,
            "offline jobs are off: start `weir serve` with --offline-dir".to_string(),
        ))
    })
}

async fn submit(State(s): State<Arc<OfflineState>>, headers: HeaderMap, body: Body) -> Response {
    let jobs = match jobs(&s, &headers) {
        Ok(j) => j,
        Err(r) => return *r,
    };
    let read = axum::body::to_bytes(body, MAX_SUBMISSION_BYTES);
    let bytes = match tokio::time::timeout(s.request_timeout, read).await {
        Ok(Ok(b)) => b,
        Ok(Err(_)) => {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("body: a job submission is at most {MAX_SUBMISSION_BYTES} bytes"),
            )
        }
        Err(_) => {
            return error(
                StatusCode::REQUEST_TIMEOUT,
                "body: not received within the request deadline".to_string(),
            )
        }
    };
    match jobs.submit(&bytes) {
        Ok(status) => reply(StatusCode::ACCEPTED, status),
        Err(e) => failed(e),
    }
}

async fn list(State(s): State<Arc<OfflineState>>, headers: HeaderMap) -> Response {
    match jobs(&s, &headers) {
        Ok(j) => reply(StatusCode::OK, j.list()),
        Err(r) => *r,
    }
}

async fn status(
    State(s): State<Arc<OfflineState>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    match jobs(&s, &headers).map(|j| j.status(&id)) {
        Ok(Ok(status)) => reply(StatusCode::OK, status),
        Ok(Err(e)) => failed(e),
        Err(r) => *r,
    }
}

async fn cancel(
    State(s): State<Arc<OfflineState>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    match jobs(&s, &headers).map(|j| j.cancel(&id)) {
        Ok(Ok(status)) => reply(StatusCode::OK, status),
        Ok(Err(e)) => failed(e),
        Err(r) => *r,
    }
}
