//! The HTTP server: routes of the Open Inference Protocol, readiness, and each request's path
//! from body to answer under one deadline.
//!
//! Connection handling (timeouts, cap, drain) is in `listener.rs`, body admission and reading in
//! `body.rs`, token checks in `auth.rs`; this file wires them to the routes and the config.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::Router;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tracing::{debug, info};
use weir_engine::runtime::GraphRuntime;
use weir_engine::tensor::Dim;

use super::auth::{authorized, AuthToken};
use super::body::{read_body, ByteBudget, BytesPermit};
use super::error::ServeError;
use super::listener::{serve_connections, ConnectionCounters, ConnectionLimits};
use super::metrics::{GraphMetrics, MetricsSource, Outcome, ServedMetrics, ServerMetrics};
use crate::oip::{
    parse_infer_request, run_infer, InferRequest, ModelLess, OipError, ProtocolError, HEADER_LENGTH,
};

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
        }
    }
}

struct ServedGraph {
    runtime: Arc<GraphRuntime>,
    metrics: Arc<GraphMetrics>,
}

pub(super) struct ServerState {
    graphs: BTreeMap<String, ServedGraph>,
    pub(super) config: HttpConfig,
    pub(super) offline: Option<Arc<crate::offline::OfflineJobs>>,
    modelless: Option<Arc<dyn ModelLess>>,
    ready: AtomicBool,
    pub(super) metrics: ServerMetrics,
    bytes_budget: Arc<ByteBudget>,
    connections: Arc<ConnectionCounters>,
}

/// A server over running graphs; each graph is a v2 model named by the graph's name.
pub struct HttpServer {
    state: Arc<ServerState>,
}

impl HttpServer {
    /// A server for `graphs`, with `extra_metrics` appended to `/metrics`, and a byte budget of
    /// its own of `config.max_inflight_bytes`.
    pub fn new(
        graphs: Vec<Arc<GraphRuntime>>,
        config: HttpConfig,
        extra_metrics: Vec<MetricsSource>,
    ) -> HttpServer {
        let budget = ByteBudget::new(config.max_inflight_bytes);
        HttpServer::with_byte_budget(graphs, config, extra_metrics, budget)
    }

    /// As [`HttpServer::new`], charging request bodies to `budget`, which other transports of the
    /// process share (`config.max_inflight_bytes` is then unused).
    pub fn with_byte_budget(
        graphs: Vec<Arc<GraphRuntime>>,
        config: HttpConfig,
        extra_metrics: Vec<MetricsSource>,
        budget: Arc<ByteBudget>,
    ) -> HttpServer {
        let graphs: BTreeMap<String, ServedGraph> = graphs
            .into_iter()
            .map(|rt| {
                (
                    rt.plan().name.clone(),
                    ServedGraph {
                        runtime: rt,
                        metrics: Arc::default(),
                    },
                )
            })
            .collect();
        let connections = Arc::<ConnectionCounters>::default();
        let served = graphs
            .iter()
            .map(|(name, g)| ServedMetrics {
                name: name.clone(),
                metrics: Arc::clone(&g.metrics),
                runtime: Arc::clone(&g.runtime),
            })
            .collect();
        HttpServer {
            state: Arc::new(ServerState {
                graphs,
                ready: AtomicBool::new(false),
                metrics: ServerMetrics::new(served, Arc::clone(&connections), extra_metrics),
                bytes_budget: budget,
                connections,
                config,
                offline: None,
                modelless: None,
            }),
        }
    }

    /// The same server, also answering the model names `front` serves (model-less tasks).
    #[must_use]
    pub fn with_modelless(self, front: Arc<dyn ModelLess>) -> HttpServer {
        let mut state = self.state;
        if let Some(s) = Arc::get_mut(&mut state) {
            s.modelless = Some(front);
        }
        HttpServer { state }
    }

