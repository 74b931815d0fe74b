//! The replica pool: picks a live replica per job (least outstanding, round robin, or a Kairos
//! round over its own queue), dispatches, and re-dispatches what comes back unavailable (see the
//! parent module for the rules).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tracing::{info, warn};
use weir_engine::batch::TensorColumn;
use weir_engine::routing::Routing;

use super::super::executor::{AnswerOnce, Job};
use super::super::expiry;
use super::super::routing::{concat_jobs, split_rows, KairosQueue, RoutingError};
use super::super::ExecError;
use super::{
    ExecutorReport, InferenceService, Replica, ReplicaError, DOWN_COOLDOWN, FAILURES_BEFORE_DOWN,
    MAX_ATTEMPTS,
};

/// Dispatch counters of a pool; every field only grows.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PoolStats {
    /// Jobs dispatched, first tries and re-dispatches (each job of a Kairos batch counts).
    pub dispatched: u64,
    /// Re-dispatches after an unavailable answer.
    pub redispatched: u64,
    /// Jobs failed because no replica was alive (or attempts ran out).
    pub failed: u64,
    /// Answers that came after the job was already answered (suppressed).
    pub late_answers: u64,
}

/// One replica's state in the pool.
struct Slot {
    replica: Arc<dyn Replica>,
    outstanding: AtomicUsize,
    failures_in_a_row: AtomicU32,
    down_until: Mutex<Option<Instant>>,
    dispatched: AtomicU64,
}

impl Slot {
    fn healthy(&self, now: Instant) -> bool {
        let down = self.down_until.lock().unwrap_or_else(|p| p.into_inner());
        !matches!(*down, Some(t) if t > now)
    }
}

/// A job in the pool: its rows (kept for re-dispatch) and its take-once answer.
struct PoolJob {
    inputs: Vec<TensorColumn>,
    enqueued_at: Instant,
    deadline: Option<Instant>,
    trace: Option<weir_engine::trace::JobTrace>,
    done: AnswerOnce,
    attempts: AtomicU32,
}

impl PoolJob {
    /// `job`, not yet dispatched, answered at most once.
    fn new(job: Job) -> Arc<Self> {
        Arc::new(PoolJob {
            inputs: job.inputs,
            enqueued_at: job.enqueued_at,
            deadline: job.deadline,
            trace: job.trace,
            done: AnswerOnce::new(job.done),
            attempts: AtomicU32::new(0),
        })
    }
}

/// How a pool picks replicas.
enum Mode {
    LeastOutstanding,
    RoundRobin,
    Kairos(Box<Mutex<KairosQueue<Arc<PoolJob>>>>),
}

struct PoolInner {
    node: String,
    slots: Vec<Slot>,
    rows_per_job: usize,
    mode: Mode,
    /// Re-dispatches waiting for a replica with room.
    backlog: Mutex<VecDeque<Arc<PoolJob>>>,
    next: AtomicUsize,
    dispatched: AtomicU64,
    redispatched: AtomicU64,
    failed: AtomicU64,
    late_answers: AtomicU64,
}

/// What picking a replica found.
enum Pick {
    Slot(usize),
    /// Every live replica is full.
    Full,
    /// No replica is alive.
    NoneAlive,
}

/// Dispatches a model node's jobs over its replicas.
#[derive(Clone)]
pub struct ReplicaPool {
    inner: Arc<PoolInner>,
}

impl std::fmt::Debug for ReplicaPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicaPool")
            .field("node", &self.inner.node)
            .field("replicas", &self.replica_names())
            .finish()
    }
}

impl ReplicaPool {
    /// A pool over `replicas` for node `node`, cutting jobs of at most `rows_per_job` rows, each
    /// job to the live replica with the fewest outstanding.
    pub fn new(node: &str, replicas: Vec<Arc<dyn Replica>>, rows_per_job: usize) -> Self {
        Self::build(node, replicas, rows_per_job, Mode::LeastOutstanding)
    }

