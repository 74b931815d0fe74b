//! A model node's replicas and the dispatcher over them: least outstanding among the live ones
//! (or round robin, or Kairos), with failover.
//!
//! A [`Replica`] is one place a node's model runs: an executor in this process
//! ([`LocalReplica`]) or a remote executor process (the `weir-executor` crate's zenoh client). The
//! [`ReplicaPool`] gives each job to the live replica with the fewest jobs outstanding (ties go
//! round-robin), up to each replica's capacity; when every live replica is full it refuses the job,
//! which holds it back in the dataflow (back-pressure). With `routing: round_robin` it takes the
//! next live replica with room in turn instead. With `routing: kairos` jobs wait in the pool's own
//! bounded queue ([`super::routing::KairosQueue`]) and each round (on arrival, completion, a
//! refused offer, a revival) matches them to *idle* replicas by Kairos's min-cost assignment; each
//! replica holds one job at a time; a full queue refuses the job (back-pressure).
//!
//! Failover: a replica answers each dispatch exactly once, with outputs, a model error (answered to
//! the client: another replica would fail the same way), or *unavailable* (it died, timed out, or
//! shed the job). An unavailable job is re-dispatched to another live replica. A replica with
//! [`FAILURES_BEFORE_DOWN`] unavailable answers in a row is set aside for [`DOWN_COOLDOWN`]; it is
//! still used when nothing else is alive, and its liveliness coming back (a restart) clears it. A
//! job fails only when no replica is alive, or after [`MAX_ATTEMPTS`] dispatches.
//!
//! Answered once: a job's `done` sits behind a take-once slot. The first outcome answers it; a
//! late answer from a replica that was given up on (a timed-out one that answers after all) finds
//! the slot empty and is counted in [`PoolStats::late_answers`], never delivered.
//!
//! This module holds the contracts ([`InferenceService`], [`Replica`]) and the in-process replica;
//! `pool` the pool's picking, dispatch and failover; `metrics` its `/metrics` families.

use std::sync::Arc;
use std::time::{Duration, Instant};

use weir_engine::batch::TensorColumn;

use super::executor::{Job, ModelExecutor};
use super::ExecError;

pub mod metrics;
mod pool;
#[cfg(test)]
pub(crate) mod tests;

pub use pool::{PoolStats, ReplicaPool};

/// Unavailable answers in a row after which a replica is set aside.
pub const FAILURES_BEFORE_DOWN: u32 = 2;
/// How long a set-aside replica is skipped (unless it is the only one alive).
pub const DOWN_COOLDOWN: Duration = Duration::from_millis(500);
/// Most dispatches of one job before it fails.
pub const MAX_ATTEMPTS: u32 = 8;

/// When a dispatched job was first queued, when nobody waits for it any more (`None`: no
/// deadline), and its trace when it holds a sampled request's rows (a remote replica carries the
/// context to its executor; the local one records its call there).
pub type JobTiming = (
    Instant,
    Option<Instant>,
    Option<weir_engine::trace::JobTrace>,
);

/// Where a model node's jobs go: one executor, or a pool of replicas.
pub trait InferenceService: Send + Sync {
    /// Queues `job`, or hands it back when there is no room now (the caller retries later).
    fn try_submit(&self, job: Job) -> Result<(), Job>;
    /// Runs `job` on the calling thread when the service is idle and can (an in-process executor
    /// with nothing queued or running), its `done` called before this returns; hands it back
    /// otherwise (the default: submit it).
    fn try_run_here(&self, job: Job) -> Result<(), Job> {
        Err(job)
    }
    /// Most rows one job may hold.
    fn rows_per_job(&self) -> usize;
    /// Rows each job cut from a batch of `rows` rows arriving now should hold: at most
    /// [`InferenceService::rows_per_job`] (the default), fewer where the service would run the
    /// parts at once on sessions that are idle now (an in-process executor:
    /// [`ModelExecutor::spread`]).
    fn rows_per_job_now(&self, _rows: usize) -> usize {
        self.rows_per_job()
    }
    /// Rows each job cut from a batch should hold when it is not spread: at most
    /// [`InferenceService::rows_per_job`] (the default), fewer where the service's calls have
    /// measured rows dearer in larger calls (an in-process executor's preferred batch size,
    /// `row_cost.rs`).
    fn preferred_rows_per_job(&self) -> usize {
        self.rows_per_job()
    }
}

impl InferenceService for ModelExecutor {
    fn try_submit(&self, job: Job) -> Result<(), Job> {
        ModelExecutor::try_submit(self, job)
    }

    fn try_run_here(&self, job: Job) -> Result<(), Job> {
        ModelExecutor::try_run_here(self, job)
    }

