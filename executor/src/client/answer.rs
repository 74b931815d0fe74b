//! How one query to an executor ends, exactly once: the first reply that checks out answers the
//! job; a reply from a session that is not the executor's counts as none; and when zenoh drops
//! the query's callback without a reply (the executor died, its link dropped, the timeout
//! passed) the job is answered as unavailable from `Drop`. Answers run on the completion thread,
//! never on zenoh's.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::{debug, warn};
use weir_connectors::echo::quote;
use weir_engine::batch::TensorColumn;
use weir_operators::model::expiry;
use weir_operators::model::{ExecError, ReplicaError};
use zenoh::query::Reply;
use zenoh::session::ZenohId;

use super::{link, Completions, Liveness};
use crate::payload;
use crate::protocol::{ErrorKind, ErrorReply};
use crate::reply_check::{check_columns, OutputCheck};

/// What a query's end calls.
pub(crate) type Completion<T> = Box<dyn FnOnce(T) + Send>;

/// A query's completion, called at most once and always on the completion thread (never on
/// zenoh's): the first reply answers it; the query's end without one answers it from `Drop`.
pub(crate) struct AnswerSlot<T: Send + 'static> {
    done: Mutex<Option<Completion<T>>>,
    completions: Completions,
}

impl<T: Send + 'static> AnswerSlot<T> {
    pub(crate) fn new(done: Completion<T>, completions: Completions) -> Self {
        AnswerSlot {
            done: Mutex::new(Some(done)),
            completions,
        }
    }

    /// Answers with `outcome`, unless already answered.
    pub(crate) fn finish(&self, outcome: T) {
        let done = self.done.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(done) = done {
            self.completions.run(Box::new(move || done(outcome)));
        }
    }
}

/// Decoded reply columns in the order `names` lists them (`Err(name)` of the first missing one).
pub(crate) fn columns_in_order(
    mut columns: Vec<(String, TensorColumn)>,
    names: &[String],
) -> Result<Vec<TensorColumn>, String> {
    names
        .iter()
        .map(|name| {
            let pos = columns
                .iter()
                .position(|(n, _)| n == name)
                .ok_or_else(|| name.clone())?;
            Ok(columns.swap_remove(pos).1)
        })
        .collect()
}

/// The take-once end of one query: answered by the first reply, or as unavailable when zenoh drops
/// the callback without one.
pub(super) struct QueryEnd {
    pub(super) slot: AnswerSlot<Result<Vec<TensorColumn>, ReplicaError>>,
    pub(super) outputs: Vec<OutputCheck>,
    pub(super) rows: usize,
    /// When the job's client stops waiting (the executor was sent the time left).
    pub(super) deadline: Option<Instant>,
    pub(super) node: String,
    pub(super) replica: String,
    pub(super) liveness: Arc<Liveness>,
    /// The query's time-out (for the message when it runs out).
    pub(super) timeout: Duration,
    pub(super) completions: Completions,
}

impl QueryEnd {
    fn finish(&self, outcome: Result<Vec<TensorColumn>, ReplicaError>) {
        self.slot.finish(outcome);
    }

    pub(super) fn on_reply(&self, reply: Reply) {
        let replier = reply.replier_id().map(|id| id.zid());
        if replier.is_none() || replier != self.liveness.executor_zid() {
            if let (None, Err(err)) = (replier, reply.result()) {
                // zenoh's own end of the query (its timeout): no answer from the executor.
                let body = err.payload().to_bytes();
                self.finish(Err(self.transport_failure(&body, "the session's time-out")));
            } else {
                self.foreign(replier);
            }
            return;
        }
        let outcome = match reply.result() {
            Ok(sample) => {
                self.liveness
                    .sign_of_life(&self.completions, &self.node, &self.replica);
                self.decode(sample.payload())
            }
            Err(err) => {
                let body = err.payload().to_bytes();
                let parsed = ErrorReply::parse(&body);
                if parsed.is_some() {
                    self.liveness
                        .sign_of_life(&self.completions, &self.node, &self.replica);
                }
                match parsed {
                    Some(e) if e.kind == ErrorKind::Overloaded => Err(ReplicaError::Unavailable(
                        format!("executor `{}` is overloaded", self.replica),
                    )),
                    Some(e) if e.kind == ErrorKind::Expired => {
                        let now = Instant::now();
                        let late = expiry::lateness(self.deadline, now).unwrap_or_default();
                        Err(ReplicaError::Failed(expiry::expired(&self.node, late)))
                    }
                    Some(e) => Err(ReplicaError::Failed(ExecError::Inference {
                        node: self.node.clone(),
                        message: format!("on executor `{}`: {}", self.replica, quote(&e.message)),
                    })),
                    // Not the executor's document: a router answering on its behalf.
                    None => Err(self.transport_failure(&body, "a router's time-out")),
                }
            }
        };
        self.finish(outcome);
    }

    /// An error reply of zenoh's own: a time-out (a dead link or a slow model, told apart by the
    /// heartbeat) or another transport failure; either way another replica may serve the job.
    fn transport_failure(&self, body: &[u8], origin: &str) -> ReplicaError {
        let reply = link::TransportReply(body);
        if reply.is_timeout() {
            link::timed_out(
                &self.replica,
                self.timeout,
                &self.liveness.heartbeat,
                origin,
            )
        } else {
            link::transport_error(&self.replica, body)
        }
    }

    /// A reply from a session that is not the executor's: dropped, as if it never came.
    fn foreign(&self, replier: Option<ZenohId>) {
        let before = self
            .liveness
            .foreign_replies
            .fetch_add(1, Ordering::Relaxed);
        if before == 0 {
            warn!(node = %self.node, replica = %self.replica, replier = ?replier, "A reply from a session that is not the executor's was dropped (logged once per replica).");
        } else {
            debug!(node = %self.node, replica = %self.replica, replier = ?replier, dropped = before + 1, "A foreign reply was dropped.");
        }
    }

    fn decode(&self, bytes: &zenoh::bytes::ZBytes) -> Result<Vec<TensorColumn>, ReplicaError> {
        let bad = |message: String| {
            ReplicaError::Failed(ExecError::Inference {
                node: self.node.clone(),
                message: format!("executor `{}` replied {message}", self.replica),
            })
        };
        let columns = payload::decode(bytes).map_err(|e| bad(format!("garbage: {e}")))?;
        let names: Vec<String> = self.outputs.iter().map(|o| o.name.clone()).collect();
        let columns = columns_in_order(columns, &names)
            .map_err(|name| bad(format!("without output `{name}`")))?;
        check_columns(&columns, &self.outputs, self.rows).map_err(bad)?;
        Ok(columns)
    }
}

impl Drop for QueryEnd {
    fn drop(&mut self) {
        let replica = self.replica.clone();
        self.finish(Err(ReplicaError::Unavailable(format!(
            "no reply from executor `{replica}` (its session closed, or no route to it)"
        ))));
    }
}
