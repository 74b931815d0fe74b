//! The accept loop: HTTP/1.1 connections served by hyper with a header-read timeout, a cap on
//! open connections, and a bounded drain.
//!
//! `axum::serve` offers none of these knobs, so connections are accepted here and handed to
//! hyper's connection builder with the axum `Router` as the service. Each open connection holds
//! a semaphore permit; past the cap a connection is answered with a canned 503 and closed (a few
//! such refusals at once, the rest closed unanswered), so a flood of sockets cannot exhaust file
//! descriptors or starve health checks once it subsides. On shutdown the loop stops accepting,
//! asks every connection to finish its request in flight and close, and after the drain timeout
//! closes whatever is left; getting every permit back is how it knows all connections closed.
//!
//! With TLS, each connection's handshake runs in its own task, holding the connection's permit,
//! under the header timeout ([`crate::tls`]); hyper then serves the decrypted stream. Every request
//! carries its client's address as axum's `ConnectInfo<SocketAddr>` (the access log reads it).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tracing::{debug, info, warn};

use crate::tls::{accept, Alpn, Plaintext, ServerTls};

/// Refusals answered with a 503 at once; past this, refused connections are closed unanswered.
const MAX_REFUSALS_ANSWERING: usize = 64;
/// Longest a refusal spends writing its 503 and discarding what the client sent.
const REFUSAL_TIMEOUT: Duration = Duration::from_secs(1);
/// Pause after a failed accept (file descriptors exhausted), so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Connection-level limits.
#[derive(Debug, Clone, Copy)]
pub(super) struct ConnectionLimits {
    pub header_timeout: Duration,
    pub max_connections: u32,
    pub drain_timeout: Duration,
}

/// Connection counters for `/metrics`.
#[derive(Debug, Default)]
pub(super) struct ConnectionCounters {
    /// Connections accepted and served.
    pub accepted: AtomicU64,
    /// Served connections since closed.
    pub closed: AtomicU64,
    /// Connections refused at the cap.
    pub refused: AtomicU64,
}

/// Where a connection task stands; moves only forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    Serving,
    Draining,
    Closing,
}

/// Serves `router` on `listener` until `shutdown` completes, then drains (see the module docs).
pub(super) async fn serve_connections(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    counters: Arc<ConnectionCounters>,
    tls: Option<Arc<ServerTls>>,
    shutdown: impl Future<Output = ()>,
) {
    let max = limits.max_connections.max(1);
    let permits = Arc::new(Semaphore::new(max as usize));
    let refusals = Arc::new(Semaphore::new(MAX_REFUSALS_ANSWERING));
    let (phase_tx, phase_rx) = watch::channel(Phase::Serving);
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    debug!(error = %e, "Accept failed; backing off.");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            counters.refused.fetch_add(1, Ordering::Relaxed);
            debug!(
                max_connections = max,
                peer = ?stream.peer_addr().ok(),
                "Connection refused at the limit."
            );
            if let Ok(slot) = Arc::clone(&refusals).try_acquire_owned() {
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(REFUSAL_TIMEOUT, refuse(stream, max)).await;
                    drop(slot);
                });
            }
            continue;
        };
        let router = router.clone();
        let builder = builder.clone();
        let tls = tls.clone();
        let mut phase = phase_rx.clone();
        let counters = Arc::clone(&counters);
        counters.accepted.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(async move {
            let tls = tls.as_deref().map(|t| (t, Alpn::Http1));
            let stream =
                match accept(stream, tls, limits.header_timeout, Plaintext::HttpError).await {
                    Ok(s) => s,
                    Err(e) => {
                        debug!(error = %e, "Connection closed before serving.");
                        counters.closed.fetch_add(1, Ordering::Relaxed);
                        drop(permit);
                        return;
                    }
                };
            let service = WithPeer {
                inner: TowerToHyperService::new(router),
                peer: stream.peer(),
            };
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            let mut draining = false;
            loop {
                tokio::select! {
                    result = conn.as_mut() => {
                        if let Err(e) = result {
                            debug!(error = %e, "Connection ended with an error.");
                        }
                        break;
                    }
                    changed = phase.changed() => {
                        let now = *phase.borrow_and_update();
                        if changed.is_err() || now == Phase::Closing {
                            break;
                        }
                        if now == Phase::Draining && !draining {
                            draining = true;
                            conn.as_mut().graceful_shutdown();
                        }
                    }
                }
            }
            counters.closed.fetch_add(1, Ordering::Relaxed);
            drop(permit);
        });
    }
    drop(listener);
    let _ = phase_tx.send(Phase::Draining);
    let all_closed = permits.acquire_many(max);
    if tokio::time::timeout(limits.drain_timeout, all_closed)
        .await
        .is_err()
    {
        warn!(
            open = max as usize - permits.available_permits(),
            drain_timeout_ms = limits.drain_timeout.as_millis() as u64,
            "Drain timeout passed; closing the connections left."
        );
        let _ = phase_tx.send(Phase::Closing);
    } else {
        info!("Drained: every connection closed.");
    }
}

/// The router as hyper's service, each request carrying its client's address.
struct WithPeer {
    inner: TowerToHyperService<Router>,
    peer: Option<SocketAddr>,
}

impl hyper::service::Service<hyper::Request<Incoming>> for WithPeer {
    type Response = <TowerToHyperService<Router> as hyper::service::Service<
        hyper::Request<Incoming>,
    >>::Response;
    type Error =
        <TowerToHyperService<Router> as hyper::service::Service<hyper::Request<Incoming>>>::Error;
    type Future =
        <TowerToHyperService<Router> as hyper::service::Service<hyper::Request<Incoming>>>::Future;

    fn call(&self, mut request: hyper::Request<Incoming>) -> Self::Future {
        if let Some(peer) = self.peer {
            request.extensions_mut().insert(ConnectInfo(peer));
        }
        self.inner.call(request)
    }
}

/// Answers a connection past the cap with 503 and `Retry-After`, then closes it.
async fn refuse(mut stream: TcpStream, max: u32) {
    let body =
        format!("{{\"error\":\"connections: the server holds its limit of {max}, retry later\"}}");
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    if stream.write_all(head.as_bytes()).await.is_err()
        || stream.write_all(body.as_bytes()).await.is_err()
        || stream.shutdown().await.is_err()
    {
        return;
    }
    // Discard what the client sent, so closing does not reset the connection before it reads
    // the answer; bounded by the caller's timeout and this buffer.
    let mut sink = [0u8; 4096];
    while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
}
