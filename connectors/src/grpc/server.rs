//! The gRPC server: the listener, its limits, and the shutdown sequence (its configuration is
//! `config.rs`).
//!
//! Limits match the HTTP server's. Memory: every request message is charged against the
//! process's byte budget, the one HTTP bodies are charged to, for its bytes and for what it
//! decodes into, before it is kept (`admit.rs`); a message is at most the HTTP body cap both ways;
//! connections are capped (`listener.rs`), each carries a bounded number of concurrent RPCs, and
//! each stream a bounded number of requests in flight (`stream.rs`). HTTP/2 itself is held to
//! hyper's sizes, set here explicitly so they are stated: a 1 MiB flow-control window per stream
//! and per connection (the most unread data a connection holds), 16 KiB frames and header lists.
//!
//! Slow and silent clients: a connection from which nothing arrives for the idle timeout (the
//! HTTP header timeout) is closed (`listener.rs`), including one that never sends the HTTP/2
//! preface; the server pings every connection at half that interval, so a live client with
//! nothing to send answers the ping and stays, and one that stops answering is closed by
//! HTTP/2's keep-alive too. A message's upload must finish within the request timeout
//! (`admit.rs`).
//!
//! Shutdown: when `shutdown` completes the phase turns to draining (readiness and health say
//! not serving, open streams read no more requests), the listener stops accepting, HTTP/2
//! GOAWAY tells clients to open no new RPCs, and the server waits for the RPCs in flight (each
//! stream ends once its requests are answered) for up to the drain timeout.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tonic::transport::server::TcpIncoming;
use tonic::transport::Server;
use tracing::{info, warn};
use weir_engine::runtime::GraphRuntime;

use super::admit::{Admission, Admitted};
use super::config::GrpcConfig;
use super::health::HealthService;
use super::health_proto::health_server::HealthServer;
use super::listener::capped;
use super::proto::grpc_inference_service_server::GrpcInferenceServiceServer;
use super::service::InferService;
use super::shared::{Phase, Shared};
use super::unary::Unary;
use crate::access_log::grpc::Logged;
use crate::http::metrics::{requests_source, ModelMetrics, GRPC_FAMILIES};
use crate::http::{ByteBudget, MetricsSource};
use crate::models::control::ModelControl;
use crate::models::{ModelTable, Models};
use crate::oip::ModelLess;
use crate::shared_memory::SharedMemory;

