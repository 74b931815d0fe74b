//! The gRPC server: its configuration, the listener, and the shutdown sequence.
//!
//! Limits match the HTTP server's: a message is at most the HTTP body cap both ways (tonic
//! refuses a larger one with OUT_OF_RANGE before decoding it), connections are capped
//! (`listener.rs`), each connection carries a bounded number of concurrent RPCs, and each stream
//! a bounded number of requests in flight (`stream.rs`).
//!
//! Shutdown: when `shutdown` completes the phase turns to draining (readiness and health say
//! not serving, open streams read no more requests), the listener stops accepting, HTTP/2
//! GOAWAY tells clients to open no new RPCs, and the server waits for the RPCs in flight (each
//! stream ends once its requests are answered) for up to the drain timeout.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tonic::transport::server::TcpIncoming;
use tonic::transport::Server;
use tracing::{info, warn};
use weir_engine::runtime::GraphRuntime;

use super::health::HealthService;
use super::health_proto::health_server::HealthServer;
use super::listener::capped;
use super::proto::grpc_inference_service_server::GrpcInferenceServiceServer;
use super::service::{InferService, Phase, Served, Shared};
use crate::http::metrics::{requests_source, GRPC_FAMILIES};
use crate::http::{AuthToken, MetricsSource};

/// How the gRPC server behaves.
#[derive(Debug, Clone)]
pub struct GrpcConfig {
    /// Longest a request may wait for its answer (DEADLINE_EXCEEDED after it).
    pub request_timeout: Duration,
    /// Largest message accepted or sent, in bytes (the HTTP body cap).
    pub max_message_bytes: usize,
    /// When set, every RPC but liveness and health needs `authorization: Bearer <token>`.
    pub auth_token: Option<AuthToken>,
    /// Requests running at once on one `ModelStreamInfer` stream; the next is read when one is
    /// answered.
    pub stream_in_flight: usize,
    /// RPCs open at once on one connection (HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS`).
    pub max_concurrent_streams: u32,
    /// Connections open at once; one past it is closed on accept.
    pub max_connections: usize,
    /// After the shutdown signal, longest to wait for RPCs in flight before closing.
    pub drain_timeout: Duration,
}

impl Default for GrpcConfig {
    fn default() -> Self {
        GrpcConfig {
            request_timeout: Duration::from_secs(30),
            max_message_bytes: 64 << 20,
            auth_token: None,
            stream_in_flight: 64,
            max_concurrent_streams: 256,
            max_connections: 1024,
            drain_timeout: Duration::from_secs(30),
        }
    }
}

/// Why the server stopped other than by its shutdown signal.
#[derive(Debug, thiserror::Error)]
#[error("gRPC server: {0}")]
pub struct GrpcServeError(#[from] tonic::transport::Error);

/// A gRPC server over running graphs; each graph is a model named by the graph's name.
pub struct GrpcServer {
    shared: Arc<Shared>,
}

impl GrpcServer {
    /// A server for `graphs`.
    pub fn new(graphs: Vec<Arc<GraphRuntime>>, config: GrpcConfig) -> GrpcServer {
        let graphs = graphs
            .into_iter()
            .map(|runtime| {
                (
                    runtime.plan().name.clone(),
                    Served {
                        runtime,
                        metrics: Arc::default(),
                    },
                )
            })
            .collect::<BTreeMap<_, _>>();
        let (phase, _) = watch::channel(Phase::Starting);
        GrpcServer {
            shared: Arc::new(Shared {
                graphs,
                config,
                phase,
            }),
        }
    }

    /// The server's request metrics (`weir_grpc_requests_total`, `..._duration_seconds`), for
    /// the HTTP server's `/metrics`.
    pub fn metrics_source(&self) -> MetricsSource {
        requests_source(
            GRPC_FAMILIES,
            self.shared
                .graphs
                .iter()
                .map(|(name, g)| (name.clone(), Arc::clone(&g.metrics)))
                .collect(),
        )
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
        info!(addr = ?listener.local_addr().ok(), graphs = shared.graphs.len(), "Serving gRPC.");
        let infer = GrpcInferenceServiceServer::new(InferService(Arc::clone(&shared)))
            .max_decoding_message_size(cap)
            .max_encoding_message_size(cap);
        let health = HealthServer::new(HealthService(Arc::clone(&shared)));
        let incoming = capped(
            TcpIncoming::from(listener).with_nodelay(Some(true)),
            shared.config.max_connections.max(1),
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
