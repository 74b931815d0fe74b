//! Admitting and reading request bodies: a process-wide budget of body bytes in flight, and a
//! read bounded by size, budget and the request's deadline, whose failures keep their cause.
//!
//! Bytes are reserved before they are buffered (the whole `Content-Length` up front when the
//! client declares it, else chunk by chunk as they arrive), and released when the request's
//! [`BytesPermit`] drops, so many concurrent large uploads are refused with 503 instead of
//! exhausting memory. The budget is an atomic counter: no lock is ever held across an await.
//! Read errors are told apart by the error types in their source chain (hyper's and the I/O
//! errors it wraps), never by their text.
//!
//! An infer body with the binary extension is read in two parts when its JSON header states a
//! layout that adds up ([`crate::oip::binary_layout`]): the header into a small buffer, then the
//! tensors decoded chunk by chunk straight into their elements ([`crate::oip::TailDecoder`]), so
//! the tensor bytes are copied once from hyper's buffers. A whole body is reserved at its declared
//! length once its first bytes arrive (that length is already charged to the budget), so it is
//! never copied while it grows.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::body::Body;
use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use tokio::time::Instant;

use super::error::ServeError;
use crate::oip::{binary_layout, TailDecoder, TailError};
use weir_engine::tensor::TensorData;

/// Most memory set aside before any body byte arrives.
const INITIAL_CAPACITY: usize = 64 << 10;

/// Request bytes held across the whole process, up to a limit: one budget for every transport
/// (the HTTP server charges request bodies, the gRPC server messages and what they decode into).
#[derive(Debug)]
pub struct ByteBudget {
    used: AtomicUsize,
    limit: usize,
}

impl ByteBudget {
    /// A budget of `limit` bytes, none held.
    pub fn new(limit: usize) -> Arc<ByteBudget> {
        Arc::new(ByteBudget {
            used: AtomicUsize::new(0),
            limit,
        })
    }

    /// The most bytes it holds at once.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Takes `n` more bytes if they fit.
    fn take(&self, n: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(n).filter(|&total| total <= self.limit)
            })
            .is_ok()
    }

    /// Bytes held now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }
}

/// Bytes one request holds in a [`ByteBudget`]; released when dropped.
#[derive(Debug)]
pub(crate) struct BytesPermit {
    budget: Arc<ByteBudget>,
    held: usize,
}

impl BytesPermit {
    pub(crate) fn new(budget: &Arc<ByteBudget>) -> BytesPermit {
        BytesPermit {
            budget: Arc::clone(budget),
            held: 0,
        }
    }

    /// Holds at least `total` bytes, taking the difference from the budget.
    ///
    /// # Errors
    /// [`ServeError::BytesBudgetExhausted`] when the budget cannot cover it.
    pub(crate) fn hold(&mut self, total: usize) -> Result<(), ServeError> {
        let more = total.saturating_sub(self.held);
        if more == 0 {
            return Ok(());
        }
        if !self.budget.take(more) {
            return Err(ServeError::BytesBudgetExhausted {
                limit: self.budget.limit,
            });
        }
        self.held = total;
        Ok(())
    }
}

impl Drop for BytesPermit {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.held, Ordering::AcqRel);
    }
}

/// Reads `body` whole: at most `limit` bytes, each reserved in `permit` before it is kept,
/// finished by `deadline`. `declared` is the request's `Content-Length`, when it has one.
///
/// # Errors
/// 413 over `limit`, 503 past the budget, 408 when the upload stalls past `deadline` or the
/// client stops sending, 400 on malformed framing.
pub(super) async fn read_body(
    body: Body,
    declared: Option<usize>,
    limit: usize,
    permit: &mut BytesPermit,
    deadline: Instant,
    timeout_ms: u64,
) -> Result<Bytes, ServeError> {
    if let Some(n) = declared {
        if n > limit {
            return Err(ServeError::BodyTooLarge { limit });
        }
        permit.hold(n)?;
    }
    match tokio::time::timeout_at(deadline, collect(body, limit, permit, declared)).await {
        Ok(result) => result,
        Err(_) => Err(ServeError::BodyTimeout { ms: timeout_ms }),
    }
}

async fn collect(
    mut body: Body,
    limit: usize,
    permit: &mut BytesPermit,
    declared: Option<usize>,
) -> Result<Bytes, ServeError> {
    let mut buf = BytesMut::with_capacity(declared.unwrap_or(0).min(INITIAL_CAPACITY));
    while let Some(data) = next_data(&mut body).await? {
        append(&mut buf, &data, limit, permit, declared)?;
    }
    Ok(buf.freeze())
}

/// The next data frame's bytes, skipping trailers (they carry nothing the protocol reads).
async fn next_data(body: &mut Body) -> Result<Option<Bytes>, ServeError> {
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.map_err(|e| classify(&e))?.into_data() {
            return Ok(Some(data));
        }
    }
    Ok(None)
}