    /// The same server, also taking offline jobs (`/v2/offline`).
    #[must_use]
    pub fn with_offline(self, jobs: Arc<crate::offline::OfflineJobs>) -> HttpServer {
        let mut state = self.state;
        if let Some(s) = Arc::get_mut(&mut state) {
            s.offline = Some(jobs);
        }
        HttpServer { state }
    }

    /// The same server, with `sources` appended to `/metrics` (sources built over this server's
    /// own request metrics, [`HttpServer::graph_metrics`]).
    #[must_use]
    pub fn with_metrics(self, sources: Vec<MetricsSource>) -> HttpServer {
        let mut state = self.state;
        if let Some(s) = Arc::get_mut(&mut state) {
            s.metrics.extend(sources);
        }
        HttpServer { state }
    }

    /// Each served graph's request metrics (for `--metrics-compat triton`).
    pub fn graph_metrics(&self) -> Vec<(String, Arc<GraphMetrics>)> {
        self.state
            .graphs
            .iter()
            .map(|(name, g)| (name.clone(), Arc::clone(&g.metrics)))
            .collect()
    }

    /// A server of this one's `/metrics` alone, without auth, for a listener of its own.
    pub fn metrics_server(&self) -> super::MetricsServer {
        super::MetricsServer::new(Arc::clone(&self.state))
    }

    fn router(&self) -> Router {
        Router::new()
            .route("/v2", get(server_metadata))
            .route("/v2/health/live", get(|| async { StatusCode::OK }))
            .route("/v2/health/ready", get(server_ready))
            .route("/v2/models/{name}", get(model_metadata))
            .route(
                "/v2/models/{name}/versions/{version}",
                get(model_metadata_versioned),
            )
            .route("/v2/models/{name}/ready", get(model_ready))
            .route(
                "/v2/models/{name}/versions/{version}/ready",
                get(model_ready_versioned),
            )
            .route("/v2/models/{name}/infer", post(infer))
            .route(
                "/v2/models/{name}/versions/{version}/infer",
                post(infer_versioned),
            )
            .route(
                "/v2/offline",
                post(super::offline::submit).get(super::offline::list),
            )
            .route(
                "/v2/offline/{id}",
                get(super::offline::status).merge(delete(super::offline::cancel)),
            )
            .route("/metrics", get(metrics))
            .fallback(|| async {
                (
                    StatusCode::NOT_FOUND,
                    [(header::CONTENT_TYPE, "application/json")],
                    json!({"error": "no such endpoint"}).to_string(),
                )
            })
            .layer(axum::middleware::from_fn(crate::access_log::http::record))
            .with_state(Arc::clone(&self.state))
    }

    /// Serves on `listener` until `shutdown` completes, then stops accepting, lets in-flight
    /// requests finish for up to the drain timeout, closes what is left, and returns. Readiness
    /// is true while serving, false while draining.
    ///
    /// # Errors
    /// None today (failed accepts are retried); kept so callers need not change if one appears.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let state = Arc::clone(&self.state);
        state.ready.store(true, Ordering::Release);
        info!(addr = ?listener.local_addr().ok(), graphs = state.graphs.len(), "Serving.");
        let draining = Arc::clone(&state);
        let limits = ConnectionLimits {
            header_timeout: state.config.header_timeout,
            max_connections: state.config.max_connections,
            drain_timeout: state.config.drain_timeout,
        };
        serve_connections(
            listener,
            self.router(),
            limits,
            Arc::clone(&state.connections),
            state.config.tls.clone(),
            async move {
                shutdown.await;
                draining.ready.store(false, Ordering::Release);
                info!("Draining: no new connections, finishing requests in flight.");
            },
        )
        .await;
        Ok(())
    }
}

fn authorize(state: &ServerState, headers: &HeaderMap) -> Result<(), ServeError> {
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

fn graph<'a>(state: &'a ServerState, name: &str) -> Result<&'a ServedGraph, ServeError> {
    state
        .graphs
        .get(name)
        .ok_or_else(|| ServeError::UnknownModel(name.to_string()))
}

