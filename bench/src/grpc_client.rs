//! The benchmarks' gRPC client: unary `inference.GRPCInferenceService/ModelInfer` calls on one
//! HTTP/2 connection, made the way the HTTP experiment's client makes its requests, so the two
//! protocols are timed on equal terms.
//!
//! Each client owns a thread (the closed loop's, `client::timed_loops`) and a current-thread
//! runtime that drives its connection (the `h2` crate, which hyper and tonic use): a call is
//! written and its reply read on the thread that times it, as gRPC's synchronous stubs
//! (`tritonclient.grpc`, `perf_analyzer`) make a call on the calling thread and the HTTP client
//! writes and reads its socket. A call's HEADERS, its message and END_STREAM are queued together,
//! so they leave in one write, as gRPC's C core writes a unary call's batch; the reply is the
//! message between the response headers and the trailers, checked for `grpc-status` 0.
//!
//! It replaces tonic's `Channel` on a two-worker runtime, which hands every call to a buffer task
//! and hyper's connection and body tasks, wakes the caller from another thread, and sends a call
//! in three writes (HEADERS, the message, an empty END_STREAM frame), each waking the server
//! before the call can run. Profiled on the small model (`benchmarks/grpc/README.md`), that
//! client took five times the HTTP client's thread switches per request: it timed itself as much
//! as the server.

use anyhow::{anyhow, bail, Context as _, Result};
use bytes::{BufMut, Bytes, BytesMut};
use h2::client::SendRequest;
use prost::Message;
use tonic::codegen::http::{Method, Request};
use weir_connectors::grpc::proto::{ModelInferRequest, ModelInferResponse};

use crate::client::{timed_loops, Measured};

/// gRPC's message prefix: a compression flag and a big-endian length.
const PREFIX: usize = 5;

/// The largest reply a client reads.
const MAX_REPLY: usize = 64 << 20;

/// A gRPC client on a connection of its own, driven by its own runtime (see the module doc).
pub(crate) struct GrpcClient {
    rt: tokio::runtime::Runtime,
    send: SendRequest<Bytes>,
    uri: String,
}

/// `message` with gRPC's prefix.
fn framed(message: &impl Message) -> Bytes {
    let len = message.encoded_len();
    let mut buf = BytesMut::with_capacity(PREFIX + len);
    buf.put_u8(0);
    buf.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
    message
        .encode(&mut buf)
        .expect("the buffer holds the encoded length");
    buf.freeze()
}

impl GrpcClient {
    /// A client connected to `addr` (`host:port`, plain HTTP/2, `TCP_NODELAY` on).
    pub(crate) fn connect(addr: &str) -> Result<GrpcClient> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let send = rt.block_on(async {
            let tcp = tokio::net::TcpStream::connect(addr).await?;
            tcp.set_nodelay(true)?;
            let (send, connection) = h2::client::Builder::new()
                .initial_window_size(1 << 20)
                .initial_connection_window_size(1 << 20)
                .handshake(tcp)
                .await
                .context("HTTP/2 handshake")?;
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    eprintln!("gRPC client connection: {e}");
                }
            });
            Ok::<_, anyhow::Error>(send)
        })?;
        Ok(GrpcClient {
            rt,
            send,
            uri: format!("http://{addr}/inference.GRPCInferenceService/ModelInfer"),
        })
    }

    /// Sends `message` (a framed `ModelInferRequest`) and reads the reply, which must have
    /// outputs.
    pub(crate) fn infer(&mut self, message: &Bytes) -> Result<()> {
        let request = Request::builder()
            .method(Method::POST)
            .uri(self.uri.as_str())
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())?;
        let send = self.send.clone();
        let message = message.clone();
        let reply = self.rt.block_on(async move {
            let mut send = send.ready().await?;
            let (response, mut stream) = send.send_request(request, false)?;
            stream.send_data(message, true)?;
            let response = response.await?;
            let status = grpc_status(response.headers());
            let mut body = response.into_body();
            let mut reply = BytesMut::new();
            while let Some(chunk) = body.data().await {
                let chunk = chunk?;
                body.flow_control().release_capacity(chunk.len())?;
                if reply.len() + chunk.len() > PREFIX + MAX_REPLY {
                    bail!("a reply over {MAX_REPLY} bytes");
                }
                reply.extend_from_slice(&chunk);
            }
            let trailers = body.trailers().await?;
            match status.or_else(|| trailers.as_ref().and_then(grpc_status)) {
                Some(0) => Ok(reply.freeze()),
                other => bail!("the call failed: grpc-status {other:?}"),
            }
        })?;
        let Some(message) = reply.get(PREFIX..) else {
            bail!("a reply without a message");
        };
        let reply = ModelInferResponse::decode(message).map_err(|e| anyhow!("the reply: {e}"))?;
        if reply.raw_output_contents.is_empty() {
            bail!("a reply without outputs");
        }
        Ok(())
    }
}

/// The `grpc-status` in `headers`, if any.
fn grpc_status(headers: &tonic::codegen::http::HeaderMap) -> Option<i32> {
    headers
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
}

/// Closed loop over gRPC: `concurrency` clients on connections of their own, `requests` of
/// `request` in all.
pub(crate) fn grpc_load(
    addr: &str,
    request: &ModelInferRequest,
    concurrency: usize,
    requests: usize,
) -> Result<Measured> {
    let per = requests.div_ceil(concurrency.max(1));
    let message = framed(request);
    let clients = (0..concurrency.max(1))
        .map(|_| GrpcClient::connect(addr))
        .collect::<Result<Vec<_>>>()?;
    timed_loops(
        clients,
        |_, i| i < per,
        |_, _, client| client.infer(&message),
    )
}