/// Why the server stopped other than by its shutdown signal.
#[derive(Debug, thiserror::Error)]
#[error("gRPC server: {0}")]
pub struct GrpcServeError(#[from] tonic::transport::Error);

/// A gRPC server over running graphs, each a model named by the graph's name, and optionally a
/// model-less front end for the names no graph has.
pub struct GrpcServer {
    shared: Arc<Shared>,
    budget: Arc<ByteBudget>,
}

/// HTTP/2's sizes (hyper's defaults, stated).
const WINDOW_BYTES: u32 = 1 << 20;
const FRAME_BYTES: u32 = 16 << 10;
const HEADER_LIST_BYTES: u32 = 16 << 10;

impl GrpcServer {
    /// A server for `graphs`, with a byte budget of its own of `config.max_inflight_bytes`.
    pub fn new(graphs: Vec<Arc<GraphRuntime>>, config: GrpcConfig) -> GrpcServer {
        let budget = ByteBudget::new(config.max_inflight_bytes);
        GrpcServer::with_byte_budget(graphs, config, budget)
    }

    /// A server for `graphs` charging request messages to `budget`, which the process's other
    /// transports share (`config.max_inflight_bytes` is then unused).
    pub fn with_byte_budget(
        graphs: Vec<Arc<GraphRuntime>>,
        config: GrpcConfig,
        budget: Arc<ByteBudget>,
    ) -> GrpcServer {
        let models = Arc::new(ModelTable::new(Models::from_graphs(graphs)));
        GrpcServer::with_models(models, config, budget)
    }

    /// A server for the models of `models` (graphs and repository models, by name and version),
    /// which the process's HTTP server may share, charging request messages to `budget`.
    pub fn with_models(
        models: Arc<ModelTable>,
        config: GrpcConfig,
        budget: Arc<ByteBudget>,
    ) -> GrpcServer {
        let graphs = Arc::new(ModelMetrics::for_models(&models.snapshot()));
        let (phase, _) = watch::channel(Phase::Starting);
        GrpcServer {
            shared: Arc::new(Shared {
                models,
                graphs,
                control: None,
                modelless: None,
                config,
                phase,
                shared_memory: SharedMemory::off(),
                budget: Arc::clone(&budget),
            }),
            budget,
        }
    }

    /// The same server, serving Triton's system shared memory extension over `regions` (which
    /// the process's HTTP server may share; call it before [`GrpcServer::serve`]).
    #[must_use]
    pub fn with_shared_memory(self, regions: Arc<SharedMemory>) -> GrpcServer {
        let mut shared = self.shared;
        if let Some(s) = Arc::get_mut(&mut shared) {
            s.shared_memory = regions;
        }
        GrpcServer {
            shared,
            budget: self.budget,
        }
    }

    /// The same server, also answering the model names `front` serves (model-less tasks and
    /// their variants) on `ModelInfer` and `ModelStreamInfer`. Call it before [`GrpcServer::serve`]
    /// (the only place the shared state is handed out), as the HTTP server's `with_modelless`.
    #[must_use]
    pub fn with_modelless(self, front: Arc<dyn ModelLess>) -> GrpcServer {
        let mut shared = self.shared;
        if let Some(s) = Arc::get_mut(&mut shared) {
            s.modelless = Some(front);
        }
        GrpcServer {
            shared,
            budget: self.budget,
        }
    }

    /// The server's request metrics (`weir_grpc_requests_total`, `..._duration_seconds`), for
    /// the HTTP server's `/metrics`.
    pub fn metrics_source(&self) -> MetricsSource {
        requests_source(GRPC_FAMILIES, Arc::clone(&self.shared.graphs))
    }

    /// Each served model's request metrics over gRPC, models loaded later included (for
    /// `--metrics-compat triton`).
    pub fn graph_metrics(&self) -> Arc<ModelMetrics> {
        Arc::clone(&self.shared.graphs)
    }

    /// The same server, also answering `RepositoryIndex`, `RepositoryModelLoad` and
    /// `RepositoryModelUnload` through `control` (call it before [`GrpcServer::serve`]).
    #[must_use]
    pub fn with_model_control(self, control: Arc<dyn ModelControl>) -> GrpcServer {
        let mut shared = self.shared;
        if let Some(s) = Arc::get_mut(&mut shared) {
            s.control = Some(control);
        }
        GrpcServer {
            shared,
            budget: self.budget,
        }
    }

    /// Serves on `listener` until `shutdown` completes, then drains (see the module doc) and
    /// returns.
    ///
    /// # Errors
    /// When the transport fails outside a request.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), GrpcServeError> {
        let shared = self.shared;
        let cap = shared.config.max_message_bytes;
        let drain = shared.config.drain_timeout;
        info!(addr = ?listener.local_addr().ok(), models = shared.models.snapshot().names().count(), "Serving gRPC.");
        let idle = shared.config.idle_timeout.max(Duration::from_millis(2));
        let admission = Arc::new(Admission {
            budget: self.budget,
            max_message: cap,
            upload_timeout: shared.config.request_timeout,
        });
        // tonic's own cap stays behind the admission's, which answers first.
        let infer = GrpcInferenceServiceServer::new(InferService(Arc::clone(&shared)))
            .max_decoding_message_size(cap)
            .max_encoding_message_size(cap);
        let infer = Unary::new(infer, Arc::clone(&shared));
        let infer = Logged::new(Admitted::new(infer, Arc::clone(&admission)));
        let health = Logged::new(Admitted::new(
            HealthServer::new(HealthService(Arc::clone(&shared))),
            admission,
        ));
        let incoming = capped(
            TcpIncoming::from(listener).with_nodelay(Some(true)),
            shared.config.max_connections.max(1),
            idle,
            shared.config.tls.clone(),
        );
        shared.phase.send_replace(Phase::Serving);
        let (fired_tx, fired_rx) = oneshot::channel();
        let draining = Arc::clone(&shared);
        let signal = async move {
            shutdown.await;
            draining.phase.send_replace(Phase::Draining);
            info!("gRPC draining: no new RPCs, answering those in flight.");
            let _ = fired_tx.send(());
        };
        let serve = Server::builder()
            .max_concurrent_streams(shared.config.max_concurrent_streams)
            .initial_stream_window_size(WINDOW_BYTES)
            .initial_connection_window_size(WINDOW_BYTES)
            .max_frame_size(FRAME_BYTES)
            .http2_max_header_list_size(HEADER_LIST_BYTES)
            .http2_keepalive_interval(Some(idle / 2))
            .http2_keepalive_timeout(Some(idle / 2))
            .add_service(infer)
            .add_service(health)
            .serve_with_incoming_shutdown(incoming, signal);
        tokio::pin!(serve);
        tokio::select! {
            biased;
            result = &mut serve => result?,
            Ok(()) = fired_rx => match tokio::time::timeout(drain, &mut serve).await {
                Ok(result) => result?,
                Err(_) => warn!(
                    drain_ms = drain.as_millis() as u64,
                    "gRPC RPCs still open at the drain timeout; closing them."
                ),
            },
        }
        Ok(())
    }
}
