//! Admitting gRPC messages against the process's byte budget before they are buffered or
//! decoded: the gRPC side of the budget HTTP bodies are charged to (`http::ByteBudget`).
//!
//! tonic reads a message whole into its own buffer and hands it to prost, which decodes it whole;
//! weir sees neither step (unary `ModelInfer` skips tonic's buffer, `unary.rs`, but is decoded
//! whole all the same). So the admission sits one level lower, on the request body: it reads
//! the gRPC framing (a compression flag and a four-byte length before each message) as the bytes
//! arrive, and
//!
//! 1. on a message's header, refuses it if it is longer than the per-message cap
//!    (RESOURCE_EXHAUSTED naming `--max-body-bytes`, where tonic itself would answer
//!    OUT_OF_RANGE), else charges twice its length (its bytes collected here, then tonic's copy
//!    of them on the paths that make one, which the decoded raw tensor contents point into and
//!    the parsed tensors are copied from) before a byte of it is kept;
//! 2. once the message is whole, walks its encoding (`footprint.rs`) and charges what prost will
//!    allocate decoding it, before passing it on;
//! 3. keeps each message's permit until its answer is written: a unary call's permits go when its
//!    response body is dropped (sent, or the connection gone); on `ModelStreamInfer` the handler
//!    takes each message's permit as it reads the message and drops it once the reply is queued.
//!
//! A message the budget cannot cover fails its call with RESOURCE_EXHAUSTED naming the budget and
//! carrying `retry-after: 1`, as an HTTP body past the same budget gets 503 with `Retry-After`
//! (gRPC's code for an exhausted resource; UNAVAILABLE stays the graph's own overload answer).
//! On a stream the refusal ends the stream after the requests in flight are answered: the message
//! cannot be answered on its own without reading it, and its id is inside it. A message whose
//! upload takes longer than the request timeout fails with DEADLINE_EXCEEDED, so a slow client
//! cannot hold a charge forever. Compressed messages are refused (the server accepts no
//! compression, and their decoded size cannot be known from their length).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use crate::grpc::wrap::{Answer, Around, Wrapped};
use bytes::{Bytes, BytesMut};
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use tokio::time::{Instant, Sleep};
use tonic::body::Body;
use tonic::codegen::http;
use tonic::codegen::Service;
use tonic::metadata::MetadataValue;
use tonic::Status;

use super::footprint::{decoded_bytes, Schema, INFER_REQUEST, REQUEST_SIZE, SMALL_REQUEST};
use crate::http::{ByteBudget, BytesPermit};

/// The gRPC framing's header: a compression flag and a big-endian length.
pub(super) const HEADER: usize = 5;

/// The paths whose requests are `ModelInferRequest`s.
const INFER_PATHS: [&str; 2] = [
    "/inference.GRPCInferenceService/ModelInfer",
    "/inference.GRPCInferenceService/ModelStreamInfer",
];

/// The length a message's gRPC header states, or the refusal of a compressed message or of one
/// longer than `max`.
pub(super) fn message_len(header: &[u8; HEADER], max: usize) -> Result<usize, Status> {
    if header[0] != 0 {
        return Err(Status::unimplemented(
            "compressed messages are not accepted: send them without grpc-encoding",
        ));
    }
    let [_, a, b, c, d] = *header;
    let len = u32::from_be_bytes([a, b, c, d]) as usize;
    if len > max {
        return Err(Status::resource_exhausted(format!(
            "the message is too large: {len} bytes, over the limit of {max} bytes \
             (--max-body-bytes)"
        )));
    }
    Ok(len)
}

/// What every admitted message is held to.
#[derive(Debug)]
pub(super) struct Admission {
    /// The process's budget, shared with the HTTP server.
    pub budget: Arc<ByteBudget>,
    /// Largest message, in encoded bytes.
    pub max_message: usize,
    /// Longest one message's upload may take, from its header to its last byte.
    pub upload_timeout: Duration,
}

