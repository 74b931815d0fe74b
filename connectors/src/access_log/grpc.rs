//! The gRPC server's access log: a tower service around each gRPC service, one event per call.
//!
//! A call's status is known only when its response ends: in the trailers (`grpc-status`), or in
//! the headers of a trailers-only answer (an error before any message). So the response body is
//! wrapped, and the event is written when the body ends or is dropped, whichever comes first; a
//! body dropped before its trailers (the client went away) is logged as CANCELLED. Latency runs
//! from the call's arrival to that moment, so a `ModelStreamInfer` stream is one event covering
//! the whole stream, its bytes all its messages. Bytes are those of the gRPC messages (framing
//! included) both ways. The model, version and request id are what the inference handler noted
//! (unary calls; a stream's requests are handled on tasks of their own and note nothing).

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use crate::grpc::wrap::{Answer, Around, Wrapped};
use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use tonic::body::Body;
use tonic::codegen::http::{self, HeaderMap};
use tonic::codegen::Service;
use tonic::transport::server::TcpConnectInfo;
use tonic::Status;

use super::{enabled, Entry, Note};

/// gRPC's CANCELLED: the response ended without a status.
const CANCELLED: i32 = 1;

/// The layer access-logging a service's calls.
#[derive(Debug, Clone)]
pub(crate) struct Log;

/// A gRPC service whose calls are access-logged.
pub(crate) type Logged<S> = Wrapped<Log, S>;

impl<S> Logged<S> {
    pub(crate) fn new(inner: S) -> Logged<S> {
        Wrapped::around(Log, inner)
    }
}

impl<S> Around<S> for Log
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    fn call(&mut self, inner: &mut S, request: http::Request<Body>) -> Answer {
        if !enabled() {
            return Box::pin(inner.call(request));
        }
        let started = Instant::now();
        let rpc = request.uri().path().trim_start_matches('/').to_owned();
        let peer = request
            .extensions()
            .get::<TcpConnectInfo>()
            .and_then(TcpConnectInfo::remote_addr);
        let header_id = request
            .headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
            .map(|v| crate::echo::quote(v).into_owned());
        let read = Arc::new(AtomicU64::new(0));
        let request = request.map(|body| {
            Body::new(CountedIn {
                inner: body,
                read: Arc::clone(&read),
            })
        });
        let note = Note::default();
        let answer = note.scope(inner.call(request));
        Box::pin(async move {
            let response = answer.await?;
            let status = status_of(response.headers());
            let pending = Pending {
                entry: Entry {
                    started,
                    peer,
                    bytes_in: 0,
                    bytes_out: 0,
                    header_id,
                    note,
                },
                rpc,
                read,
            };
            Ok(response.map(|body| {
                Body::new(LoggedBody {
                    inner: body,
                    status,
                    pending: Some(pending),
                })
            }))
        })
    }
}

/// The status code in `headers`, if they carry one.
fn status_of(headers: &HeaderMap) -> Option<i32> {
    headers
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
}

/// A request body counting the bytes read from it.
struct CountedIn {
    inner: Body,
    read: Arc<AtomicU64>,
}

impl HttpBody for CountedIn {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled {
            if let Some(data) = frame.data_ref() {
                self.read.fetch_add(data.len() as u64, Ordering::Relaxed);
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// What the event needs once the response ends.
struct Pending {
    entry: Entry,
    rpc: String,
    read: Arc<AtomicU64>,
}

/// A response body that logs its call when it ends or is dropped.
struct LoggedBody {
    inner: Body,
    status: Option<i32>,
    pending: Option<Pending>,
}

impl LoggedBody {
    fn log(&mut self) {
        if let Some(mut p) = self.pending.take() {
            p.entry.bytes_in = p.read.load(Ordering::Relaxed);
            p.entry.emit_grpc(&p.rpc, self.status.unwrap_or(CANCELLED));
        }
    }
}

impl HttpBody for LoggedBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    if let Some(p) = &mut self.pending {
                        p.entry.bytes_out += data.len() as u64;
                    }
                } else if let Some(trailers) = frame.trailers_ref() {
                    self.status = status_of(trailers).or(self.status);
                }
            }
            Poll::Ready(None) => self.log(),
            Poll::Ready(Some(Err(_))) | Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for LoggedBody {
    fn drop(&mut self) {
        self.log();
    }
}