/// Appends `data` to `buf`, within `limit` and the bytes `permit` holds.
fn append(
    buf: &mut BytesMut,
    data: &[u8],
    limit: usize,
    permit: &mut BytesPermit,
    declared: Option<usize>,
) -> Result<(), ServeError> {
    let total = buf
        .len()
        .checked_add(data.len())
        .filter(|&t| t <= limit)
        .ok_or(ServeError::BodyTooLarge { limit })?;
    permit.hold(total)?;
    // Memory follows the bytes that arrive: the declared length (within the limit, already
    // held) is reserved once the client sends, so the buffer never grows by copying itself.
    if let Some(n) = declared.filter(|&n| n >= total && buf.capacity() < n) {
        buf.reserve(n - buf.len());
    }
    buf.extend_from_slice(data);
    Ok(())
}

/// An infer body as read: whole, or a binary body's JSON header and its tensors decoded.
#[derive(Debug)]
pub(super) enum InferBody {
    /// Every byte of the body.
    Whole(Bytes),
    /// The header (`Inference-Header-Content-Length` bytes) and the binary inputs' elements,
    /// decoded from the `tail_len` bytes after it.
    Split {
        json: Bytes,
        parts: Vec<TensorData>,
        tail_len: usize,
    },
}

/// Reads an infer body as [`read_body`] does, decoding a binary body's tensors as they arrive
/// when `declared` and `header_length` are known and the header's layout adds up (see the module
/// doc); [`InferBody::Whole`] otherwise.
///
/// # Errors
/// As [`read_body`]; a body that passes or falls short of its header's sizes is 400.
pub(super) async fn read_infer_body(
    body: Body,
    declared: Option<usize>,
    header_length: Option<usize>,
    limit: usize,
    permit: &mut BytesPermit,
    deadline: Instant,
    timeout_ms: u64,
) -> Result<InferBody, ServeError> {
    let (Some(n), Some(header_length)) = (declared, header_length) else {
        return read_body(body, declared, limit, permit, deadline, timeout_ms)
            .await
            .map(InferBody::Whole);
    };
    if n > limit {
        return Err(ServeError::BodyTooLarge { limit });
    }
    permit.hold(n)?;
    let read = collect_split(body, n, header_length, limit, permit);
    match tokio::time::timeout_at(deadline, read).await {
        Ok(result) => result,
        Err(_) => Err(ServeError::BodyTimeout { ms: timeout_ms }),
    }
}

async fn collect_split(
    mut body: Body,
    declared: usize,
    header_length: usize,
    limit: usize,
    permit: &mut BytesPermit,
) -> Result<InferBody, ServeError> {
    let mut head = BytesMut::with_capacity(declared.min(header_length).min(INITIAL_CAPACITY));
    // The header first, into its own buffer; the frame it ends in may carry much of the tensors
    // (hyper reads what loopback has), which stay where they are until the layout is known.
    let mut after = Bytes::new();
    while head.len() < header_length {
        let Some(mut data) = next_data(&mut body).await? else {
            return Ok(InferBody::Whole(head.freeze()));
        };
        let mine = data.split_to((header_length - head.len()).min(data.len()));
        append(&mut head, &mine, limit, permit, Some(header_length))?;
        after = data;
    }
    let tail_len = declared.saturating_sub(header_length);
    let layout = binary_layout(&head, tail_len);
    let Some(layout) = layout.filter(|_| header_length <= declared) else {
        // Read whole: the parser names what is wrong with it.
        append(&mut head, &after, limit, permit, Some(declared))?;
        while let Some(data) = next_data(&mut body).await? {
            append(&mut head, &data, limit, permit, Some(declared))?;
        }
        return Ok(InferBody::Whole(head.freeze()));
    };
    let mut decoder = TailDecoder::new(&layout);
    let tail_error = |e: TailError| match e {
        TailError::Overrun => ServeError::BodyMalformed,
        TailError::Short => ServeError::BodyIncomplete,
    };
    let mut received = head.len() + after.len();
    let json = head.freeze();
    decoder.push(&after).map_err(tail_error)?;
    while let Some(data) = next_data(&mut body).await? {
        received = received
            .checked_add(data.len())
            .filter(|&t| t <= declared)
            .ok_or(ServeError::BodyMalformed)?;
        decoder.push(&data).map_err(tail_error)?;
    }
    let parts = decoder.finish().map_err(tail_error)?;
    Ok(InferBody::Split {
        json,
        parts,
        tail_len,
    })
}

