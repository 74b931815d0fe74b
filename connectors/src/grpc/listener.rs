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

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use tokio_stream::{Stream, StreamExt};
use tonic::transport::server::{Connected, TcpConnectInfo, TcpIncoming};
use tracing::debug;

/// An accepted connection, counted until it closes, closed when idle.
pub(super) struct Counted {
    io: TcpStream,
    _permit: OwnedSemaphorePermit,
    idle: Duration,
    quiet: Pin<Box<Sleep>>,
}

/// The connections of `incoming`, at most `max` open at once (the others are closed on accept),
/// each closed after `idle` without a byte from its client.
pub(super) fn capped(
    incoming: TcpIncoming,
    max: usize,
    idle: Duration,
) -> impl Stream<Item = io::Result<Counted>> {
    let slots = Arc::new(Semaphore::new(max));
    incoming.filter_map(move |accepted| match accepted {
        Err(e) => Some(Err(e)),
        Ok(io) => match Arc::clone(&slots).try_acquire_owned() {
            Ok(permit) => Some(Ok(Counted {
                io,
                _permit: permit,
                idle,
                quiet: Box::pin(tokio::time::sleep(idle)),
            })),
            Err(_) => {
                debug!(peer = ?io.peer_addr().ok(), max, "gRPC connection refused at the connection cap.");
                None
            }
        },
    })
}

impl Connected for Counted {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.io.connect_info()
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
                debug!(peer = ?self.io.peer_addr().ok(), idle_ms = self.idle.as_millis() as u64, "gRPC connection idle: closing it.");
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
