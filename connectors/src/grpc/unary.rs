//! Unary `ModelInfer`, the call on every request's path, answered straight from the admitted
//! request body rather than through tonic's generic unary codec.
//!
//! tonic's path copies each message into a decode buffer of its own (8 KiB at least), wraps it
//! in a `Request` with a copied metadata map, boxes the handler's future, and streams the reply
//! through an encoder with another 8 KiB buffer and its own state machine: about 15 k
//! instructions a call on a small model, where the rest of the request costs about 230 k
//! (`benchmarks/grpc`). Here the body's message, which the admission in front (`admit.rs`)
//! hands over whole, is decoded in place (prost reads the `raw_input_contents` as slices of it),
//! the handler reads the headers where they are, and the reply is encoded once, with its gRPC
//! prefix, into a buffer of its exact size that goes out as one DATA frame before the trailers.
//!
//! The answers are tonic's, so a client sees no difference: `content-type: application/grpc`,
//! the status in the trailers (`grpc-status: 0`) or, for a failure before the reply, in the
//! headers of a trailers-only answer; a `grpc-encoding` other than `identity` is UNIMPLEMENTED
//! (the server accepts no compression), a body without a message INTERNAL ("Missing request
//! message."), a message prost cannot decode INTERNAL, a reply past the message cap OUT_OF_RANGE;
//! messages after the first are read and dropped, as tonic reads past a unary call's message.
//! Every other method goes to the generated service.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::grpc::wrap::{Answer, Around, Wrapped};
use bytes::{BufMut, Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use prost::Message;
use tonic::body::Body;
use tonic::codegen::http::{self, header, HeaderMap, HeaderValue};
use tonic::codegen::Service;
use tonic::metadata::MetadataValue;
use tonic::Status;

use super::admit::{message_len, HEADER};
use super::proto::ModelInferRequest;
use super::shared::Shared;

/// The path of unary `ModelInfer`.
const MODEL_INFER: &str = "/inference.GRPCInferenceService/ModelInfer";

/// The layer answering unary `ModelInfer` here (see the module doc).
#[derive(Clone)]
pub(super) struct UnaryInfer(Arc<Shared>);

/// The inference service, with unary `ModelInfer` answered here.
pub(super) type Unary<S> = Wrapped<UnaryInfer, S>;

impl<S> Unary<S> {
    pub fn new(inner: S, shared: Arc<Shared>) -> Unary<S> {
        Wrapped::around(UnaryInfer(shared), inner)
    }
}

impl<S> Around<S> for UnaryInfer
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    fn call(&mut self, inner: &mut S, request: http::Request<Body>) -> Answer {
        if request.uri().path() != MODEL_INFER {
            return Box::pin(inner.call(request));
        }
        let shared = Arc::clone(&self.0);
        Box::pin(async move { Ok(model_infer(&shared, request).await) })
    }
}

/// One unary `ModelInfer` call, answered.
async fn model_infer(shared: &Shared, request: http::Request<Body>) -> http::Response<Body> {
    let (parts, body) = request.into_parts();
    let max = shared.config.max_message_bytes;
    let answer = async {
        refuse_compression(&parts.headers)?;
        let message = first_message(body, max).await?;
        let request =
            ModelInferRequest::decode(message).map_err(|e| Status::internal(e.to_string()))?;
        let (reply, traceparent) = shared.unary_infer(&parts.headers, request).await?;
        match framed(&reply, max) {
            Ok(message) => Ok((message, traceparent)),
            Err(mut status) => {
                // The request's span, in the error's metadata as in any other failure's.
                if let Some(v) =
                    traceparent.and_then(|v| MetadataValue::try_from(v.as_bytes()).ok())
                {
                    status.metadata_mut().insert("traceparent", v);
                }
                Err(status)
            }
        }
    };
    match answer.await {
        Ok((message, traceparent)) => {
            let mut response = http::Response::new(Body::new(Reply::new(message)));
            let headers = response.headers_mut();
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/grpc"),
            );
            if let Some(v) = traceparent {
                headers.insert("traceparent", v);
            }
            response
        }
        Err(status) => status.into_http(),
    }
}

