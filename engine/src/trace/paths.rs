//! A graph's recent request paths: for some answered requests, every hop its rows took (node,
//! batch, start offset, duration, batch size, replica), kept in a bounded ring and found by the
//! request's id (the dashboard's "request path").
//!
//! Which requests: every [`PathStore::every`]-th one admitted, and every request sampled for
//! tracing. Lineage alone names a request's hops and is on every reply for free, but their
//! times are only measured where the [`super::TraceBook`] is told a request is sampled: keeping
//! times for every request would cost each batch a lock and a record, and each reply a
//! timeline, which is far above the "a few atomics" an unwatched feature may cost. So the
//! decision is taken once per request at admission with one relaxed `fetch_add`
//! ([`PathStore::pick`]); a picked request is then recorded exactly as a sampled trace is (its
//! model hops record their job's times, the inline operators are timed from their neighbours),
//! and its timeline is built at the reply by [`super::request_spans`], the same code that makes
//! its spans, so a path and a trace never disagree. With the default of one request in 16 the
//! recorded share stays small at any rate, and at a thousand requests a second the ring's
//! [`MAX_PATHS`] still cover the last few seconds; a user who needs one particular request's path
//! sends it with a sampled `traceparent`, or runs with every request picked.
//!
//! Bounds: at most [`MAX_PATHS`] paths (the oldest goes first), each of at most
//! [`MAX_PATH_HOPS`] hops, under an id of at most [`MAX_ID_BYTES`] bytes from a URL-safe
//! charset ([`check_id`]): a client id outside it is kept under the engine's own id instead.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use super::{AttributeValue, SpanRecord};

/// Paths kept, at most (the newest).
pub const MAX_PATHS: usize = 256;

/// Hops kept per path, at most (a request's rows share them).
pub const MAX_PATH_HOPS: usize = 256;

/// Longest request id kept or looked up.
pub const MAX_ID_BYTES: usize = 128;

/// Requests picked by default: one in this many.
pub const DEFAULT_EVERY: u32 = 16;

/// Why a request id cannot name a path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// No characters.
    #[error("the request id is empty")]
    Empty,
    /// Over [`MAX_ID_BYTES`].
    #[error("the request id is {0} bytes, longer than the {MAX_ID_BYTES} allowed")]
    TooLong(usize),
    /// A character outside `A-Z a-z 0-9 . _ : -`.
    #[error("the request id has {0:?} at byte {1}; ids are made of A-Z a-z 0-9 . _ : -")]
    BadChar(char, usize),
}

/// Checks that `id` may name a path: 1 to [`MAX_ID_BYTES`] bytes of `A-Z a-z 0-9 . _ : -` (safe
/// in a URL path segment, in JSON and in a page, unescaped).
///
/// # Errors
/// The [`IdError`] naming what is wrong.
pub fn check_id(id: &str) -> Result<(), IdError> {
    if id.is_empty() {
        return Err(IdError::Empty);
    }
    if id.len() > MAX_ID_BYTES {
        return Err(IdError::TooLong(id.len()));
    }
    match id
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')))
    {
        Some((at, c)) => Err(IdError::BadChar(c, at)),
        None => Ok(()),
    }
}

/// One hop of a request's path.
#[derive(Debug, Clone, PartialEq)]
pub struct PathHop {
    /// The node (`ingress` for the graph's entry).
    pub node: String,
    /// The hop this one received its row from (an index into [`RequestPath::hops`]); `None` for
    /// the first.
    pub parent: Option<usize>,
    /// The node's batch that held the row.
    pub seq: u64,
    /// When it started, after the request arrived.
    pub start: Duration,
    /// How long it took.
    pub duration: Duration,
    /// Whether the node measured its own times (a model node's job); otherwise the hop runs from
    /// its parent's end to its first child's start.
    pub measured: bool,
    /// Rows of the call that ran it (the batch, other requests' rows included), when it ran here.
    pub batch_size: Option<usize>,
    /// Time spent waiting for a session thread, when known.
    pub queue_wait: Option<Duration>,
    /// Time of the model call, when it ran here.
    pub run: Option<Duration>,
    /// The replica that ran it, for a model node with several.
    pub replica: Option<String>,
    /// Whether the job went to another process (a remote executor).
    pub remote: bool,
    /// Rows the node joined into this one (a fan-in or gather counts each input).
    pub inputs: u32,
}

/// The path of one answered request.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestPath {
    /// The client's id, or the engine's own (`weir-<n>`) when the client sent none or one
    /// [`check_id`] refuses.
    pub id: String,
    /// When the request arrived.
    pub started: SystemTime,
    /// How long it took, arrival to answer.
    pub duration: Duration,
    /// Rows of the request.
    pub rows: usize,
    /// Every hop, parents before their children.
    pub hops: Vec<PathHop>,
    /// Whether hops past [`MAX_PATH_HOPS`] were left out.
    pub truncated: bool,
}

