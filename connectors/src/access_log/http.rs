//! The HTTP server's access log: an axum middleware around every route.
//!
//! The request body is wrapped to count the bytes the handler reads (what the client sent and the
//! server took in; a refused body is counted as far as it was read). The response's size is its
//! body's exact size, which every response of this server has but the status feed's event
//! stream (logged when its headers are ready, with the size known then: none). The
//! latency runs from the request reaching the router to the response being ready to write. The
//! request id is an `x-request-id` header when sent, else the body's `id` the infer handler notes.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request};
use axum::middleware::Next;
use axum::response::Response;
use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, SizeHint};

use super::{enabled, Entry, Note};
use crate::echo::quote;

/// The header a proxy or client sets to name a request.
const REQUEST_ID_HEADER: &str = "x-request-id";

/// Runs the request and logs it (see the module docs).
pub(crate) async fn record(request: Request, next: Next) -> Response {
    if !enabled() {
        return next.run(request).await;
    }
    let started = Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0);
    let header_id = request
        .headers()
        .get(REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
        .map(|v| quote(v).into_owned());
    let read = Arc::new(AtomicU64::new(0));
    let request = request.map(|body| {
        Body::new(Counted {
            inner: body,
            read: Arc::clone(&read),
        })
    });
    let note = Note::default();
    let response = note.scope(next.run(request)).await;
    let size = response.body().size_hint();
    let entry = Entry {
        started,
        peer,
        bytes_in: read.load(Ordering::Relaxed),
        bytes_out: size.exact().unwrap_or(size.lower()),
        header_id,
        note,
    };
    entry.emit_http(method.as_str(), &path, response.status().as_u16());
    response
}

/// A request body counting the bytes read from it.
struct Counted {
    inner: Body,
    read: Arc<AtomicU64>,
}

impl HttpBody for Counted {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
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
