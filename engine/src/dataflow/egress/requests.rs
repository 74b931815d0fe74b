//! The request log: every admitted request not yet answered, under its current attempt.
//!
//! Each entry is keyed by the request's original id and holds its responder and the id of its
//! current attempt; with replicated stateful nodes it also holds the request as admitted, so a
//! request whose speculative path was rolled back runs again under its next attempt id
//! ([`RequestLog::next_attempt`]). Only the current attempt is live ([`RequestLog::is_live`]):
//! rows and answers of an older one are stale and dropped wherever they are met.
//!
//! The log is its own value, apart from the reply table that answers through it, because the
//! stateful nodes' proxies read liveness from it while the reply table's release hook reads those
//! proxies: the log is made first, the proxies and the table are each built holding it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use tracing::debug;

use crate::request::{
    next_attempt, original_id, AdmittedRequest, RequestError, Responder, Response,
};
use crate::trace::TraceBook;

const SHARDS: usize = 16;

struct Pending {
    /// The current attempt's id.
    attempt: u64,
    responder: Responder,
    /// The request as admitted, kept while replicated stateful nodes may need it run again.
    logged: Option<AdmittedRequest>,
    /// When the client stops waiting.
    deadline: Option<Instant>,
}

/// Pending requests and how to answer them.
pub struct RequestLog {
    shards: Vec<Mutex<HashMap<u64, Pending>>>,
    answered: AtomicU64,
    duplicates: AtomicU64,
    stale: AtomicU64,
    traces: TraceBook,
}

impl Default for RequestLog {
    fn default() -> Self {
        RequestLog {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            answered: AtomicU64::new(0),
            duplicates: AtomicU64::new(0),
            stale: AtomicU64::new(0),
            traces: TraceBook::default(),
        }
    }
}

impl std::fmt::Debug for RequestLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestLog")
            .field("pending", &self.pending())
            .field("answered", &self.answered())
            .finish()
    }
}

impl RequestLog {
    fn shard(&self, id: u64) -> std::sync::MutexGuard<'_, HashMap<u64, Pending>> {
        // A poisoned shard only means a responder panicked; the map itself is intact.
        self.shards[(original_id(id) as usize) % SHARDS]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Which pending requests are sampled, and the records of their batches (traces).
    pub fn traces(&self) -> &TraceBook {
        &self.traces
    }

    /// Registers how to answer request `id`, which nobody waits for after `deadline`.
    pub fn insert(&self, id: u64, deadline: Option<Instant>, responder: Responder) {
        self.insert_entry(id, deadline, responder, None);
    }

    /// Registers how to answer `request`, keeping it to run again if a failover needs it.
    pub fn insert_logged(&self, request: AdmittedRequest, responder: Responder) {
        self.insert_entry(request.id, request.deadline, responder, Some(request));
    }

    fn insert_entry(
        &self,
        id: u64,
        deadline: Option<Instant>,
        responder: Responder,
        logged: Option<AdmittedRequest>,
    ) {
        self.shard(id).insert(
            original_id(id),
            Pending {
                attempt: id,
                responder,
                logged,
                deadline,
            },
        );
    }

    /// When the client of request `id` stops waiting: `None` when it set no deadline, or `id`
    /// is not a pending request's current attempt (its rows are stale, or it was answered).
    pub fn deadline(&self, id: u64) -> Option<Instant> {
        self.shard(id)
            .get(&original_id(id))
            .filter(|p| p.attempt == id)
            .and_then(|p| p.deadline)
    }

    /// Whether `id` is the current attempt of a pending request (rows of anything else are stale).
    pub fn is_live(&self, id: u64) -> bool {
        self.shard(id)
            .get(&original_id(id))
            .is_some_and(|p| p.attempt == id)
    }

    /// Starts the next attempt of the request first admitted as `original`: returns the logged
    /// request under the new attempt's id, and the attempt it replaces. `None` when the request
    /// is no longer pending, was not logged, or ran out of attempts.
    pub fn next_attempt(&self, original: u64) -> Option<(AdmittedRequest, u64)> {
        let mut shard = self.shard(original);
        let entry = shard.get_mut(&original_id(original))?;
        let logged = entry.logged.as_ref()?;
        let next = next_attempt(entry.attempt)?;
        let old = std::mem::replace(&mut entry.attempt, next);
        let mut request = logged.clone();
        request.id = next;
        Some((request, old))
    }

    /// Answers request `id`, if it is still pending. Returns whether it was.
    pub fn answer(&self, id: u64, outcome: Result<Response, RequestError>) -> bool {
        let mut shard = self.shard(id);
        let current = shard.get(&original_id(id)).map(|p| p.attempt == id);
        let responder = match current {
            Some(true) => shard.remove(&original_id(id)),
            Some(false) => {
                drop(shard);
                self.stale.fetch_add(1, Ordering::Relaxed);
                debug!(
                    request_id = id,
                    "Dropped the answer of a superseded attempt."
                );
                return false;
            }
            None => None,
        };
        drop(shard);
        match responder {
            Some(p) => {
                self.traces.end(id);
                self.answered.fetch_add(1, Ordering::Relaxed);
                (p.responder)(outcome);
                true
            }
            None => {
                self.duplicates.fetch_add(1, Ordering::Relaxed);
                debug!(
                    request_id = id,
                    "Dropped a second answer for a request already answered."
                );
                false
            }
        }
    }

    /// Counts an answer of a superseded attempt dropped before it reached the log.
    pub(crate) fn count_stale(&self) {
        self.stale.fetch_add(1, Ordering::Relaxed);
    }

    /// Requests not yet answered.
    pub fn pending(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).len())
            .sum()
    }

    /// Requests answered so far.
    pub fn answered(&self) -> u64 {
        self.answered.load(Ordering::Relaxed)
    }

    /// Second answers suppressed so far.
    pub fn duplicates(&self) -> u64 {
        self.duplicates.load(Ordering::Relaxed)
    }

    /// Answers of superseded attempts dropped so far.
    pub fn stale(&self) -> u64 {
        self.stale.load(Ordering::Relaxed)
    }
}
