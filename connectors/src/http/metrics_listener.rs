//! A listener of its own for `/metrics` (`weir serve --metrics-addr`), apart from the API: a
//! Prometheus scraper reaches it without the API's bearer token, and the port can be exposed to
//! the monitoring network only. It serves the same exposition as the API's `/metrics` and nothing
//! else (404), in plaintext (scrapers inside a cluster rarely hold client certificates; bind it to
//! an address only they reach), through the same accept loop as the API (header timeout, a
//! small cap on connections, drain), with no access log (one line per scrape would drown the
//! requests').

use std::future::Future;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use tokio::net::TcpListener;
use tracing::info;

use super::listener::{serve_connections, ConnectionLimits};
use super::metrics::ServerMetrics;

/// Connections the metrics listener holds open at once: a few scrapers, never a crowd.
const MAX_METRICS_CONNECTIONS: u32 = 64;

/// The server of `/metrics` alone ([`super::HttpServer::metrics_server`]).
pub struct MetricsServer {
    metrics: Arc<ServerMetrics>,
    header_timeout: std::time::Duration,
    drain_timeout: std::time::Duration,
}

impl MetricsServer {
    /// A listener rendering `metrics`, with the API's header and drain timeouts.
    pub(super) fn new(
        metrics: Arc<ServerMetrics>,
        header_timeout: std::time::Duration,
        drain_timeout: std::time::Duration,
    ) -> MetricsServer {
        MetricsServer {
            metrics,
            header_timeout,
            drain_timeout,
        }
    }

    /// Serves `/metrics` on `listener` until `shutdown` completes, then drains as the API does.
    pub async fn serve(self, listener: TcpListener, shutdown: impl Future<Output = ()>) {
        let limits = ConnectionLimits {
            header_timeout: self.header_timeout,
            max_connections: MAX_METRICS_CONNECTIONS,
            drain_timeout: self.drain_timeout,
        };
        info!(addr = ?listener.local_addr().ok(), "Serving metrics.");
        let router = Router::new()
            .route("/metrics", get(metrics))
            .fallback(|| async {
                (
                    StatusCode::NOT_FOUND,
                    [(header::CONTENT_TYPE, "application/json")],
                    "{\"error\":\"this port serves /metrics only\"}",
                )
            })
            .with_state(Arc::clone(&self.metrics));
        serve_connections(listener, router, limits, Arc::default(), None, shutdown).await;
    }
}

async fn metrics(State(m): State<Arc<ServerMetrics>>) -> impl IntoResponse {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        m.render(),
    )
}