impl Admission {
    fn refuse(&self, needed: usize) -> Status {
        let limit = self.budget.limit();
        let message = if needed > limit {
            format!(
                "the message needs {needed} bytes decoded, more than the server-wide budget of \
                 {limit} bytes in flight (--max-inflight-bytes); send smaller requests"
            )
        } else {
            format!(
                "the server-wide budget of {limit} bytes in flight (--max-inflight-bytes) cannot \
                 cover this message's {needed} bytes now, retry later"
            )
        };
        let mut status = Status::resource_exhausted(message);
        status
            .metadata_mut()
            .insert("retry-after", MetadataValue::from_static("1"));
        status
    }

    /// Charges `total` bytes to `permit`, or the refusal.
    fn hold(&self, permit: &mut BytesPermit, total: usize) -> Result<(), Status> {
        permit.hold(total).map_err(|_| self.refuse(total))
    }
}

/// The permits of one call's messages, in the order the messages arrived.
#[derive(Debug, Clone, Default)]
pub(super) struct Held(Arc<Mutex<VecDeque<BytesPermit>>>);

impl Held {
    fn push(&self, permit: BytesPermit) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(permit);
    }

    /// The permit of the next message the handler reads (messages are decoded in the order they
    /// arrive, so the oldest permit is that message's).
    pub fn next(&self) -> Option<BytesPermit> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front()
    }
}

/// The layer admitting a service's requests against the byte budget.
#[derive(Debug, Clone)]
pub(super) struct Admit(pub Arc<Admission>);

/// A gRPC service whose requests are admitted against the byte budget.
pub(super) type Admitted<S> = Wrapped<Admit, S>;

impl<S> Admitted<S> {
    pub fn new(inner: S, admission: Arc<Admission>) -> Admitted<S> {
        Wrapped::around(Admit(admission), inner)
    }
}

impl<S> Around<S> for Admit
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    fn call(&mut self, inner: &mut S, request: http::Request<Body>) -> Answer {
        let schema = if INFER_PATHS.contains(&request.uri().path()) {
            &INFER_REQUEST
        } else {
            &SMALL_REQUEST
        };
        let held = Held::default();
        let (mut parts, body) = request.into_parts();
        parts.extensions.insert(held.clone());
        let body = Body::new(Metered::new(
            body,
            Arc::clone(&self.0),
            schema,
            held.clone(),
        ));
        let answer = inner.call(http::Request::from_parts(parts, body));
        Box::pin(async move {
            let response = answer.await?;
            Ok(response.map(|body| Body::new(Holding { body, _held: held })))
        })
    }
}

/// A response body that keeps its call's permits until it is dropped.
struct Holding {
    body: Body,
    _held: Held,
}

impl HttpBody for Holding {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A message being collected, its header included.
struct Incoming {
    bytes: BytesMut,
    len: usize,
    permit: BytesPermit,
}

/// A request body whose messages are charged before they are kept (see the module doc).
struct Metered {
    inner: Body,
    admission: Arc<Admission>,
    schema: &'static Schema,
    held: Held,
    header: [u8; HEADER],
    header_len: usize,
    message: Option<Incoming>,
    /// When the message being collected must be whole (none: no message, or no representable
    /// deadline).
    due: Option<Instant>,
    /// The timer for `due`, made only when the body waits inside a message: most messages
    /// arrive whole in one chunk, and a timer per message would cost a registration each.
    deadline: Option<Pin<Box<Sleep>>>,
    ready: VecDeque<Bytes>,
    failed: bool,
}

impl Metered {
    fn new(inner: Body, admission: Arc<Admission>, schema: &'static Schema, held: Held) -> Self {
        Metered {
            inner,
            admission,
            schema,
            held,
            header: [0; HEADER],
            header_len: 0,
            message: None,
            due: None,
            deadline: None,
            ready: VecDeque::new(),
            failed: false,
        }
    }