impl RequestPath {
    /// The path of request `id` (the client's, if [`check_id`] takes it, else `weir-<engine_id>`)
    /// from the spans its rows' lineage made ([`super::request_spans`]), the request having run
    /// from `started` to `ended`.
    pub fn from_spans(
        client_id: Option<&str>,
        engine_id: u64,
        (started, ended): (SystemTime, SystemTime),
        rows: usize,
        spans: &[SpanRecord],
    ) -> RequestPath {
        let id = match client_id {
            Some(c) if check_id(c).is_ok() => c.to_string(),
            _ => format!("weir-{engine_id}"),
        };
        let offset = |t: SystemTime| t.duration_since(started).unwrap_or_default();
        let kept = &spans[..spans.len().min(MAX_PATH_HOPS)];
        let hops = kept
            .iter()
            .map(|s| {
                let int = |key: &str| {
                    s.attributes.iter().find_map(|(k, v)| match v {
                        AttributeValue::Int(n) if *k == key => Some(*n),
                        _ => None,
                    })
                };
                let micros = |key: &str| int(key).map(|n| Duration::from_micros(n.unsigned_abs()));
                let measured = int("weir.job_rows").is_some();
                PathHop {
                    node: s.name.clone(),
                    parent: s
                        .parent
                        .and_then(|p| kept.iter().position(|o| o.context.span_id == p)),
                    seq: int("weir.batch_seq").map_or(0, i64::unsigned_abs),
                    start: offset(s.start),
                    duration: s.end.duration_since(s.start).unwrap_or_default(),
                    measured,
                    batch_size: int("weir.batch_size").and_then(|n| usize::try_from(n).ok()),
                    queue_wait: micros("weir.queue_wait_us"),
                    run: micros("weir.run_us"),
                    replica: s.attributes.iter().find_map(|(k, v)| match v {
                        AttributeValue::Str(r) if *k == "weir.replica" => Some(r.clone()),
                        _ => None,
                    }),
                    remote: s
                        .attributes
                        .iter()
                        .any(|(k, v)| *k == "weir.remote" && *v == AttributeValue::Bool(true)),
                    inputs: int("weir.inputs")
                        .and_then(|n| u32::try_from(n).ok())
                        .unwrap_or(1),
                }
            })
            .collect();
        RequestPath {
            id,
            started,
            duration: offset(ended),
            rows,
            hops,
            truncated: spans.len() > MAX_PATH_HOPS,
        }
    }
}

/// A graph's recent request paths (see the module docs).
#[derive(Debug)]
pub struct PathStore {
    every: u32,
    admitted: AtomicU64,
    paths: Mutex<VecDeque<Arc<RequestPath>>>,
}

impl Default for PathStore {
    fn default() -> Self {
        PathStore::new(DEFAULT_EVERY)
    }
}

impl PathStore {
    /// A store picking one request in `every` (0: none).
    pub fn new(every: u32) -> PathStore {
        PathStore {
            every,
            admitted: AtomicU64::new(0),
            paths: Mutex::new(VecDeque::new()),
        }
    }

    /// One request in how many is picked (0: none).
    pub fn every(&self) -> u32 {
        self.every
    }

    /// Whether to record the path of the request being admitted now: `Some` trace id to run it
    /// under (derived from the count, never all zero) for one request in [`PathStore::every`].
    pub fn pick(&self) -> Option<[u8; 16]> {
        if self.every == 0 {
            return None;
        }
        let n = self.admitted.fetch_add(1, Ordering::Relaxed);
        if !n.is_multiple_of(u64::from(self.every)) {
            return None;
        }
        let mut id = [0u8; 16];
        id[..4].copy_from_slice(b"path");
        id[8..].copy_from_slice(&n.to_be_bytes());
        Some(id)
    }

    fn paths(&self) -> std::sync::MutexGuard<'_, VecDeque<Arc<RequestPath>>> {
        self.paths.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps `path`, dropping the oldest past [`MAX_PATHS`].
    pub fn keep(&self, path: RequestPath) {
        let mut paths = self.paths();
        paths.push_back(Arc::new(path));
        while paths.len() > MAX_PATHS {
            paths.pop_front();
        }
    }

    /// The paths kept, newest first.
    pub fn recent(&self) -> Vec<Arc<RequestPath>> {
        self.paths().iter().rev().cloned().collect()
    }

    /// The newest `n` ids, newest first.
    pub fn recent_ids(&self, n: usize) -> Vec<String> {
        self.paths()
            .iter()
            .rev()
            .take(n)
            .map(|p| p.id.clone())
            .collect()
    }