    fn rows_per_job(&self) -> usize {
        if self.config().call.batched() {
            self.config().max_batch.max(1)
        } else {
            1
        }
    }

    fn rows_per_job_now(&self, rows: usize) -> usize {
        let most = self.preferred_rows_per_job();
        if rows > most {
            return most;
        }
        rows.div_ceil(self.spread(rows)).max(1)
    }

    fn preferred_rows_per_job(&self) -> usize {
        self.load_stats().rows_now(self.rows_per_job())
    }
}

/// Why a replica did not produce outputs for a dispatch.
#[derive(Debug, Clone)]
pub enum ReplicaError {
    /// The replica is gone, timed out or shed the job: try another.
    Unavailable(String),
    /// The model failed on these rows: the job's answer.
    Failed(ExecError),
}

/// Receives one dispatch's outcome, exactly once.
pub type ReplicaDone = Box<dyn FnOnce(Result<Vec<TensorColumn>, ReplicaError>) + Send>;

/// One place a node's model runs.
pub trait Replica: Send + Sync {
    /// Its name (`local` or the executor's name).
    fn name(&self) -> &str;
    /// Whether it is believed alive now.
    fn is_alive(&self) -> bool;
    /// Most jobs it should hold at once.
    fn capacity(&self) -> usize;
    /// Sends `inputs` (columns in the model's input order), queued since `timing.0` and awaited
    /// until `timing.1` (a replica that queues the job drops it once that passes); `done` is
    /// called exactly once.
    fn dispatch(&self, inputs: Vec<TensorColumn>, timing: JobTiming, done: ReplicaDone);
    /// Registers a callback run when the replica comes back alive (after a restart, say).
    fn on_revival(&self, _callback: Box<dyn Fn() + Send + Sync>) {}
    /// What the replica's executor last said about itself, where it reports (a remote one).
    fn executor_report(&self) -> Option<ExecutorReport> {
        None
    }
}

/// A remote replica's executor as it reports itself (its load reports, every half second): when
/// it was last heard from and its own counters for the node's model. Counters an older
/// executor does not send are `None`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExecutorReport {
    /// Since the executor's last sign of life (a load report or a reply).
    pub heard_ago: Duration,
    /// Since its newest load report; `None` before the first.
    pub reported_ago: Option<Duration>,
    /// The device it runs on.
    pub device: String,
    /// Jobs waiting in its queue for the model.
    pub queue_depth: u64,
    /// Jobs it holds, queued or running.
    pub in_flight: Option<u64>,
    /// Inference calls so far.
    pub runs: u64,
    /// Rows inferred so far.
    pub rows: u64,
    /// Jobs it answered so far.
    pub served: Option<u64>,
    /// Calls that failed so far.
    pub errors: Option<u64>,
    /// Time inside ONNX Runtime so far.
    pub busy: Duration,
    /// Sessions serving the model.
    pub sessions: u32,
    /// The most rows its calls of the model take now, from their measured cost per row; `None`
    /// while they grow to its largest batch (or from an executor too old to say).
    pub preferred_batch: Option<u64>,
}

/// The in-process executor as a replica.
pub struct LocalReplica {
    executor: Arc<ModelExecutor>,
}

impl LocalReplica {
    /// Wraps `executor`.
    pub fn new(executor: Arc<ModelExecutor>) -> Self {
        LocalReplica { executor }
    }
}

impl Replica for LocalReplica {
    fn name(&self) -> &str {
        weir_engine::spec::LOCAL_REPLICA
    }

    fn is_alive(&self) -> bool {
        true
    }

    fn capacity(&self) -> usize {
        self.executor.config().queue_capacity.max(1) + self.executor.config().instances.max(1)
    }

    fn dispatch(&self, inputs: Vec<TensorColumn>, timing: JobTiming, done: ReplicaDone) {
        let (enqueued_at, deadline, trace) = timing;
        let job = Job {
            inputs,
            enqueued_at,
            deadline,
            trace,
            // A refused job (below) is shed, not failed: the pool offers it to another replica.
            done: Box::new(move |r| {
                done(r.map_err(|e| match e {
                    ExecError::Unavailable { message, .. } => ReplicaError::Unavailable(message),
                    e => ReplicaError::Failed(e),
                }))
            }),
        };
        if let Err(job) = self.executor.try_submit(job) {
            // The pool keeps within the queue's capacity, but a job the pool counts as answered
            // (its answer came another way) may still hold a place in it; and a stopping
            // executor refuses everything. Either way another replica may take the job.
            (job.done)(Err(ExecError::Unavailable {
                node: self.executor.config().node.clone(),
                message: "the local executor's queue refused the job".into(),
            }));
        }
    }
}