    /// Takes in one chunk of the body: headers, message bytes, whole messages.
    fn take_in(&mut self, mut data: Bytes) -> Result<(), Status> {
        loop {
            self.finish()?;
            if data.is_empty() {
                return Ok(());
            }
            match &mut self.message {
                None => {
                    let n = (HEADER - self.header_len).min(data.len());
                    self.header[self.header_len..self.header_len + n]
                        .copy_from_slice(&data.split_to(n));
                    self.header_len += n;
                    if self.header_len == HEADER {
                        self.start()?;
                    }
                }
                Some(m) => {
                    let n = (HEADER + m.len - m.bytes.len()).min(data.len());
                    m.bytes.extend_from_slice(&data.split_to(n));
                }
            }
        }
    }

    /// A message's header is in: checks and charges it, and starts collecting it.
    fn start(&mut self) -> Result<(), Status> {
        self.header_len = 0;
        let len = message_len(&self.header, self.admission.max_message)?;
        let mut permit = BytesPermit::new(&self.admission.budget);
        let buffers = len.saturating_mul(2).saturating_add(REQUEST_SIZE);
        self.admission.hold(&mut permit, buffers)?;
        let mut bytes = BytesMut::with_capacity(HEADER + len);
        bytes.extend_from_slice(&self.header);
        self.message = Some(Incoming { bytes, len, permit });
        // A timeout too long to represent never fires.
        self.due = Instant::now().checked_add(self.admission.upload_timeout);
        Ok(())
    }

    /// When the message is whole: charges what it decodes into and passes it on.
    fn finish(&mut self) -> Result<(), Status> {
        let Some(Incoming {
            bytes,
            len,
            mut permit,
        }) = self.message.take_if(|m| m.bytes.len() == HEADER + m.len)
        else {
            return Ok(());
        };
        self.due = None;
        self.deadline = None;
        let decoded = decoded_bytes(&bytes[HEADER..], self.schema)
            .map_err(|e| Status::invalid_argument(format!("the message is malformed: {e}")))?;
        let total = len
            .saturating_mul(2)
            .saturating_add(REQUEST_SIZE)
            .saturating_add(decoded);
        self.admission.hold(&mut permit, total)?;
        self.held.push(permit);
        self.ready.push_back(bytes.freeze());
        Ok(())
    }

    fn fail(&mut self, status: Status) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        self.failed = true;
        self.message = None;
        self.due = None;
        self.deadline = None;
        self.ready.clear();
        Poll::Ready(Some(Err(status)))
    }
}

impl HttpBody for Metered {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        loop {
            if this.failed {
                return Poll::Ready(None);
            }
            if let Some(message) = this.ready.pop_front() {
                return Poll::Ready(Some(Ok(Frame::data(message))));
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => {
                    let late = match (this.due, &mut this.deadline) {
                        (None, _) => false,
                        (Some(_), Some(d)) => d.as_mut().poll(cx).is_ready(),
                        (Some(due), timer) => timer
                            .insert(Box::pin(tokio::time::sleep_until(due)))
                            .as_mut()
                            .poll(cx)
                            .is_ready(),
                    };
                    if late {
                        let ms = this.admission.upload_timeout.as_millis();
                        return this.fail(Status::deadline_exceeded(format!(
                            "the message's upload was unfinished after {ms} ms"
                        )));
                    }
                    return Poll::Pending;
                }
                Poll::Ready(None) => {
                    if this.message.is_some() || this.header_len > 0 {
                        return this.fail(Status::invalid_argument(
                            "the request ends inside a message",
                        ));
                    }
                    return Poll::Ready(None);
                }
                Poll::Ready(Some(Err(status))) => return this.fail(status),
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => {
                        if let Err(status) = this.take_in(data) {
                            return this.fail(status);
                        }
                    }
                    Err(trailers) => return Poll::Ready(Some(Ok(trailers))),
                },
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.failed
            || (self.ready.is_empty()
                && self.message.is_none()
                && self.header_len == 0
                && self.inner.is_end_stream())
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::{BodyExt, StreamBody};
    use prost::Message;
    use tokio::sync::mpsc;
    use tokio_stream::wrappers::ReceiverStream;