fn json_ok(v: Value) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

async fn server_metadata(
    State(s): State<Arc<ServerState>>,
    headers: HeaderMap,
) -> Result<Response, ServeError> {
    authorize(&s, &headers)?;
    Ok(json_ok(
        json!({"name": "weir", "version": env!("CARGO_PKG_VERSION"), "extensions": ["binary_tensor_data"]}),
    ))
}

/// 200 while serving, 503 before and while draining.
fn readiness(s: &ServerState) -> Result<StatusCode, ServeError> {
    if s.ready.load(Ordering::Acquire) {
        Ok(StatusCode::OK)
    } else {
        Err(ServeError::NotReady)
    }
}

async fn server_ready(
    State(s): State<Arc<ServerState>>,
    headers: HeaderMap,
) -> Result<StatusCode, ServeError> {
    if !s.config.health_unauthenticated {
        authorize(&s, &headers)?;
    }
    readiness(&s)
}

/// A tensor's shape as model metadata shows it (over HTTP and gRPC): -1 for the optional batch
/// dimension first, then each dimension, -1 for one only known per request.
pub(crate) fn metadata_shape(shape: &[Dim]) -> Vec<i64> {
    let mut dims = vec![-1i64];
    dims.extend(shape.iter().map(|d| match d {
        Dim::Fixed(n) => i64::try_from(*n).unwrap_or(i64::MAX),
        Dim::Dynamic => -1,
    }));
    dims
}

fn tensor_meta(name: &str, dtype: weir_engine::tensor::DType, shape: &[Dim]) -> Value {
    json!({"name": name, "datatype": dtype.oip_name(), "shape": metadata_shape(shape)})
}