    /// The newest path kept under `id`.
    pub fn get(&self, id: &str) -> Option<Arc<RequestPath>> {
        self.paths().iter().rev().find(|p| p.id == id).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lineage::{LineageEntry, CLIENT, INGRESS};
    use crate::plan::Plan;
    use crate::trace::book::HopRecord;
    use crate::trace::context::Sampler;
    use crate::trace::{request_spans, TraceBook};

    fn path(id: &str) -> RequestPath {
        RequestPath {
            id: id.into(),
            started: SystemTime::UNIX_EPOCH,
            duration: Duration::ZERO,
            rows: 1,
            hops: Vec::new(),
            truncated: false,
        }
    }

    #[test]
    fn ids_are_checked_for_length_and_charset() {
        assert_eq!(check_id("req-1.a_b:c"), Ok(()));
        assert_eq!(check_id(""), Err(IdError::Empty));
        let long = "a".repeat(MAX_ID_BYTES + 1);
        assert_eq!(check_id(&long), Err(IdError::TooLong(MAX_ID_BYTES + 1)));
        assert_eq!(check_id(&"a".repeat(MAX_ID_BYTES)), Ok(()));
        assert_eq!(check_id("a/b"), Err(IdError::BadChar('/', 1)));
        assert_eq!(check_id("<x>"), Err(IdError::BadChar('<', 0)));
        assert_eq!(check_id("é"), Err(IdError::BadChar('é', 0)));
    }

    #[test]
    fn one_request_in_every_is_picked_and_zero_picks_none() {
        let store = PathStore::new(4);
        let picked: Vec<bool> = (0..8).map(|_| store.pick().is_some()).collect();
        assert_eq!(
            picked,
            [true, false, false, false, true, false, false, false]
        );
        assert!(store.pick().is_some_and(|t| t != [0; 16]));
        let off = PathStore::new(0);
        assert!((0..10).all(|_| off.pick().is_none()));
        assert!((0..10).all(|_| PathStore::new(1).pick().is_some()));
    }

    #[test]
    fn the_store_keeps_the_newest_paths_and_finds_the_newest_of_an_id() {
        let store = PathStore::new(1);
        for i in 0..(MAX_PATHS + 10) {
            store.keep(path(&format!("r{i}")));
        }
        assert_eq!(store.recent().len(), MAX_PATHS);
        assert!(store.get("r0").is_none(), "the oldest went first");
        let newest = format!("r{}", MAX_PATHS + 9);
        assert_eq!(store.recent_ids(2)[0], newest);
        assert!(store.get(&newest).is_some());
        let mut again = path("r20");
        again.rows = 7;
        store.keep(again);
        assert_eq!(
            store.get("r20").map(|p| p.rows),
            Some(7),
            "the newer of one id"
        );
    }

    #[test]
    fn a_path_is_read_off_the_request_s_spans_with_offsets_and_parents() {
        let book = TraceBook::default();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(50);
        book.record(
            1,
            3,
            HopRecord {
                requests: vec![9],
                start: t0 + Duration::from_millis(2),
                end: t0 + Duration::from_millis(6),
                queue_wait: Some(Duration::from_millis(1)),
                run: Some(Duration::from_millis(3)),
                batch_size: Some(4),
                job_rows: 1,
                replica: Some("e1".into()),
                reconstruction: None,
            },
        );
        let plan = Plan {
            name: "g".into(),
            inputs: Vec::new(),
            nodes: Vec::new(),
            outputs: Vec::new(),
            streams: Vec::new(),
        };
        let trace = Sampler::new(1.0).decide(None, None);
        let lineage = vec![
            LineageEntry {
                pred_node: CLIENT,
                pred_seq: 9,
                node: INGRESS,
                seq: 0,
            },
            LineageEntry {
                pred_node: INGRESS,
                pred_seq: 0,
                node: 1,
                seq: 3,
            },
        ];
        let ended = t0 + Duration::from_millis(8);
        let spans = request_spans(&book, &plan, &trace, 9, &lineage, (t0, ended));
        let p = RequestPath::from_spans(Some("bad id"), 9, (t0, ended), 1, &spans);
        assert_eq!(
            p.id, "weir-9",
            "a refused client id gives way to the engine's"
        );
        assert_eq!(p.duration, Duration::from_millis(8));
        assert_eq!(p.hops.len(), 2);
        let (ingress, model) = (&p.hops[0], &p.hops[1]);
        assert_eq!(ingress.node, "ingress");
        assert!(!ingress.measured);
        assert_eq!(ingress.parent, None);
        assert_eq!(
            ingress.duration,
            Duration::from_millis(2),
            "to its child's start"
        );
        assert_eq!(model.parent, Some(0));
        assert_eq!(model.seq, 3);
        assert!(model.measured);
        assert_eq!(model.start, Duration::from_millis(2));
        assert_eq!(model.duration, Duration::from_millis(4));
        assert_eq!(model.batch_size, Some(4));
        assert_eq!(model.run, Some(Duration::from_millis(3)));
        assert_eq!(model.replica.as_deref(), Some("e1"));
        assert!(!model.remote);
        let ok = RequestPath::from_spans(Some("mine-1"), 9, (t0, ended), 1, &spans);
        assert_eq!(ok.id, "mine-1");
    }
}