    use super::*;
    use crate::grpc::proto::ModelInferRequest;

    type Sender = mpsc::Sender<Result<Frame<Bytes>, Status>>;

    /// A request body fed by hand, and its charged form.
    fn metered(admission: &Arc<Admission>, held: &Held) -> (Sender, Metered) {
        let (tx, rx) = mpsc::channel(8);
        let body = Body::new(StreamBody::new(ReceiverStream::new(rx)));
        let metered = Metered::new(body, Arc::clone(admission), &INFER_REQUEST, held.clone());
        (tx, metered)
    }

    fn admission(budget: usize, max_message: usize) -> Arc<Admission> {
        Arc::new(Admission {
            budget: ByteBudget::new(budget),
            max_message,
            upload_timeout: Duration::from_secs(60),
        })
    }

    fn header(len: usize) -> Bytes {
        let mut h = vec![0u8];
        h.extend_from_slice(&u32::try_from(len).expect("small").to_be_bytes());
        h.into()
    }

    fn framed(request: &ModelInferRequest) -> Bytes {
        let body = request.encode_to_vec();
        let mut bytes = header(body.len()).to_vec();
        bytes.extend_from_slice(&body);
        bytes.into()
    }

    async fn next(body: &mut Metered) -> Option<Result<Bytes, Status>> {
        body.frame()
            .await
            .map(|f| f.map(|f| f.into_data().expect("data")))
    }

    #[tokio::test]
    async fn a_declared_length_is_charged_before_its_bytes_arrive() {
        let admission = admission(10 << 20, 4 << 20);
        let held = Held::default();
        // The first upload declares 4 MiB and stalls: 8 MiB and the struct are held.
        let (first_tx, mut first) = metered(&admission, &held);
        first_tx
            .send(Ok(Frame::data(header(4 << 20))))
            .await
            .expect("sent");
        let stalled = tokio::time::timeout(Duration::from_millis(50), next(&mut first)).await;
        assert!(stalled.is_err(), "a partial message was passed on");
        assert!(admission.budget.used() >= 8 << 20);
        // A second one does not fit beside it.
        let (second_tx, mut second) = metered(&admission, &held);
        second_tx
            .send(Ok(Frame::data(header(4 << 20))))
            .await
            .expect("sent");
        let refused = next(&mut second)
            .await
            .expect("an answer")
            .expect_err("refused");
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        assert!(
            refused.message().contains("--max-inflight-bytes"),
            "{refused:?}"
        );
        assert!(refused.metadata().get("retry-after").is_some());
        // The stalled upload's charge comes back when it goes.
        drop(first);
        drop(second);
        assert_eq!(admission.budget.used(), 0);
    }

    #[tokio::test]
    async fn whole_messages_pass_unchanged_and_their_permits_wait_for_the_handler() {
        let admission = admission(64 << 20, 4 << 20);
        let held = Held::default();
        let (tx, mut body) = metered(&admission, &held);
        let a = framed(&ModelInferRequest {
            id: "a".into(),
            ..Default::default()
        });
        let b = framed(&ModelInferRequest {
            id: "b".into(),
            raw_input_contents: vec![Bytes::from(vec![1u8; 1000])],
            ..Default::default()
        });
        // Both messages in one chunk, split oddly: the header of `b` across two chunks.
        let mut joined = a.to_vec();
        joined.extend_from_slice(&b);
        let cut = a.len() + 3;
        tx.send(Ok(Frame::data(Bytes::copy_from_slice(&joined[..cut]))))
            .await
            .expect("sent");
        tx.send(Ok(Frame::data(Bytes::copy_from_slice(&joined[cut..]))))
            .await
            .expect("sent");
        drop(tx);
        assert_eq!(next(&mut body).await.expect("a").expect("ok"), a);
        assert_eq!(next(&mut body).await.expect("b").expect("ok"), b);
        assert!(next(&mut body).await.is_none());
        let first = held.next().expect("a's permit");
        let second = held.next().expect("b's permit");
        assert!(held.next().is_none());
        assert!(admission.budget.used() >= 2 * b.len());
        drop((first, second, body));
        assert_eq!(admission.budget.used(), 0);
    }