/// What a body-read error means for the client, from the error types in its source chain.
fn classify(err: &(dyn std::error::Error + 'static)) -> ServeError {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cause {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return match io.kind() {
                std::io::ErrorKind::UnexpectedEof => ServeError::BodyIncomplete,
                std::io::ErrorKind::TimedOut => ServeError::BodyIncomplete,
                _ => ServeError::BodyMalformed,
            };
        }
        if let Some(h) = e.downcast_ref::<hyper::Error>() {
            if h.is_incomplete_message() || h.is_timeout() || h.is_closed() {
                return ServeError::BodyIncomplete;
            }
        }
        cause = e.source();
    }
    ServeError::BodyMalformed
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn errors_are_told_apart_by_type() {
        let eof = std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "eof");
        assert!(matches!(classify(&eof), ServeError::BodyIncomplete));
        let bad = std::io::Error::new(std::io::ErrorKind::InvalidInput, "bad chunk");
        assert!(matches!(classify(&bad), ServeError::BodyMalformed));
        let wrapped = axum::Error::new(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "eof",
        ));
        assert!(matches!(classify(&wrapped), ServeError::BodyIncomplete));
    }

    #[tokio::test]
    async fn declared_length_over_budget_is_refused_before_reading() {
        let budget = ByteBudget::new(100);
        let mut a = BytesPermit::new(&budget);
        let far = Instant::now() + std::time::Duration::from_secs(5);
        let body = read_body(Body::from(vec![1u8; 60]), Some(60), 1000, &mut a, far, 5000).await;
        assert_eq!(body.map(|b| b.len()).ok(), Some(60));
        let mut b = BytesPermit::new(&budget);
        let refused = read_body(Body::from(vec![1u8; 60]), Some(60), 1000, &mut b, far, 5000).await;
        assert!(matches!(
            refused,
            Err(ServeError::BytesBudgetExhausted { limit: 100 })
        ));
        drop(a);
        drop(b);
        assert_eq!(budget.used(), 0);
    }

    #[tokio::test]
    async fn body_over_the_limit_is_413_without_declared_length() {
        let budget = ByteBudget::new(1 << 20);
        let mut p = BytesPermit::new(&budget);
        let far = Instant::now() + std::time::Duration::from_secs(5);
        let r = read_body(Body::from(vec![0u8; 2000]), None, 1000, &mut p, far, 5000).await;
        assert!(matches!(r, Err(ServeError::BodyTooLarge { limit: 1000 })));
    }

    /// A body delivered in frames cut at `cuts`, as loopback delivers a large upload.
    fn chunked(bytes: &[u8], cuts: &[usize]) -> Body {
        let mut frames = Vec::new();
        let mut at = 0;
        for &c in cuts.iter().chain([&bytes.len()]) {
            frames.push(Ok::<_, std::io::Error>(Bytes::copy_from_slice(
                &bytes[at..c],
            )));
            at = c;
        }
        Body::from_stream(tokio_stream::iter(frames))
    }

    /// `bytes` read as an inference body whose JSON header is `header_length` long, delivered
    /// cut at `cuts`, charged to `permit`.
    async fn read_cut(
        bytes: &[u8],
        cuts: &[usize],
        header_length: usize,
        permit: &mut BytesPermit,
    ) -> InferBody {
        let far = Instant::now() + std::time::Duration::from_secs(5);
        read_infer_body(
            chunked(bytes, cuts),
            Some(bytes.len()),
            Some(header_length),
            1 << 20,
            permit,
            far,
            5000,
        )
        .await
        .unwrap()
    }

    #[tokio::test]
    async fn a_binary_body_is_decoded_as_it_arrives_and_parses_as_a_whole_one() {
        let header = br#"{"inputs":[{"name":"x","shape":[1,3],"datatype":"FP32","parameters":{"binary_data_size":12}}]}"#;
        let mut body = header.to_vec();
        for x in [0.5f32, -1.0, 2.0] {
            body.extend_from_slice(&x.to_le_bytes());
        }
        let budget = ByteBudget::new(1 << 20);
        let mut p = BytesPermit::new(&budget);
        let n = header.len();
        // Cuts inside the header, across its end, and inside an element.
        let read = read_cut(&body, &[5, n + 2, n + 7], n, &mut p).await;
        let InferBody::Split {
            json,
            parts,
            tail_len,
        } = read
        else {
            panic!("a decodable layout is read split: {read:?}");
        };
        let split = crate::oip::parse_infer_request_split(&json, parts, tail_len).unwrap();
        let whole = crate::oip::parse_infer_request(&body, Some(n)).unwrap();
        assert_eq!(split, whole);
        assert_eq!(budget.used(), body.len());
        drop(p);
        // A size that does not add up is read whole, for the parser to name.
        let mut bad = body.clone();
        bad.push(0);
        let mut p = BytesPermit::new(&budget);
        let read = read_cut(&bad, &[n + 1], n, &mut p).await;
        let InferBody::Whole(bytes) = read else {
            panic!("read whole");
        };
        assert_eq!(&bytes[..], &bad[..]);
        assert!(crate::oip::parse_infer_request(&bytes, Some(n)).is_err());
    }

    proptest! {
        #[test]
        fn permits_return_every_byte(sizes in proptest::collection::vec(0usize..400, 0..20)) {
            let budget = ByteBudget::new(1000);
            let mut permits = Vec::new();
            let mut held = 0usize;
            for n in sizes {
                let mut p = BytesPermit::new(&budget);
                if p.hold(n).is_ok() {
                    held += n;
                }
                prop_assert!(budget.used() <= 1000);
                prop_assert_eq!(budget.used(), held);
                permits.push(p);
            }
            drop(permits);
            prop_assert_eq!(budget.used(), 0);
        }
    }
}
