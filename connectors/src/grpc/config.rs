//! How the gRPC server behaves: its deadlines, message, stream and connection limits, and its
//! token. The server reads it to listen and drain; every RPC reads it through the shared state.

use std::sync::Arc;
use std::time::Duration;

use crate::http::AuthToken;

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
    /// A connection from which nothing arrives for this long is closed; the server pings
    /// every connection at half of it, so live clients answer and stay.
    pub idle_timeout: Duration,
    /// Bytes held by request messages at once, when the server has a budget of its own
    /// ([`GrpcServer::new`](super::GrpcServer::new)); see
    /// [`GrpcServer::with_byte_budget`](super::GrpcServer::with_byte_budget) to share one.
    pub max_inflight_bytes: usize,
    /// Leave `ServerReady` open when a token is set, as `ServerLive` and `grpc.health.v1` are.
    pub health_unauthenticated: bool,
    /// When set, connections are TLS with ALPN `h2` ([`crate::tls`]).
    pub tls: Option<Arc<crate::tls::ServerTls>>,
    /// When set, `ModelInfer` calls are traced (the `traceparent` metadata read and answered).
    pub traces: Option<crate::oip::Traces>,
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
            idle_timeout: Duration::from_secs(10),
            max_inflight_bytes: 1 << 30,
            health_unauthenticated: false,
            tls: None,
            traces: None,
        }
    }
}