    #[tokio::test]
    async fn oversize_malformed_and_truncated_messages_are_refused() {
        let admission = admission(64 << 20, 1000);
        let held = Held::default();
        let (tx, mut body) = metered(&admission, &held);
        tx.send(Ok(Frame::data(header(1001)))).await.expect("sent");
        let big = next(&mut body).await.expect("answer").expect_err("refused");
        assert_eq!(big.code(), tonic::Code::ResourceExhausted);
        assert!(big.message().contains("--max-body-bytes"), "{big:?}");
        assert!(next(&mut body).await.is_none());

        let (tx, mut body) = metered(&admission, &held);
        let mut bad = header(3).to_vec();
        bad.extend_from_slice(&[0x2a, 10, 0]);
        tx.send(Ok(Frame::data(bad.into()))).await.expect("sent");
        let malformed = next(&mut body).await.expect("answer").expect_err("refused");
        assert_eq!(malformed.code(), tonic::Code::InvalidArgument);

        let (tx, mut body) = metered(&admission, &held);
        tx.send(Ok(Frame::data(header(10)))).await.expect("sent");
        drop(tx);
        let cut = next(&mut body).await.expect("answer").expect_err("refused");
        assert_eq!(cut.code(), tonic::Code::InvalidArgument);
        drop(body);
        assert_eq!(admission.budget.used(), 0);
    }

    #[tokio::test]
    async fn a_message_split_across_chunks_passes_and_its_timer_goes_with_it() {
        let admission = admission(1 << 20, 1000);
        let held = Held::default();
        let (tx, mut body) = metered(&admission, &held);
        let whole = framed(&ModelInferRequest {
            id: "split".into(),
            ..Default::default()
        });
        // The header alone: the body waits inside a message, so its deadline is armed.
        tx.send(Ok(Frame::data(whole.slice(..HEADER))))
            .await
            .expect("sent");
        let waiting = tokio::time::timeout(Duration::from_millis(20), next(&mut body)).await;
        assert!(waiting.is_err(), "a partial message was passed on");
        assert!(body.deadline.is_some() && body.due.is_some());
        tx.send(Ok(Frame::data(whole.slice(HEADER..))))
            .await
            .expect("sent");
        assert_eq!(next(&mut body).await.expect("a").expect("ok"), whole);
        assert!(body.deadline.is_none() && body.due.is_none());
        // A message arriving whole never arms one.
        tx.send(Ok(Frame::data(whole.clone()))).await.expect("sent");
        assert_eq!(next(&mut body).await.expect("b").expect("ok"), whole);
        assert!(body.deadline.is_none());
        drop(tx);
        assert!(next(&mut body).await.is_none());
    }

    #[tokio::test]
    async fn an_upload_slower_than_the_timeout_fails() {
        let admission = Arc::new(Admission {
            budget: ByteBudget::new(1 << 20),
            max_message: 1000,
            upload_timeout: Duration::from_millis(20),
        });
        let held = Held::default();
        let (tx, mut body) = metered(&admission, &held);
        tx.send(Ok(Frame::data(header(100)))).await.expect("sent");
        let late = next(&mut body).await.expect("answer").expect_err("late");
        assert_eq!(late.code(), tonic::Code::DeadlineExceeded);
        drop(tx);
    }
}