    /// A pool routing by `routing` (a validated model node's `routing:`).
    ///
    /// # Errors
    /// When a Kairos routing does not describe these replicas (validation rules it out for YAML
    /// graphs).
    pub fn with_routing(
        node: &str,
        replicas: Vec<Arc<dyn Replica>>,
        rows_per_job: usize,
        routing: &Routing,
    ) -> Result<Self, RoutingError> {
        let mode = match routing {
            Routing::LeastOutstanding => Mode::LeastOutstanding,
            Routing::RoundRobin => Mode::RoundRobin,
            Routing::Kairos(k) => Mode::Kairos(Box::new(Mutex::new(KairosQueue::new(
                k,
                replicas.len(),
                rows_per_job.max(1),
            )?))),
        };
        Ok(Self::build(node, replicas, rows_per_job, mode))
    }

    fn build(node: &str, replicas: Vec<Arc<dyn Replica>>, rows_per_job: usize, mode: Mode) -> Self {
        let inner = Arc::new(PoolInner {
            node: node.to_string(),
            mode,
            slots: replicas
                .into_iter()
                .map(|replica| Slot {
                    replica,
                    outstanding: AtomicUsize::new(0),
                    failures_in_a_row: AtomicU32::new(0),
                    down_until: Mutex::new(None),
                    dispatched: AtomicU64::new(0),
                })
                .collect(),
            rows_per_job: rows_per_job.max(1),
            backlog: Mutex::new(VecDeque::new()),
            next: AtomicUsize::new(0),
            dispatched: AtomicU64::new(0),
            redispatched: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            late_answers: AtomicU64::new(0),
        });
        for (i, slot) in inner.slots.iter().enumerate() {
            let weak = Arc::downgrade(&inner);
            slot.replica.on_revival(Box::new(move || {
                if let Some(inner) = weak.upgrade() {
                    let slot = &inner.slots[i];
                    slot.failures_in_a_row.store(0, Ordering::Relaxed);
                    *slot.down_until.lock().unwrap_or_else(|p| p.into_inner()) = None;
                    info!(node = %inner.node, replica = slot.replica.name(), "Replica is back.");
                    PoolInner::wake(&inner);
                }
            }));
        }
        ReplicaPool { inner }
    }

    /// Replica names, in pool order.
    pub fn replica_names(&self) -> Vec<String> {
        self.inner
            .slots
            .iter()
            .map(|s| s.replica.name().to_string())
            .collect()
    }

    /// Per replica: name, alive, calls outstanding, jobs dispatched to it so far.
    pub fn replica_states(&self) -> Vec<(String, bool, usize, u64)> {
        self.inner
            .slots
            .iter()
            .map(|s| {
                (
                    s.replica.name().to_string(),
                    s.replica.is_alive(),
                    s.outstanding.load(Ordering::Relaxed),
                    s.dispatched.load(Ordering::Relaxed),
                )
            })
            .collect()
    }

    /// Per replica (by name), what its executor last reported about itself, for the replicas
    /// that report (remote ones).
    pub fn executor_reports(&self) -> Vec<(String, ExecutorReport)> {
        self.inner
            .slots
            .iter()
            .filter_map(|s| {
                let report = s.replica.executor_report()?;
                Some((s.replica.name().to_string(), report))
            })
            .collect()
    }

    /// The dispatch counters now.
    pub fn stats(&self) -> PoolStats {
        let i = &self.inner;
        PoolStats {
            dispatched: i.dispatched.load(Ordering::Relaxed),
            redispatched: i.redispatched.load(Ordering::Relaxed),
            failed: i.failed.load(Ordering::Relaxed),
            late_answers: i.late_answers.load(Ordering::Relaxed),
        }
    }
}