async fn model_metadata(
    State(s): State<Arc<ServerState>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ServeError> {
    authorize(&s, &headers)?;
    let plan = graph(&s, &name)?.runtime.plan();
    Ok(json_ok(json!({
        "name": plan.name,
        "versions": ["1"],
        "platform": "weir_graph",
        "inputs": plan.inputs.iter().map(|i| tensor_meta(&i.name, i.ty.dtype, &i.ty.shape)).collect::<Vec<_>>(),
        "outputs": plan.outputs.iter().map(|o| tensor_meta(&o.name, o.ty.dtype, &o.ty.shape)).collect::<Vec<_>>(),
    })))
}

async fn model_metadata_versioned(
    state: State<Arc<ServerState>>,
    Path((name, _v)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, ServeError> {
    model_metadata(state, Path(name), headers).await
}

async fn model_ready(
    State(s): State<Arc<ServerState>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Result<StatusCode, ServeError> {
    authorize(&s, &headers)?;
    // A name served model-less (a task, or one of its variants) is ready while the server is,
    // as over gRPC: a request for it loads what it needs.
    let modelless = s.modelless.as_ref().is_some_and(|m| m.serves(&name));
    if !modelless {
        graph(&s, &name)?;
    }
    readiness(&s)
}

async fn model_ready_versioned(
    state: State<Arc<ServerState>>,
    Path((name, _v)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<StatusCode, ServeError> {
    model_ready(state, Path(name), headers).await
}

async fn metrics(
    State(s): State<Arc<ServerState>>,
    headers: HeaderMap,
) -> Result<Response, ServeError> {
    authorize(&s, &headers)?;
    let out = s.metrics.render();
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        out,
    )
        .into_response())
}

async fn infer_versioned(
    state: State<Arc<ServerState>>,
    Path((name, _v)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    infer(state, Path(name), headers, body).await
}

async fn infer(
    State(s): State<Arc<ServerState>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let started = Instant::now();
    let result = infer_inner(&s, &name, &headers, body).await;
    let outcome = match &result {
        Ok(_) => Outcome::Ok,
        Err(e) => e.status().1,
    };
    if let Some(g) = s.graphs.get(&name) {
        g.metrics.record(outcome, started.elapsed());
    }
    match result {
        Ok(r) => r,
        Err(e) => {
            debug!(model = %name, error = %e, "Request refused.");
            e.into_response()
        }
    }
}

/// The byte count a header carries, if sent; anything but a decimal count is a 400 naming it.
fn byte_count(
    headers: &HeaderMap,
    name: &str,
    field: &str,
) -> Result<Option<usize>, ProtocolError> {
    headers
        .get(name)
        .map(|v| {
            v.to_str()
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok())
                .ok_or_else(|| ProtocolError {
                    field: field.into(),
                    message: "not a byte count".into(),
                })
        })
        .transpose()
}

async fn infer_inner(
    s: &ServerState,
    name: &str,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, ServeError> {
    let deadline = tokio::time::Instant::now() + s.config.request_timeout;
    authorize(s, headers)?;
    let served = match (s.graphs.get(name), &s.modelless) {
        (Some(g), _) => Served::Graph(g),
        (None, Some(m)) if m.serves(name) => Served::ModelLess(m.as_ref()),
        _ => return Err(ServeError::UnknownModel(name.to_string())),
    };
    let declared = byte_count(headers, header::CONTENT_LENGTH.as_str(), "Content-Length")?;
    let mut permit = BytesPermit::new(&s.bytes_budget);
    let timeout_ms = s.config.request_timeout.as_millis() as u64;
    let bytes = read_body(
        body,
        declared,
        s.config.max_body_bytes,
        &mut permit,
        deadline,
        timeout_ms,
    )
    .await?;
    let header_length = byte_count(headers, HEADER_LENGTH, "Inference-Header-Content-Length")?;
    let request = parse_infer_request(&bytes, header_length)?;
    crate::access_log::note_request_id(request.id.as_deref());
    drop(bytes);
    // The permit is held until the answer, for the larger of the body and its parsed tensors:
    // numeric tensors are about the body's size, BYTES elements several times their text.
    let parsed = request
        .inputs
        .iter()
        .fold(0usize, |n, i| n.saturating_add(i.data.heap_bytes()));
    permit.hold(parsed)?;
    let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
    let response = match run_request(served, name, request, remaining).await {
        // The client's deadline is the configured one, however much of it the upload used.
        Err(ServeError::Protocol(OipError::Deadline { .. })) => {
            Err(OipError::Deadline { ms: timeout_ms }.into())
        }
        other => other,
    };
    drop(permit);
    response
}

/// What answers a request: a graph, or the model-less front end.
enum Served<'a> {
    Graph(&'a ServedGraph),
    ModelLess(&'a dyn ModelLess),
}

/// Runs a parsed request and writes the reply with its content headers.
async fn run_request(
    served: Served<'_>,
    name: &str,
    request: InferRequest,
    timeout: Duration,
) -> Result<Response, ServeError> {
    let (body, header_length) = match served {
        Served::Graph(g) => run_infer(&g.runtime, request, timeout).await?,
        Served::ModelLess(m) => m
            .infer(name, request, timeout)
            .await?
            .encode()
            .map_err(OipError::from)?,
    };
    let mut response = (StatusCode::OK, body).into_response();
    let h = response.headers_mut();
    match header_length {
        Some(n) => {
            h.insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("application/octet-stream"),
            );
            h.insert(HEADER_LENGTH, header::HeaderValue::from(n));
        }
        None => {
            h.insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("application/json"),
            );
        }
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use weir_engine::tensor::DType;

    use super::*;

    #[test]
    fn metadata_shows_the_batch_and_per_request_dimensions_as_minus_one() {
        let meta = tensor_meta("x", DType::F16, &[Dim::Fixed(3), Dim::Dynamic]);
        assert_eq!(
            meta,
            json!({"name": "x", "datatype": "FP16", "shape": [-1, 3, -1]})
        );
        let scalar = tensor_meta("sr", DType::I64, &[]);
        assert_eq!(scalar["shape"], json!([-1]));
    }
}
