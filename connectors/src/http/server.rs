//! The HTTP server: the routes of the Open Inference Protocol, and each request's path from body
//! to answer under one deadline.
//!
//! Connection handling (timeouts, cap, drain) is in `listener.rs`, body admission and reading in
//! `body.rs`, token checks in `auth.rs`, the reads before inference (metadata, configuration,
//! statistics, readiness) in `describe.rs`, the state all routes share in `state.rs`; this file
//! wires them to the routes. The offline-job, repository and status routes are their own files',
//! merged into this router with the state they need.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::json;
use tokio::net::TcpListener;
use tracing::{debug, info};
use weir_engine::runtime::GraphRuntime;

use super::body::{read_infer_body, ByteBudget, BytesPermit, InferBody};
use super::describe;
use super::error::ServeError;
use super::listener::{serve_connections, ConnectionCounters, ConnectionLimits};
use super::metrics::{MetricsSource, ModelMetrics, Outcome, ServerMetrics};
use super::offline::{self, OfflineState};
use super::state::{authorize, HttpConfig, ServerState};
use crate::models::control::ModelControl;
use crate::models::{LookupError, ModelTable, ModelVersion, Models};
use crate::oip::{
    infer_outputs, parse_infer_request, parse_infer_request_split, InferRequest, ModelLess,
    OipError, Placement, ProtocolError, RequestTracing, HEADER_LENGTH,
};
use crate::shared_memory::SharedMemory;

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
        let models = Arc::new(ModelTable::new(Models::from_graphs(graphs)));
        HttpServer::with_models(models, config, extra_metrics, budget)
    }

    /// A server for the models of `models` (graphs and repository models, by name and version),
    /// which the process's gRPC server may share, charging request bodies to `budget`.
    pub fn with_models(
        models: Arc<ModelTable>,
        config: HttpConfig,
        extra_metrics: Vec<MetricsSource>,
        budget: Arc<ByteBudget>,
    ) -> HttpServer {
        let graphs = Arc::new(ModelMetrics::for_models(&models.snapshot()));
        let connections = Arc::<ConnectionCounters>::default();
        HttpServer {
            state: Arc::new(ServerState {
                metrics: Arc::new(ServerMetrics::new(
                    Arc::clone(&models),
                    Arc::clone(&graphs),
                    Arc::clone(&connections),
                    extra_metrics,
                )),
                models,
                graphs,
                control: None,
                ready: AtomicBool::new(false),
                bytes_budget: budget,
                connections,
                config,
                offline: None,
                modelless: None,
                status: None,
                shared_memory: SharedMemory::off(),
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

    /// The same server, also answering the repository API (`/v2/repository/…`) through
    /// `control`; without it the index is empty and loads are refused.
    #[must_use]
    pub fn with_model_control(self, control: Arc<dyn ModelControl>) -> HttpServer {
        let mut state = self.state;
        if let Some(s) = Arc::get_mut(&mut state) {
            s.control = Some(control);
        }
        HttpServer { state }
    }

    /// The same server, serving Triton's system shared memory extension over `regions` (which
    /// the process's gRPC server may share); without it every registration is refused.
    #[must_use]
    pub fn with_shared_memory(self, regions: Arc<SharedMemory>) -> HttpServer {
        let mut state = self.state;
        if let Some(s) = Arc::get_mut(&mut state) {
            s.shared_memory = regions;
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

    /// The same server, also serving the status feed `feed` (`/v2/weir/status`, its stream) and
    /// the dashboard over it (`/ui`).
    #[must_use]
    pub fn with_status(self, feed: Arc<super::StatusFeed>) -> HttpServer {
        let mut state = self.state;
        if let Some(s) = Arc::get_mut(&mut state) {
            s.status = Some(feed);
        }
        HttpServer { state }
    }

    /// The same server, with `sources` appended to `/metrics` (sources built over this server's
    /// own request metrics, [`HttpServer::graph_metrics`]).
    #[must_use]
    pub fn with_metrics(self, sources: Vec<MetricsSource>) -> HttpServer {
        let mut state = self.state;
        if let Some(m) = Arc::get_mut(&mut state).and_then(|s| Arc::get_mut(&mut s.metrics)) {
            m.extend(sources);
        }
        HttpServer { state }
    }

    /// Each served model's request metrics over HTTP, models loaded later included (for
    /// `--metrics-compat triton`).
    pub fn graph_metrics(&self) -> Arc<ModelMetrics> {
        Arc::clone(&self.state.graphs)
    }

    /// A server of this one's `/metrics` alone, without auth, for a listener of its own.
    pub fn metrics_server(&self) -> super::MetricsServer {
        super::MetricsServer::new(
            Arc::clone(&self.state.metrics),
            self.state.config.header_timeout,
            self.state.config.drain_timeout,
        )
    }

    /// Every route, each request logged by the access log (`crate::access_log`).
    fn router(&self) -> Router {
        let router = self.base_router();
        let router = match &self.state.status {
            Some(feed) => {
                let auth_token = self.state.config.auth_token.clone();
                let status = super::status::StatusState {
                    feed: Arc::clone(feed),
                    auth_token: auth_token.clone(),
                };
                let requests = super::requests::RequestsState {
                    models: Arc::clone(&self.state.models),
                    auth_token: auth_token.clone(),
                };
                router
                    .merge(super::status::routes(status))
                    .merge(super::requests::routes(requests))
                    .merge(crate::ui::routes(auth_token))
            }
            None => router,
        };
        router.layer(axum::middleware::from_fn(crate::access_log::http::record))
    }

    fn base_router(&self) -> Router {
        Router::new()
            .route("/v2", get(describe::server_metadata))
            .route("/v2/health/live", get(|| async { StatusCode::OK }))
            .route("/v2/health/ready", get(describe::server_ready))
            .route("/v2/models/{name}", get(describe::model_metadata))
            .route(
                "/v2/models/{name}/versions/{version}",
                get(describe::model_metadata_versioned),
            )
            .route("/v2/models/{name}/config", get(describe::model_config))
            .route(
                "/v2/models/{name}/versions/{version}/config",
                get(describe::model_config_versioned),
            )
            .route("/v2/models/stats", get(describe::all_stats))
            .route("/v2/models/{name}/stats", get(describe::model_stats))
            .route(
                "/v2/models/{name}/versions/{version}/stats",
                get(describe::model_stats_versioned),
            )
            .route("/v2/models/{name}/ready", get(describe::model_ready))
            .route(
                "/v2/models/{name}/versions/{version}/ready",
                get(describe::model_ready_versioned),
            )
            .route("/v2/models/{name}/infer", post(infer))
            .route(
                "/v2/models/{name}/versions/{version}/infer",
                post(infer_versioned),
            )
            .route("/metrics", get(describe::metrics))
            .fallback(|| async {
                (
                    StatusCode::NOT_FOUND,
                    [(header::CONTENT_TYPE, "application/json")],
                    json!({"error": "no such endpoint"}).to_string(),
                )
            })
            .with_state(Arc::clone(&self.state))
            .merge(super::repository::routes(
                super::repository::RepositoryState {
                    control: self.state.control.clone(),
                    auth_token: self.state.config.auth_token.clone(),
                },
            ))
            .merge(super::shared_memory::routes(
                super::shared_memory::SharedMemoryState {
                    regions: Arc::clone(&self.state.shared_memory),
                    auth_token: self.state.config.auth_token.clone(),
                },
            ))
            .merge(offline::routes(OfflineState {
                jobs: self.state.offline.clone(),
                auth_token: self.state.config.auth_token.clone(),
                request_timeout: self.state.config.request_timeout,
            }))
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
        info!(addr = ?listener.local_addr().ok(), models = state.models.snapshot().names().count(), "Serving.");
        let draining = Arc::clone(&state);
        if let Some(feed) = &state.status {
            feed.start();
        }
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
                // Open dashboards' streams end, so they never hold up the drain.
                if let Some(feed) = &draining.status {
                    feed.stop();
                }
                info!("Draining: no new connections, finishing requests in flight.");
            },
        )
        .await;
        Ok(())
    }
}

async fn infer_versioned(
    State(s): State<Arc<ServerState>>,
    Path((name, version)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    infer_recorded(&s, &name, Some(&version), &headers, body).await
}

async fn infer(
    State(s): State<Arc<ServerState>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    infer_recorded(&s, &name, None, &headers, body).await
}

/// Runs one request and records its outcome in the model's metrics and statistics.
async fn infer_recorded(
    s: &ServerState,
    name: &str,
    version: Option<&str>,
    headers: &HeaderMap,
    body: Body,
) -> Response {
    let started = Instant::now();
    let tracing = s.config.traces.as_ref().map(|t| {
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        t.decide(header("traceparent"), header("tracestate"), "http")
    });
    if let Some(t) = &tracing {
        crate::access_log::note_trace_id(t.context.span.trace_id_hex());
    }
    let traceparent = tracing.as_ref().map(RequestTracing::traceparent);
    // Resolved once: a reload swapping the model's graphs meanwhile does not move this request.
    let lookup = s.models.snapshot().resolve(name, version).map(Arc::clone);
    let result = infer_inner(s, name, lookup.clone(), headers, body, tracing).await;
    let outcome = match &result {
        Ok(_) => Outcome::Ok,
        Err(e) => e.status().1,
    };
    if let Ok(v) = &lookup {
        s.graphs.of(name).record(outcome, started.elapsed());
        match &result {
            Ok((_, rows)) => v.stats.success(*rows, started.elapsed()),
            Err(_) => v.stats.failure(started.elapsed()),
        }
    }
    let result = result.map(|(response, _)| response);
    let mut response = match result {
        Ok(r) => r,
        Err(e) => {
            debug!(model = %name, error = %e, "Request refused.");
            e.into_response()
        }
    };
    if let Some(value) = traceparent.and_then(|t| header::HeaderValue::from_str(&t).ok()) {
        response.headers_mut().insert("traceparent", value);
    }
    response
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

/// Reads, runs and answers one request: the response and the rows it carried.
async fn infer_inner(
    s: &ServerState,
    name: &str,
    lookup: Result<Arc<ModelVersion>, LookupError>,
    headers: &HeaderMap,
    body: Body,
    tracing: Option<RequestTracing>,
) -> Result<(Response, u64), ServeError> {
    let deadline = tokio::time::Instant::now() + s.config.request_timeout;
    authorize(s, headers)?;
    let served = match (&lookup, &s.modelless) {
        (Ok(v), _) => Served::Graph(v),
        (Err(LookupError::UnknownModel(_)), Some(m)) if m.serves(name) => {
            Served::ModelLess(m.as_ref())
        }
        (Err(e), _) => return Err(e.clone().into()),
    };
    let declared = byte_count(headers, header::CONTENT_LENGTH.as_str(), "Content-Length")?;
    let mut permit = BytesPermit::new(&s.bytes_budget);
    let timeout_ms = s.config.request_timeout.as_millis() as u64;
    let header_length = byte_count(headers, HEADER_LENGTH, "Inference-Header-Content-Length")?;
    let body = read_infer_body(
        body,
        declared,
        header_length,
        s.config.max_body_bytes,
        &mut permit,
        deadline,
        timeout_ms,
    )
    .await?;
    let mut request = match body {
        InferBody::Whole(bytes) => parse_infer_request(&bytes, header_length)?,
        InferBody::Split {
            json,
            parts,
            tail_len,
        } => parse_infer_request_split(&json, parts, tail_len)?,
    };
    request.trace = tracing;
    crate::access_log::note_request_id(request.id.as_deref());
    // The permit is held until the answer, for the larger of the body and its parsed tensors
    // (numeric tensors are about the body's size, BYTES elements several times their text),
    // and for the inputs read from shared memory on top, before they are read.
    let placement = std::mem::take(&mut request.placement);
    let parsed = request
        .inputs
        .iter()
        .fold(0usize, |n, i| n.saturating_add(i.data.heap_bytes()));
    permit.hold(
        parsed
            .max(request.body_bytes)
            .saturating_add(placement.input_bytes()),
    )?;
    if !placement.inputs.is_empty() {
        s.shared_memory
            .read_inputs(&placement, &mut request, s.config.max_body_bytes)?;
    }
    let rows = served.rows(&request);
    let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
    let regions = (!placement.outputs.is_empty()).then_some((s.shared_memory.as_ref(), &placement));
    let response = match run_request(served, name, request, regions, remaining).await {
        // The client's deadline is the configured one, however much of it the upload used.
        Err(ServeError::Protocol(OipError::Deadline { .. })) => {
            Err(OipError::Deadline { ms: timeout_ms }.into())
        }
        other => other,
    };
    drop(permit);
    response.map(|r| (r, rows))
}

/// What answers a request: a served version of a model, or the model-less front end.
#[derive(Clone, Copy)]
enum Served<'a> {
    Graph(&'a ModelVersion),
    ModelLess(&'a dyn ModelLess),
}

impl Served<'_> {
    /// The rows `request` carries: its first input's leading dimension when that input has one
    /// more dimension than the graph's, else one.
    fn rows(self, request: &InferRequest) -> u64 {
        match (self, request.inputs.first()) {
            (Served::Graph(v), Some(i)) => {
                v.rows(&i.name, i.shape.len(), i.shape.first().map(|n| *n as u64))
            }
            _ => 1,
        }
    }
}

/// Runs a parsed request and writes the reply with its content headers; the outputs `regions`
/// places in shared memory are written there first.
async fn run_request(
    served: Served<'_>,
    name: &str,
    request: InferRequest,
    regions: Option<(&SharedMemory, &Placement)>,
    timeout: Duration,
) -> Result<Response, ServeError> {
    let mut answer = match served {
        Served::Graph(v) => infer_outputs(&v.runtime, request, timeout).await?,
        Served::ModelLess(m) => m.infer(name, request, timeout).await?,
    };
    if let Some((shared_memory, placement)) = regions {
        shared_memory.write_outputs(placement, &mut answer.outputs)?;
    }
    let (body, header_length) = answer.encode().map_err(OipError::from)?;
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
