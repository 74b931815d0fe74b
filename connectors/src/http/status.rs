//! The status feed: `/v2/weir/status` (the newest status document, JSON) and
//! `/v2/weir/status/stream` (the same documents as server-sent events, one per tick).
//!
//! One ticker samples the process (a [`StatusSampler`] the caller builds over its running graphs)
//! once per tick and serialises the document once, as a complete SSE frame in an `Arc<str>`
//! published on a `watch` channel. Every subscriber and every GET shares that one string, so the
//! feed's cost does not grow with the number of open pages beyond copying bytes to sockets.
//!
//! Bounds: subscribers at once are capped (past the cap a stream request gets 503 with
//! `Retry-After`); each subscriber holds at most [`SUBSCRIBER_FRAMES`] frames the socket has not
//! taken, and one that misses [`MAX_MISSED_TICKS`] ticks in a row (its socket not draining) is
//! dropped, never buffered for. Neither endpoint reads a body or a query. On shutdown the ticker
//! stops, which ends every stream, so open dashboards never hold up the drain.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use serde_json::Value;
use tokio::sync::{mpsc, watch, Semaphore};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;
use tracing::debug;

use super::auth::AuthToken;

/// Builds the status document; called once per tick on the ticker's task (it must not block).
pub type StatusSampler = Box<dyn FnMut() -> Value + Send>;

/// Frames a subscriber may hold that its socket has not taken yet.
pub const SUBSCRIBER_FRAMES: usize = 2;
/// Ticks in a row a subscriber may miss (its frames not taken) before it is dropped.
pub const MAX_MISSED_TICKS: u32 = 5;

/// How the feed behaves.
#[derive(Debug, Clone)]
pub struct StatusOptions {
    /// Time between two samples.
    pub tick: Duration,
    /// Streams open at once; past it a stream request gets 503.
    pub max_subscribers: usize,
}

impl Default for StatusOptions {
    fn default() -> Self {
        StatusOptions {
            tick: Duration::from_secs(1),
            max_subscribers: 64,
        }
    }
}

/// One serialised document as an SSE frame: `data: <json>\n\n`.
#[derive(Clone)]
struct Frame(Arc<str>);

const PREFIX: &str = "data: ";
const SUFFIX: &str = "\n\n";

impl Frame {
    fn of(doc: &Value) -> Frame {
        Frame(format!("{PREFIX}{doc}{SUFFIX}").into())
    }

    /// The whole frame, sharing this one's bytes.
    fn sse(&self) -> Bytes {
        Bytes::from_owner(self.clone())
    }

    /// The JSON document alone, sharing this one's bytes.
    fn json(&self) -> Bytes {
        let end = self.0.len().saturating_sub(SUFFIX.len());
        self.sse().slice(PREFIX.len().min(end)..end)
    }
}

impl AsRef<[u8]> for Frame {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// The feed: the newest frame, the subscriber cap and the ticker.
pub struct StatusFeed {
    options: StatusOptions,
    latest: watch::Receiver<Frame>,
    /// Taken by the ticker when it starts (on the server's runtime).
    start: Mutex<Option<(StatusSampler, watch::Sender<Frame>)>>,
    ticker: Mutex<Option<tokio::task::AbortHandle>>,
    subscribers: Arc<Semaphore>,
}

impl std::fmt::Debug for StatusFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusFeed")
            .field("options", &self.options)
            .finish()
    }
}

impl StatusFeed {
    /// A feed over `sampler`; its first document is sampled now, the ticker starts with the
    /// server ([`StatusFeed::start`]).
    pub fn new(mut sampler: StatusSampler, options: StatusOptions) -> Arc<StatusFeed> {
        let (tx, latest) = watch::channel(Frame::of(&sampler()));
        Arc::new(StatusFeed {
            subscribers: Arc::new(Semaphore::new(options.max_subscribers)),
            options,
            latest,
            start: Mutex::new(Some((sampler, tx))),
            ticker: Mutex::new(None),
        })
    }

    /// Starts the ticker on the current tokio runtime (once; later calls do nothing).
    pub(crate) fn start(&self) {
        let Some((mut sampler, tx)) = self.start.lock().unwrap_or_else(|p| p.into_inner()).take()
        else {
            return;
        };
        let tick = self.options.tick;
        let task = tokio::spawn(async move {
            let mut every = tokio::time::interval(tick);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            every.tick().await;
            loop {
                every.tick().await;
                tx.send_replace(Frame::of(&sampler()));
            }
        });
        *self.ticker.lock().unwrap_or_else(|p| p.into_inner()) = Some(task.abort_handle());
    }

    /// Stops the ticker, which ends every open stream.
    pub(crate) fn stop(&self) {
        if let Some(t) = self.ticker.lock().unwrap_or_else(|p| p.into_inner()).take() {
            t.abort();
        }
    }

    /// Streams open now.
    pub fn subscribers(&self) -> usize {
        self.options
            .max_subscribers
            .saturating_sub(self.subscribers.available_permits())
    }

