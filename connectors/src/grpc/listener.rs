//! The gRPC listener's connection cap: at most `max_connections` connections open at once (the
//! HTTP server's `--max-connections`); a connection past it is closed as soon as it is accepted,
//! before a byte of it is read. Each admitted connection holds a permit that its socket releases
//! when it closes, so the count never drifts.
//!
//! A connection from which nothing arrives for the idle timeout is closed: the socket's read
//! fails with `TimedOut`, and hyper drops the connection. This catches what HTTP/2's keep-alive
//! cannot, a client that never sends the preface (keep-alive starts after the handshake). A live
//! client is never idle that long: the server pings each connection at half the timeout and the
//! client's acknowledgement is a read.
//!
//! Together with the per-connection cap on concurrent RPCs and the byte budget, this bounds what
//! clients can make the server hold at once.
//!
//! With TLS the handshakes run beside the accept loop, one task each holding the connection's
//! permit, under the idle timeout ([`crate::tls`]): a slow handshake never delays the next accept.
//! tonic is handed connections whose handshake finished, through a channel it drains as it
//! serves; when it stops (shutdown) the channel closes, the accept loop ends and the listener with
//! it. The ALPN offered is `h2`, which gRPC clients require of a TLS server.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::transport::server::{Connected, TcpConnectInfo, TcpIncoming};
use tracing::debug;

use crate::tls::{accept, Alpn, Conn, Plaintext, ServerTls};

/// Connections whose handshake finished and tonic has not taken yet, at most.
const HANDED_OVER: usize = 64;

/// An accepted connection, counted until it closes, closed when idle.
pub(super) struct Counted {
    io: Conn,
    _permit: OwnedSemaphorePermit,
    idle: Duration,
    quiet: Pin<Box<Sleep>>,
}

impl Counted {
    fn new(io: Conn, permit: OwnedSemaphorePermit, idle: Duration) -> Counted {
        Counted {
            io,
            _permit: permit,
            idle,
            quiet: Box::pin(tokio::time::sleep(idle)),
        }
    }
}

/// The connections the server is handed.
pub(super) type Connections = Pin<Box<dyn Stream<Item = io::Result<Counted>> + Send>>;

/// The connections of `incoming`, at most `max` open at once (the others are closed on accept),
/// each closed after `idle` without a byte from its client; with `tls`, each after its handshake
/// (see the module docs).
pub(super) fn capped(
    incoming: TcpIncoming,
    max: usize,
    idle: Duration,
    tls: Option<Arc<ServerTls>>,
) -> Connections {
    let slots = Arc::new(Semaphore::new(max));
    let Some(tls) = tls else {
        return Box::pin(incoming.filter_map(move |accepted| match accepted {
            Err(e) => Some(Err(e)),
            Ok(io) => match Arc::clone(&slots).try_acquire_owned() {
                Ok(permit) => Some(Ok(Counted::new(Conn::Plain(io), permit, idle))),
                Err(_) => {
                    debug!(peer = ?io.peer_addr().ok(), max, "gRPC connection refused at the connection cap.");
                    None
                }
            },
        }));
    };
    let (tx, rx) = mpsc::channel(HANDED_OVER);
    tokio::spawn(async move {
        let mut incoming = incoming;
        loop {
            let accepted = tokio::select! {
                next = incoming.next() => match next {
                    Some(a) => a,
                    None => break,
                },
                () = tx.closed() => break,
            };
            let io = match accepted {
                Ok(io) => io,
                Err(e) => {
                    if tx.send(Err(e)).await.is_err() {
                        break;
                    }
                    continue;
                }
            };
            let Ok(permit) = Arc::clone(&slots).try_acquire_owned() else {
                debug!(peer = ?io.peer_addr().ok(), max, "gRPC connection refused at the connection cap.");
                continue;
            };
            let (tx, tls) = (tx.clone(), Arc::clone(&tls));
            tokio::spawn(async move {
                match accept(io, Some((&tls, Alpn::H2)), idle, Plaintext::Close).await {
                    Ok(conn) => {
                        let _ = tx.send(Ok(Counted::new(conn, permit, idle))).await;
                    }
                    Err(e) => debug!(error = %e, "gRPC connection closed before serving."),
                }
            });
        }
    });
    Box::pin(ReceiverStream::new(rx))
}

impl Connected for Counted {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.io.tcp().connect_info()
    }
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) if buf.filled().len() > before => {
                let next = Instant::now() + self.idle;
                self.quiet.as_mut().reset(next);
                Poll::Ready(Ok(()))
            }
            Poll::Pending if self.quiet.as_mut().poll(cx).is_ready() => {
                debug!(peer = ?self.io.peer(), idle_ms = self.idle.as_millis() as u64, "gRPC connection idle: closing it.");
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "nothing from the client for the idle timeout",
                )))
            }
            other => other,
        }
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
