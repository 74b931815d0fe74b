//! The state every route of the HTTP server shares, and the checks they all make: the bearer
//! token, which served version a name reaches, readiness.
//!
//! Kept apart from the routes so that the request path (`server.rs`) and the reads before it
//! (`describe.rs`) each depend on it and not on one another.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::auth::{authorized, AuthToken};
use super::body::ByteBudget;
use super::error::ServeError;
use super::listener::ConnectionCounters;
use super::metrics::{ModelMetrics, ServerMetrics};
use crate::models::control::ModelControl;
use crate::models::ModelTable;
use crate::oip::ModelLess;

/// How the server behaves.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Longest a request may take, its upload included: a body still unfinished at the deadline
    /// gets 408, an answer not ready by it 504.
    pub request_timeout: Duration,
    /// Largest request body accepted (413 above it).
    pub max_body_bytes: usize,
    /// Body bytes held by all requests at once; past it new requests get 503 with `Retry-After`.
    pub max_inflight_bytes: usize,
    /// Longest a client may take to send a request's headers before its connection is closed,
    /// counted from when the connection is ready for a request (idle kept-alive ones included).
    pub header_timeout: Duration,
    /// Connections open at once; past it a connection is answered 503 and closed.
    pub max_connections: u32,
    /// After the shutdown signal, longest to wait for requests in flight before closing their
    /// connections.
    pub drain_timeout: Duration,
    /// When set, every endpoint but liveness needs `Authorization: Bearer <token>`.
    pub auth_token: Option<AuthToken>,
    /// Leave readiness (`/v2/health/ready`) open when a token is set, as liveness always is.
    pub health_unauthenticated: bool,
    /// When set, connections are TLS ([`crate::tls`]).
    pub tls: Option<Arc<crate::tls::ServerTls>>,
    /// When set, infer requests are traced: the client's `traceparent` is read, the response
    /// carries the request's, and sampled requests' spans are exported.
    pub traces: Option<crate::oip::Traces>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            request_timeout: Duration::from_secs(30),
            max_body_bytes: 64 << 20,
            max_inflight_bytes: 1 << 30,
            header_timeout: Duration::from_secs(10),
            max_connections: 1024,
            drain_timeout: Duration::from_secs(30),
            auth_token: None,
            health_unauthenticated: false,
            tls: None,
            traces: None,
        }
    }
}

/// What every route of the server reads: the models, the front ends beside them, the config.
pub(super) struct ServerState {
    pub(super) models: Arc<ModelTable>,
    /// Each model's request metrics over HTTP (its versions share them).
    pub(super) graphs: Arc<ModelMetrics>,
    pub(super) control: Option<Arc<dyn ModelControl>>,
    pub(super) config: HttpConfig,
    pub(super) offline: Option<Arc<crate::offline::OfflineJobs>>,
    pub(super) modelless: Option<Arc<dyn ModelLess>>,
    /// The status feed and `/ui`, when on.
    pub(super) status: Option<Arc<super::StatusFeed>>,
    pub(super) ready: AtomicBool,
    pub(super) metrics: Arc<ServerMetrics>,
    pub(super) bytes_budget: Arc<ByteBudget>,
    pub(super) connections: Arc<ConnectionCounters>,
    /// The registered shared memory regions (off unless the server was given a registry).
    pub(super) shared_memory: Arc<crate::shared_memory::SharedMemory>,
}

pub(super) fn authorize(state: &ServerState, headers: &HeaderMap) -> Result<(), ServeError> {
    state.authorize(headers)
}

impl ServerState {
    /// Ok when no token is configured or the request carries it.
    pub(super) fn authorize(&self, headers: &HeaderMap) -> Result<(), ServeError> {
        if authorized(self.config.auth_token.as_ref(), headers) {
            Ok(())
        } else {
            Err(ServeError::Unauthorized)
        }
    }
}

pub(super) fn json_ok(v: Value) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

/// 200 while serving, 503 before and while draining.
pub(super) fn readiness(s: &ServerState) -> Result<StatusCode, ServeError> {
    if s.ready.load(Ordering::Acquire) {
        Ok(StatusCode::OK)
    } else {
        Err(ServeError::NotReady)
    }
}

/// As [`readiness`], and 503 naming the cause while a served model cannot answer (a node with
/// no live replica): a balancer sends nothing here until it can.
pub(super) fn models_readiness(
    s: &ServerState,
    name: Option<&str>,
) -> Result<StatusCode, ServeError> {
    readiness(s)?;
    let models = s.models.snapshot();
    let unready = match name {
        None => models.unready(),
        Some(name) => models
            .resolve(name, None)
            .ok()
            .and_then(|v| v.runtime.unready()),
    };
    match unready {
        Some(why) => Err(ServeError::ModelUnready(why)),
        None => Ok(StatusCode::OK),
    }
}