/// Refuses a request whose messages say they are compressed (tonic's answer to the same).
fn refuse_compression(headers: &HeaderMap) -> Result<(), Status> {
    match headers.get("grpc-encoding").map(HeaderValue::as_bytes) {
        None | Some(b"identity") => Ok(()),
        Some(other) => {
            let mut status = Status::unimplemented(format!(
                "Content is compressed with `{}` which isn't supported",
                String::from_utf8_lossy(other)
            ));
            status.metadata_mut().insert(
                "grpc-accept-encoding",
                MetadataValue::from_static("identity"),
            );
            Err(status)
        }
    }
}

/// The first message of `body` (without its gRPC prefix), the body read to its end.
///
/// The admission in front hands each message over whole, so the message is normally a slice of
/// the one chunk it arrived in; chunks that split it are joined.
async fn first_message(mut body: Body, max: usize) -> Result<Bytes, Status> {
    let mut first = Collecting::default();
    // A body that says it has ended is not polled again for its end (a unary call's message
    // usually comes in the frame that ends the stream).
    while !(first.whole() && body.is_end_stream()) {
        let Some(frame) = body.frame().await else {
            break;
        };
        if let Ok(data) = frame?.into_data() {
            first.take_in(data, max)?;
        }
    }
    first.finish()
}

/// A call's first message, as its chunks arrive.
#[derive(Debug, Default)]
struct Collecting {
    /// The first chunk, kept as it came (no copy).
    chunk: Bytes,
    /// The chunks joined, once a second one arrives before the message is whole.
    joined: Option<BytesMut>,
    /// The message's length, once its prefix is in.
    len: Option<usize>,
}

impl Collecting {
    fn held(&self) -> &[u8] {
        self.joined.as_deref().unwrap_or(&self.chunk)
    }

    fn whole(&self) -> bool {
        self.len
            .is_some_and(|len| self.held().len() >= HEADER + len)
    }

    /// Takes in one chunk of the body; chunks after the first message is whole are dropped.
    fn take_in(&mut self, data: Bytes, max: usize) -> Result<(), Status> {
        if self.whole() {
            return Ok(());
        }
        if self.chunk.is_empty() && self.joined.is_none() {
            self.chunk = data;
        } else {
            let joined = self
                .joined
                .get_or_insert_with(|| BytesMut::from(std::mem::take(&mut self.chunk)));
            joined.extend_from_slice(&data);
        }
        if self.len.is_none() {
            if let Some(prefix) = self.held().first_chunk::<HEADER>() {
                self.len = Some(message_len(prefix, max)?);
            }
        }
        Ok(())
    }

    /// The message, once the body ended.
    fn finish(self) -> Result<Bytes, Status> {
        let whole = self.whole();
        let Collecting { chunk, joined, len } = self;
        let held = joined.map_or(chunk, BytesMut::freeze);
        match len {
            Some(len) if whole => Ok(held.slice(HEADER..HEADER + len)),
            None if held.is_empty() => Err(Status::internal("Missing request message.")),
            _ => Err(Status::invalid_argument(
                "the request ends inside a message",
            )),
        }
    }
}

/// `reply` with its gRPC prefix, in one buffer of its size; OUT_OF_RANGE past `max` bytes (tonic's
/// answer to the same).
fn framed(reply: &impl Message, max: usize) -> Result<Bytes, Status> {
    let len = reply.encoded_len();
    let stated = u32::try_from(len)
        .ok()
        .filter(|_| len <= max)
        .ok_or_else(|| {
            Status::out_of_range(format!(
            "Error, encoded message length too large: found {len} bytes, the limit is: {max} bytes"
        ))
        })?;
    let mut buf = BytesMut::with_capacity(HEADER + len);
    buf.put_u8(0);
    buf.put_u32(stated);
    reply.encode_raw(&mut buf);
    Ok(buf.freeze())
}

/// A unary reply's body: its message, then the trailers with status OK.
struct Reply {
    message: Option<Bytes>,
    ended: bool,
}

impl Reply {
    fn new(message: Bytes) -> Reply {
        Reply {
            message: Some(message),
            ended: false,
        }
    }
}

