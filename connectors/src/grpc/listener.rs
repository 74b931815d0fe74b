//! The gRPC listener's connection cap: at most `max_connections` connections open at once (the
//! HTTP server's `--max-connections`); a connection past it is closed as soon as it is accepted,
//! before a byte of it is read. Each admitted connection holds a permit that its socket releases
//! when it closes, so the count never drifts.
//!
//! Together with the per-connection cap on concurrent RPCs and the message size cap, this bounds
//! what clients can make the server hold at once.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_stream::{Stream, StreamExt};
use tonic::transport::server::{Connected, TcpConnectInfo, TcpIncoming};
use tracing::debug;

/// An accepted connection, counted until it closes.
pub(super) struct Counted {
    io: TcpStream,
    _permit: OwnedSemaphorePermit,
}

/// The connections of `incoming`, at most `max` open at once; the others are closed on accept.
pub(super) fn capped(incoming: TcpIncoming, max: usize) -> impl Stream<Item = io::Result<Counted>> {
    let slots = Arc::new(Semaphore::new(max));
    incoming.filter_map(move |accepted| match accepted {
        Err(e) => Some(Err(e)),
        Ok(io) => match Arc::clone(&slots).try_acquire_owned() {
            Ok(permit) => Some(Ok(Counted {
                io,
                _permit: permit,
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
        Pin::new(&mut self.io).poll_read(cx, buf)
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
