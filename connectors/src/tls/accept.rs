//! One accepted connection taken to the point where a protocol can be served on it: as is on a
//! plaintext listener, through the TLS handshake on a TLS one.
//!
//! The handshake runs under the listener's header/idle timeout, counted from the accept: a client
//! that connects and sends nothing, or stalls mid-handshake, is closed when it passes, so it holds
//! a connection slot no longer than a silent plaintext client would. Before handing the socket to
//! rustls the first byte is peeked: a TLS connection opens with a handshake record (0x16); anything
//! else is a client speaking plaintext to a TLS port. An HTTP listener answers it with a plain
//! `400` saying so (what a curl or a load balancer health check configured without TLS can show
//! its user), a gRPC listener just closes; neither leaves it hanging.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use super::{Alpn, ServerTls};

/// First byte of a TLS handshake record.
const TLS_HANDSHAKE: u8 = 0x16;
/// Longest spent answering and draining a plaintext client.
const PLAINTEXT_REFUSAL: Duration = Duration::from_secs(1);
/// Client bytes read and discarded after the plaintext refusal, at most.
const PLAINTEXT_DRAIN_BYTES: usize = 64 << 10;

/// An accepted connection, plain or encrypted.
pub(crate) enum Conn {
    /// A plaintext listener's connection.
    Plain(TcpStream),
    /// A TLS listener's connection, after its handshake.
    Tls(Box<TlsStream<TcpStream>>),
}

impl Conn {
    /// The TCP connection underneath.
    pub(crate) fn tcp(&self) -> &TcpStream {
        match self {
            Conn::Plain(s) => s,
            Conn::Tls(s) => s.get_ref().0,
        }
    }

    /// The client's address, when the socket still knows it.
    pub(crate) fn peer(&self) -> Option<SocketAddr> {
        self.tcp().peer_addr().ok()
    }
}

/// What a TLS listener does with a client that speaks plaintext to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plaintext {
    /// Answer a plain HTTP/1.1 400, then close.
    HttpError,
    /// Close.
    Close,
}

/// Why a connection never got to its protocol.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AcceptError {
    /// The handshake did not finish within the timeout.
    #[error("the TLS handshake did not finish within {0:?}")]
    Timeout(Duration),
    /// The client closed before sending anything.
    #[error("the client closed before a handshake")]
    Closed,
    /// The client spoke plaintext to a TLS port.
    #[error("the client spoke plaintext to a TLS port")]
    Plaintext,
    /// The handshake failed (an unknown CA, no client certificate, no common protocol, ...).
    #[error("the TLS handshake failed: {0}")]
    Handshake(io::Error),
}

/// `stream` ready for its protocol: as is when `tls` is `None`, else after a TLS handshake with
/// the configuration of `alpn`, finished within `timeout` (see the module docs).
///
/// # Errors
/// When the handshake times out or fails, or the client speaks plaintext or closes; the
/// connection is closed then.
pub(crate) async fn accept(
    stream: TcpStream,
    tls: Option<(&ServerTls, Alpn)>,
    timeout: Duration,
    plaintext: Plaintext,
) -> Result<Conn, AcceptError> {
    let Some((tls, alpn)) = tls else {
        return Ok(Conn::Plain(stream));
    };
    let config = tls.config(alpn);
    let handshake = async move {
        let mut first = [0u8; 1];
        match stream.peek(&mut first).await {
            Ok(0) => return Err(AcceptError::Closed),
            Ok(_) if first[0] == TLS_HANDSHAKE => {}
            Ok(_) => {
                if plaintext == Plaintext::HttpError {
                    let _ = tokio::time::timeout(PLAINTEXT_REFUSAL, refuse_plaintext(stream)).await;
                }
                return Err(AcceptError::Plaintext);
            }
            Err(e) => return Err(AcceptError::Handshake(e)),
        }
        TlsAcceptor::from(config)
            .accept(stream)
            .await
            .map(|s| Conn::Tls(Box::new(s)))
            .map_err(AcceptError::Handshake)
    };
    tokio::time::timeout(timeout, handshake)
        .await
        .unwrap_or(Err(AcceptError::Timeout(timeout)))
}

/// Tells a plaintext HTTP client it reached a TLS port, then discards what it sent (bounded),
/// so closing does not reset the connection before it reads the answer.
async fn refuse_plaintext(mut stream: TcpStream) {
    let body = "{\"error\":\"this port speaks TLS: use https\"}";
    let answer = format!(
        "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    if stream.write_all(answer.as_bytes()).await.is_err() || stream.shutdown().await.is_err() {
        return;
    }
    let mut sink = [0u8; 4096];
    let mut drained = 0usize;
    while drained < PLAINTEXT_DRAIN_BYTES {
        match stream.read(&mut sink).await {
            Ok(n) if n > 0 => drained += n,
            _ => return,
        }
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Conn::Plain(s) => s.is_write_vectored(),
            Conn::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_flush(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
