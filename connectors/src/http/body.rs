//! Admitting and reading request bodies: a process-wide budget of body bytes in flight, and a
//! read bounded by size, budget and the request's deadline, whose failures keep their cause.
//!
//! Bytes are reserved before they are buffered (the whole `Content-Length` up front when the
//! client declares it, else chunk by chunk as they arrive), and released when the request's
//! [`BytesPermit`] drops, so many concurrent large uploads are refused with 503 instead of
//! exhausting memory. The budget is an atomic counter: no lock is ever held across an await.
//! Read errors are told apart by the error types in their source chain (hyper's and the I/O
//! errors it wraps), never by their text.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::body::Body;
use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use tokio::time::Instant;

use super::error::ServeError;

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
    // Memory follows the bytes that arrive, not what the client declared.
    let mut buf = BytesMut::with_capacity(declared.unwrap_or(0).min(INITIAL_CAPACITY));
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| classify(&e))?;
        let Ok(data) = frame.into_data() else {
            continue; // trailers carry nothing the protocol reads
        };
        let total = buf
            .len()
            .checked_add(data.len())
            .filter(|&t| t <= limit)
            .ok_or(ServeError::BodyTooLarge { limit })?;
        permit.hold(total)?;
        buf.extend_from_slice(&data);
    }
    Ok(buf.freeze())
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