impl InferenceService for ReplicaPool {
    fn try_submit(&self, job: Job) -> Result<(), Job> {
        let inner = &self.inner;
        if let Mode::Kairos(queue) = &inner.mode {
            return PoolInner::kairos_submit(inner, queue, job);
        }
        let backlog_waiting = !inner
            .backlog
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty();
        match inner.pick() {
            Pick::Full => Err(job),
            Pick::Slot(_) if backlog_waiting => {
                // Re-dispatched work goes first; new work waits in the dataflow.
                PoolInner::pump(inner);
                Err(job)
            }
            Pick::Slot(slot) => {
                PoolInner::dispatch(inner, slot, PoolJob::new(job));
                Ok(())
            }
            Pick::NoneAlive => {
                inner.failed.fetch_add(1, Ordering::Relaxed);
                (job.done)(Err(inner.no_replica_error()));
                Ok(())
            }
        }
    }

    fn rows_per_job(&self) -> usize {
        self.inner.rows_per_job
    }
}

impl PoolInner {
    fn no_replica_error(&self) -> ExecError {
        ExecError::Unavailable {
            node: self.node.clone(),
            message: format!(
                "no replica is alive (replicas: {})",
                self.slots
                    .iter()
                    .map(|s| s.replica.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    /// The live replica with room and the fewest outstanding; healthy ones before set-aside ones.
    fn pick(&self) -> Pick {
        let now = Instant::now();
        let n = self.slots.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let mut best: Option<(bool, usize, usize)> = None; // (set aside, outstanding, index)
        let mut any_alive = false;
        for k in 0..n {
            let i = (start + k) % n;
            let s = &self.slots[i];
            if !s.replica.is_alive() {
                continue;
            }
            any_alive = true;
            let outstanding = s.outstanding.load(Ordering::Relaxed);
            if outstanding >= s.replica.capacity() {
                continue;
            }
            // Round robin: the first with room in turn from `start`; else the least outstanding.
            let order = match self.mode {
                Mode::RoundRobin => k,
                _ => outstanding,
            };
            let key = (!s.healthy(now), order, i);
            if best.is_none_or(|b| (key.0, key.1) < (b.0, b.1)) {
                best = Some(key);
            }
        }
        match best {
            Some((_, _, i)) => Pick::Slot(i),
            None if any_alive => Pick::Full,
            None => Pick::NoneAlive,
        }
    }

    fn dispatch(inner: &Arc<PoolInner>, slot: usize, job: Arc<PoolJob>) {
        PoolInner::dispatch_batch(inner, slot, vec![job]);
    }

    /// One call to replica `slot` serving `jobs` (Kairos batches several; the other modes one):
    /// their rows concatenated, the answer split back per job. Jobs whose deadline passed while
    /// they waited are answered expired instead ([`crate::model::expiry`]).
    fn dispatch_batch(inner: &Arc<PoolInner>, slot: usize, mut jobs: Vec<Arc<PoolJob>>) {
        let now = Instant::now();
        jobs.retain(|job| match expiry::lateness(job.deadline, now) {
            Some(late) => {
                job.done.answer(Err(expiry::expired(&inner.node, late)));
                false
            }
            None => true,
        });
        if jobs.is_empty() {
            return;
        }
        let deadline = expiry::latest(jobs.iter().map(|j| j.deadline));
        let s = &inner.slots[slot];
        let n = jobs.len() as u64;
        s.outstanding.fetch_add(1, Ordering::AcqRel);
        s.dispatched.fetch_add(n, Ordering::Relaxed);
        inner.dispatched.fetch_add(n, Ordering::Relaxed);
        for job in &jobs {
            job.attempts.fetch_add(1, Ordering::Relaxed);
        }
        for trace in jobs.iter().filter_map(|j| j.trace.as_ref()) {
            trace.sent_to(s.replica.name());
        }
        let enqueued_at = jobs.iter().map(|j| j.enqueued_at).min();
        let inputs = match jobs.as_slice() {
            [job] => Ok(job.inputs.clone()),
            _ => {
                let all: Vec<&[TensorColumn]> = jobs.iter().map(|j| j.inputs.as_slice()).collect();
                concat_jobs(&all)
            }
        };
        let me = Arc::clone(inner);
        match (inputs, enqueued_at) {
            (Ok(inputs), Some(enqueued_at)) => s.replica.dispatch(
                inputs,
                (
                    enqueued_at,
                    deadline,
                    jobs.iter().find_map(|j| j.trace.clone()),
                ),
                Box::new(move |outcome| PoolInner::complete(&me, slot, jobs, outcome)),
            ),
            (Err(message), _) => {
                let e = ExecError::Inference {
                    node: inner.node.clone(),
                    message,
                };
                PoolInner::complete(&me, slot, jobs, Err(ReplicaError::Failed(e)));
            }
            (Ok(_), None) => {
                s.outstanding.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    fn complete(
        inner: &Arc<PoolInner>,
        slot: usize,
        jobs: Vec<Arc<PoolJob>>,
        outcome: Result<Vec<TensorColumn>, ReplicaError>,
    ) {
        let s = &inner.slots[slot];
        s.outstanding.fetch_sub(1, Ordering::AcqRel);
        let served = outcome.is_ok();
        let answer = |job: &PoolJob, outcome: Result<Vec<TensorColumn>, ExecError>| {
            if !job.done.answer(outcome) {
                inner.late_answers.fetch_add(1, Ordering::Relaxed);
            }
        };
        let mut requeue = Vec::new();
        match outcome {
            Ok(columns) if jobs.len() == 1 => {
                s.failures_in_a_row.store(0, Ordering::Relaxed);
                answer(&jobs[0], Ok(columns));
            }
            Ok(columns) => {
                s.failures_in_a_row.store(0, Ordering::Relaxed);
                let rows: Vec<usize> = jobs
                    .iter()
                    .map(|j| j.inputs.first().map_or(1, TensorColumn::len))
                    .collect();
                match split_rows(&columns, &rows) {
                    Ok(parts) => {
                        for (job, part) in jobs.iter().zip(parts) {
                            answer(job, Ok(part));
                        }
                    }
                    Err(message) => {
                        let e = ExecError::Inference {
                            node: inner.node.clone(),
                            message,
                        };
                        for job in &jobs {
                            answer(job, Err(e.clone()));
                        }
                    }
                }
            }
            Err(ReplicaError::Failed(e)) => {
                s.failures_in_a_row.store(0, Ordering::Relaxed);
                for job in &jobs {
                    answer(job, Err(e.clone()));
                }
            }
            Err(ReplicaError::Unavailable(reason)) => {
                let failures = s.failures_in_a_row.fetch_add(1, Ordering::Relaxed) + 1;
                // Every failure from the threshold on sets it aside again: one that is still
                // failing when its cool-down ends goes back at its next failure, not after
                // winning the least-outstanding race (it answers at once) for job after job.
                if failures >= FAILURES_BEFORE_DOWN {
                    if failures == FAILURES_BEFORE_DOWN {
                        warn!(node = %inner.node, replica = s.replica.name(), %reason,
                            "Replica set aside after failing in a row.");
                    }
                    *s.down_until.lock().unwrap_or_else(|p| p.into_inner()) =
                        Some(Instant::now() + DOWN_COOLDOWN);
                }
                for job in jobs {
                    if job.done.is_answered() {
                        continue;
                    }
                    if job.attempts.load(Ordering::Relaxed) >= MAX_ATTEMPTS {
                        inner.failed.fetch_add(1, Ordering::Relaxed);
                        job.done.answer(Err(ExecError::Unavailable {
                            node: inner.node.clone(),
                            message: format!("gave up after {MAX_ATTEMPTS} dispatches: {reason}"),
                        }));
                    } else {
                        inner.redispatched.fetch_add(1, Ordering::Relaxed);
                        requeue.push(job);
                    }
                }
            }
        }
        match &inner.mode {
            Mode::Kairos(queue) => {
                {
                    let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
                    q.finished(slot, Instant::now(), served);
                    // Back at the head, in their order.
                    for job in requeue.into_iter().rev() {
                        let rows = job.inputs.first().map_or(1, TensorColumn::len);
                        q.push_front(Arc::clone(&job), rows, job.enqueued_at);
                    }
                }
                PoolInner::kairos_round(inner);
            }
            _ => {
                inner
                    .backlog
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .extend(requeue);
                PoolInner::pump(inner);
            }
        }
    }

    /// Something changed (a replica came back): dispatch what waits.
    fn wake(inner: &Arc<PoolInner>) {
        match inner.mode {
            Mode::Kairos(_) => PoolInner::kairos_round(inner),
            _ => PoolInner::pump(inner),
        }
    }

    /// Kairos: queue the job if there is room (else hand it back), then run a round.
    fn kairos_submit(
        inner: &Arc<PoolInner>,
        queue: &Mutex<KairosQueue<Arc<PoolJob>>>,
        job: Job,
    ) -> Result<(), Job> {
        if !inner.slots.iter().any(|s| s.replica.is_alive()) {
            inner.failed.fetch_add(1, Ordering::Relaxed);
            (job.done)(Err(inner.no_replica_error()));
            PoolInner::kairos_round(inner);
            return Ok(());
        }
        let refused = {
            let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
            if q.has_room() {
                let rows = job.inputs.first().map_or(1, TensorColumn::len);
                let enqueued_at = job.enqueued_at;
                q.push(PoolJob::new(job), rows, enqueued_at);
                None
            } else {
                Some(job)
            }
        };
        // A refused offer is retried by the operator shortly: its round is the fine tick.
        PoolInner::kairos_round(inner);
        match refused {
            Some(job) => Err(job),
            None => Ok(()),
        }
    }

    /// Kairos: one distribution round over the usable replicas, then the dispatches it chose
    /// (outside the lock: a replica may answer inline). With no replica alive, every queued job
    /// fails.
    fn kairos_round(inner: &Arc<PoolInner>) {
        let Mode::Kairos(queue) = &inner.mode else {
            return;
        };
        let now = Instant::now();
        let alive: Vec<bool> = inner.slots.iter().map(|s| s.replica.is_alive()).collect();
        let healthy: Vec<bool> = inner
            .slots
            .iter()
            .zip(&alive)
            .map(|(s, &a)| a && s.healthy(now))
            .collect();
        // Set-aside replicas are still used when nothing healthy is alive.
        let usable = if healthy.iter().any(|&h| h) {
            healthy
        } else {
            alive.clone()
        };
        let (dispatch, failed) = {
            let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
            if alive.iter().any(|&a| a) {
                (q.round(now, &usable), Vec::new())
            } else {
                (Vec::new(), q.drain())
            }
        };
        for job in failed {
            inner.failed.fetch_add(1, Ordering::Relaxed);
            job.done.answer(Err(inner.no_replica_error()));
        }
        for (jobs, slot) in dispatch {
            PoolInner::dispatch_batch(inner, slot, jobs);
        }
    }

    /// Dispatches backlogged jobs while some live replica has room.
    fn pump(inner: &Arc<PoolInner>) {
        loop {
            let job = {
                let mut backlog = inner.backlog.lock().unwrap_or_else(|p| p.into_inner());
                if backlog.is_empty() {
                    return;
                }
                match inner.pick() {
                    Pick::Full => return,
                    Pick::Slot(slot) => backlog.pop_front().map(|j| (Some(slot), j)),
                    Pick::NoneAlive => backlog.pop_front().map(|j| (None, j)),
                }
            };
            match job {
                Some((Some(slot), job)) => PoolInner::dispatch(inner, slot, job),
                Some((None, job)) => {
                    inner.failed.fetch_add(1, Ordering::Relaxed);
                    job.done.answer(Err(inner.no_replica_error()));
                }
                None => return,
            }
        }
    }
}