impl HttpBody for Reply {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(message) = self.message.take() {
            return Poll::Ready(Some(Ok(Frame::data(message))));
        }
        if self.ended {
            return Poll::Ready(None);
        }
        self.ended = true;
        let mut trailers = HeaderMap::with_capacity(1);
        trailers.insert("grpc-status", HeaderValue::from_static("0"));
        Poll::Ready(Some(Ok(Frame::trailers(trailers))))
    }

    fn is_end_stream(&self) -> bool {
        self.ended
    }

    fn size_hint(&self) -> SizeHint {
        let mut hint = SizeHint::new();
        hint.set_exact(self.message.as_ref().map_or(0, |m| m.len() as u64));
        hint
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::proto::ModelInferResponse;

    fn prefixed(message: &[u8]) -> Bytes {
        let mut b = BytesMut::new();
        b.put_u8(0);
        b.put_u32(message.len() as u32);
        b.extend_from_slice(message);
        b.freeze()
    }

    fn collect(chunks: &[Bytes], max: usize) -> Result<Bytes, Status> {
        let mut c = Collecting::default();
        for chunk in chunks {
            c.take_in(chunk.clone(), max)?;
        }
        c.finish()
    }

    #[test]
    fn a_message_in_one_chunk_is_a_slice_of_it() {
        let whole = prefixed(b"hello");
        let message = collect(std::slice::from_ref(&whole), 100).expect("message");
        assert_eq!(&message[..], b"hello");
        assert_eq!(message.as_ptr(), whole[HEADER..].as_ptr(), "copied");
    }

    #[test]
    fn split_chunks_are_joined_and_later_messages_dropped() {
        let whole = prefixed(b"hello world");
        for cut in 1..whole.len() {
            let chunks = [whole.slice(..cut), whole.slice(cut..), prefixed(b"second")];
            assert_eq!(&collect(&chunks, 100).expect("message")[..], b"hello world");
        }
    }

    #[test]
    fn empty_partial_compressed_and_oversize_bodies_are_refused() {
        assert_eq!(collect(&[], 100).unwrap_err().code(), tonic::Code::Internal);
        let whole = prefixed(b"hello");
        let partial = collect(&[whole.slice(..7)], 100).unwrap_err();
        assert_eq!(partial.code(), tonic::Code::InvalidArgument);
        let prefix_only = collect(&[whole.slice(..3)], 100).unwrap_err();
        assert_eq!(prefix_only.code(), tonic::Code::InvalidArgument);
        let mut compressed = whole.to_vec();
        compressed[0] = 1;
        let e = collect(&[compressed.into()], 100).unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unimplemented);
        let e = collect(&[whole], 4).unwrap_err();
        assert_eq!(e.code(), tonic::Code::ResourceExhausted);
    }

    #[test]
    fn a_reply_is_framed_once_and_refused_past_the_cap() {
        let reply = ModelInferResponse {
            model_name: "m".into(),
            raw_output_contents: vec![Bytes::from_static(&[1, 2, 3, 4])],
            ..Default::default()
        };
        let len = reply.encoded_len();
        let framed_reply = framed(&reply, len).expect("fits");
        assert_eq!(framed_reply.len(), HEADER + len);
        assert_eq!(&framed_reply[1..HEADER], &(len as u32).to_be_bytes());
        assert_eq!(
            ModelInferResponse::decode(&framed_reply[HEADER..]).expect("decodes"),
            reply
        );
        let e = framed(&reply, len - 1).unwrap_err();
        assert_eq!(e.code(), tonic::Code::OutOfRange);
    }

    #[tokio::test]
    async fn a_reply_body_is_its_message_then_status_ok() {
        let mut body = Reply::new(Bytes::from_static(b"m"));
        assert_eq!(body.size_hint().exact(), Some(1));
        let data = body.frame().await.expect("data").expect("ok");
        assert_eq!(data.into_data().expect("data"), Bytes::from_static(b"m"));
        let trailers = body.frame().await.expect("trailers").expect("ok");
        let trailers = trailers.into_trailers().expect("trailers");
        assert_eq!(trailers["grpc-status"], "0");
        assert!(body.is_end_stream());
        assert!(body.frame().await.is_none());
    }
}