    /// The newest document, serialised.
    pub fn latest_json(&self) -> Bytes {
        self.latest.borrow().json()
    }

    /// A stream of frames for one subscriber, or `None` at the cap. The subscriber's task ends
    /// when the ticker stops, the client goes, or the client falls [`MAX_MISSED_TICKS`] behind.
    fn subscribe(&self) -> Option<ReceiverStream<Bytes>> {
        let permit = Arc::clone(&self.subscribers).try_acquire_owned().ok()?;
        let mut latest = self.latest.clone();
        latest.mark_changed();
        let (tx, rx) = mpsc::channel::<Bytes>(SUBSCRIBER_FRAMES);
        tokio::spawn(async move {
            let _permit = permit;
            let mut missed = 0u32;
            loop {
                tokio::select! {
                    changed = latest.changed() => if changed.is_err() { break },
                    () = tx.closed() => break,
                }
                let frame = latest.borrow_and_update().sse();
                match tx.try_send(frame) {
                    Ok(()) => missed = 0,
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        missed += 1;
                        if missed >= MAX_MISSED_TICKS {
                            debug!(missed, "Status subscriber dropped: it does not keep up.");
                            break;
                        }
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => break,
                }
            }
        });
        Some(ReceiverStream::new(rx))
    }
}

/// What the status routes need.
#[derive(Clone)]
pub(crate) struct StatusState {
    pub(crate) feed: Arc<StatusFeed>,
    pub(crate) auth_token: Option<AuthToken>,
}

/// `/v2/weir/status` and `/v2/weir/status/stream`.
pub(crate) fn routes(state: StatusState) -> Router {
    Router::new()
        .route("/v2/weir/status", get(status))
        .route("/v2/weir/status/stream", get(stream))
        .with_state(state)
}

async fn status(State(s): State<StatusState>, headers: HeaderMap) -> Response {
    if let Some(refused) = crate::ui::refuse(s.auth_token.as_ref(), &headers) {
        return refused;
    }
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        s.feed.latest_json(),
    )
        .into_response()
}

async fn stream(State(s): State<StatusState>, headers: HeaderMap) -> Response {
    if let Some(refused) = crate::ui::refuse(s.auth_token.as_ref(), &headers) {
        return refused;
    }
    let Some(frames) = s.feed.subscribe() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [
                (header::CONTENT_TYPE, "application/json"),
                (header::RETRY_AFTER, "5"),
            ],
            serde_json::json!({"error": format!(
                "status stream: {} subscribers already, retry later",
                s.feed.options.max_subscribers
            )})
            .to_string(),
        )
            .into_response();
    };
    let body = Body::from_stream(frames.map(Ok::<Bytes, Infallible>));
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn counting() -> StatusSampler {
        let mut n = 0u64;
        Box::new(move || {
            n += 1;
            json!({"tick": n})
        })
    }

    #[test]
    fn a_frame_is_one_sse_event_and_its_json_is_the_document() {
        let f = Frame::of(&json!({"a": "x\ny"}));
        assert_eq!(&f.sse()[..], b"data: {\"a\":\"x\\ny\"}\n\n");
        assert_eq!(&f.json()[..], b"{\"a\":\"x\\ny\"}");
    }

    #[tokio::test]
    async fn subscribers_share_frames_and_are_capped() {
        let feed = StatusFeed::new(
            counting(),
            StatusOptions {
                tick: Duration::from_millis(10),
                max_subscribers: 2,
            },
        );
        feed.start();
        let mut a = feed.subscribe().expect("first");
        let mut b = feed.subscribe().expect("second");
        assert!(feed.subscribe().is_none(), "a third is over the cap");
        let first = a.next().await.expect("a frame");
        assert_eq!(first, b.next().await.expect("a frame"));
        let next = a.next().await.expect("a later frame");
        assert_ne!(first, next);
        drop(a);
        // The permit comes back once the subscriber's task sees the client gone.
        for _ in 0..100 {
            if feed.subscribe().is_some() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("a closed subscriber's place never came back");
    }

    #[tokio::test]
    async fn a_subscriber_that_does_not_read_is_dropped_not_buffered() {
        let feed = StatusFeed::new(
            counting(),
            StatusOptions {
                tick: Duration::from_millis(10),
                max_subscribers: 1,
            },
        );
        feed.start();
        let mut slow = feed.subscribe().expect("subscribes");
        // Not read at all: the subscriber is dropped once it has missed enough ticks.
        while feed.subscribers() > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let mut held = 0;
        while let Some(_frame) = slow.next().await {
            held += 1;
        }
        assert!(held <= SUBSCRIBER_FRAMES, "held {held} frames");
        assert_eq!(feed.subscribers(), 0);
    }

    #[tokio::test]
    async fn stopping_the_ticker_ends_every_stream() {
        let feed = StatusFeed::new(counting(), StatusOptions::default());
        feed.start();
        let mut s = feed.subscribe().expect("subscribes");
        assert!(s.next().await.is_some());
        feed.stop();
        assert!(s.next().await.is_none(), "the stream ends");
    }
}
