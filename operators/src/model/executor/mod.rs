//! The ONNX Runtime executor of one model node: sessions on their own threads, a bounded job queue,
//! dynamic batching and load statistics.
//!
//! `instances` threads each own a `Session` with `intra_op_threads` threads. They share one bounded
//! queue (a full queue refuses [`ModelExecutor::try_submit`], which holds work back in the dataflow:
//! back-pressure, not an unbounded buffer). A thread takes a job and batches more behind it
//! (`batching.rs`, padding rows of different lengths under padded batching: `padding.rs`); the
//! rows run as one call and the outputs go back per job. A job's `done`
//! callback runs on the executor thread; it must only hand the result over (channel + activator).
//!
//! A *switchable* executor ([`ModelExecutor::start_switchable`], [`ModelExecutor::start_auto`] for
//! `parallelism: auto`) changes its concurrency × intra-op threads live, with every session made
//! and warmed with [`SWITCHABLE_WARMUP_CALLS`] synthetic calls at start; [`super::parallelism`]
//! describes how. A fixed executor keeps the plain path (one session per thread, blocking on the
//! queue; its first requests warm it). The threads' loops are in `sessions.rs`.
//!
//! A batch that reaches a fixed executor whose sessions are free may be cut into one job per free
//! session ([`ModelExecutor::spread`], `spread.rs`) when the node's measured time per row says it
//! pays.
//!
//! [`stats`] keeps the load counters every consumer reads (SERF's controller, `weir run`,
//! `/metrics` through [`metrics`]); [`call_log`] keeps single calls while someone profiles;
//! [`call_cost`] learns a padded node's cost of calls by rows and length, and cuts its batches of
//! mixed lengths into the calls predicted cheapest.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Sender, TrySendError};
use tracing::warn;
use weir_engine::batch::TensorColumn;
use weir_engine::tensor::DType;
use weir_engine::validate::CallShape;

use super::ort_env::{OrtRuntime, SessionSettings};
use super::parallelism::{
    AutoOptions, Controller, ParallelismError, ParallelismSnapshot, Switchboard,
};
use super::ExecError;
use weir_serf::config::Config;

mod batch_buckets;
mod batching;
pub mod call_cost;
pub mod call_log;
pub mod metrics;
pub mod padding;
pub mod row_cost;
mod sessions;
mod split;
mod spread;
pub mod stats;
mod warmup;

pub use batch_buckets::{
    bound as batch_bucket_bound, bucket_of as batch_bucket_of, BATCH_BUCKET_BOUNDS,
};
pub use call_log::{CallRecord, RecordedCalls};
pub use padding::Padding;
pub use row_cost::RowCostSnapshot;
pub use sessions::SWITCHABLE_WARMUP_CALLS;
pub use spread::SPREAD_PAYS_FROM;
pub use stats::{LoadSnapshot, LoadStats, CALL_SECONDS_BOUNDS};

use warmup::WarmupCalls;

use sessions::{
    core_pins, pin_or_warn, run_here, session_loop, spawn_session_thread, switchable_loop, warm_up,
    warmup_inputs, SessionSlot, SharedSession,
};

/// What an executor serves and how.
#[derive(Debug, Clone)]
pub struct ExecutorConfig {
    /// Node id (for errors and logs).
    pub node: String,
    /// The model file.
    pub path: std::path::PathBuf,
    /// How the model is called: batched, one request per call, or without a batch dimension.
    pub call: CallShape,
    /// Most rows per call (1 for per-request models).
    pub max_batch: usize,
    /// Longest the first job of a batch waits for more.
    pub max_delay: Duration,
    /// Whether a session takes its share of the queue and waits only while every session runs a
    /// call (the default), or takes the whole queue and always waits.
    pub wait: weir_engine::spec::BatchWait,
    /// How large a call's batch may grow: while measured cheaper per row (`row_cost.rs`), or to
    /// `max_batch`.
    pub grow: weir_engine::spec::BatchGrow,
    /// Sessions (threads) running at once.
    pub instances: usize,
    /// Intra-op threads per session.
    pub intra_op_threads: usize,
    /// Jobs the queue holds.
    pub queue_capacity: usize,
    /// Whether ORT threads spin while idle.
    pub spinning: bool,
    /// Pin session threads and intra-op workers to cores from this index of the process's CPUs
    /// on (`None`: the OS places them); see [`super::pinning`].
    pub pin_cores_from: Option<usize>,
    /// Model input names, in the order jobs carry their columns.
    pub inputs: Vec<String>,
    /// Model outputs to return: name and element type, in order.
    pub outputs: Vec<(String, DType)>,
    /// Padded batching: rows differing along these axes share a call (`None`: only rows of one
    /// shape do).
    pub pad: Option<Padding>,
    /// How long a remote replica may take per job before it is re-dispatched (remote only).
    pub timeout: Option<Duration>,
    /// Device the sessions run on.
    pub device: weir_engine::spec::Device,
    /// ONNX Runtime's graph-optimisation level for the sessions.
    pub graph_level: weir_engine::spec::GraphLevel,
    /// Samples every session runs before it serves; a failed call fails the start. Empty: a
    /// fixed executor's first requests warm it, a switchable one warms each session with
    /// [`SWITCHABLE_WARMUP_CALLS`] synthetic calls.
    pub warmup: Vec<weir_engine::warmup::WarmupSample>,
}

impl ExecutorConfig {
    /// Whether a fixed executor of this configuration measures its cost per row by batch size
    /// and stops growing batches where it rises (`row_cost.rs`): under `grow: while_cheaper`, for
    /// batched calls of alike rows (not padded) on CPU sessions of one intra-op thread, whose
    /// thread's CPU time is the call's cost.
    pub fn measures_row_cost(&self) -> bool {
        self.grow == weir_engine::spec::BatchGrow::WhileCheaper
            && self.call == CallShape::Batched
            && self.device == weir_engine::spec::Device::Cpu
            && self.intra_op_threads == 1
            && self.pad.is_none()
            && self.max_batch > 1
    }

    /// The settings of one of its sessions with `threads` intra-op threads, its workers pinned
    /// per `worker_affinity`.
    pub fn session_settings<'a>(
        &self,
        threads: usize,
        worker_affinity: Option<&'a str>,
    ) -> SessionSettings<'a> {
        SessionSettings {
            intra_op_threads: threads,
            spinning: self.spinning,
            device: self.device,
            worker_affinity,
            level: self.graph_level,
        }
    }
}

/// Called once with a job's outputs (one column per configured output) or its error.
pub type JobDone = Box<dyn FnOnce(Result<Vec<TensorColumn>, ExecError>) + Send>;

/// A job's answer behind a take-once slot: whichever path answers first wins, later ones find it
/// empty. How replica failover and parity reconstruction answer a job exactly once.
pub struct AnswerOnce(std::sync::Mutex<Option<JobDone>>);

impl AnswerOnce {
    /// A slot holding `done`.
    pub fn new(done: JobDone) -> Self {
        AnswerOnce(std::sync::Mutex::new(Some(done)))
    }

    /// Takes the answer out without calling it (to hand a refused job back whole).
    pub fn take(&self) -> Option<JobDone> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Answers unless already answered; returns whether this call answered.
    pub fn answer(&self, outcome: Result<Vec<TensorColumn>, ExecError>) -> bool {
        match self.take() {
            Some(done) => {
                done(outcome);
                true
            }
            None => false,
        }
    }

    /// Whether the answer was given (or taken).
    pub fn is_answered(&self) -> bool {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).is_none()
    }
}

/// Rows to infer.
pub struct Job {
    /// One column per model input, in [`ExecutorConfig::inputs`] order, all with the same rows.
    pub inputs: Vec<TensorColumn>,
    /// When it was queued (the batching delay counts from here).
    pub enqueued_at: Instant,
    /// After this nobody waits for its rows: it is answered [`ExecError::Expired`] instead of
    /// run ([`super::expiry`]). `None`: it runs however long it waited.
    pub deadline: Option<Instant>,
    /// The trace of a job holding a sampled request's rows: whoever runs it records its call
    /// there (and a remote replica carries its context on).
    pub trace: Option<weir_engine::trace::JobTrace>,
    /// Receives the outcome.
    pub done: JobDone,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("inputs", &self.inputs.len())
            .field("rows", &self.rows())
            .finish()
    }
}

impl Job {
    /// Rows it holds.
    pub fn rows(&self) -> usize {
        self.inputs.first().map(TensorColumn::len).unwrap_or(0)
    }

    /// The job, unless its deadline passed by `now`: then it is answered
    /// [`ExecError::Expired`] for `node` and `None` comes back.
    pub fn unless_expired(self, node: &str, now: Instant) -> Option<Job> {
        match super::expiry::lateness(self.deadline, now) {
            Some(late) => {
                (self.done)(Err(super::expiry::expired(node, late)));
                None
            }
            None => Some(self),
        }
    }
}

/// A running executor. Dropping it lets queued jobs finish, then stops its threads.
pub struct ModelExecutor {
    config: Arc<ExecutorConfig>,
    queue: Option<Sender<Job>>,
    stats: Arc<LoadStats>,
    threads: Vec<JoinHandle<()>>,
    /// A fixed executor's sessions, which [`ModelExecutor::try_run_here`] may borrow (none for a
    /// switchable one).
    sessions: Vec<SharedSession>,
    /// The configuration threads follow, for a switchable executor.
    board: Option<Arc<Switchboard>>,
    /// SERF's control loop, under `parallelism: auto`.
    controller: Option<Controller>,
}

impl std::fmt::Debug for ModelExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelExecutor")
            .field("node", &self.config.node)
            .finish()
    }
}

impl ModelExecutor {
    /// Creates the sessions (so a bad model fails here, not later) and starts their threads.
    ///
    /// # Errors
    /// When the runtime is missing or a session cannot be created.
    pub fn start(runtime: &OrtRuntime, config: ExecutorConfig) -> Result<ModelExecutor, ExecError> {
        let config = Arc::new(config);
        let (tx, rx) = bounded::<Job>(config.queue_capacity.max(1));
        let stats = Arc::new(if config.measures_row_cost() {
            LoadStats::measuring_row_cost()
        } else {
            LoadStats::default()
        });
        let pins = core_pins(&config)?;
        let threads_per_call = config.intra_op_threads.max(1);
        let warmup = WarmupCalls::prepare(&config)?;
        let mut sessions = Vec::with_capacity(config.instances.max(1));
        for i in 0..config.instances.max(1) {
            let workers = pins.as_ref().and_then(|p| p.workers(i, threads_per_call));
            let mut session = runtime.session_on(
                &config.node,
                &config.path,
                &config.session_settings(threads_per_call, workers.as_deref()),
            )?;
            if let Some(calls) = &warmup {
                calls.run_on(&mut session, &stats)?;
            }
            sessions.push(session);
        }
        if warmup.is_some() {
            tracing::info!(node = %config.node, calls = stats.snapshot().warmup_runs, "Sessions warmed up.");
        }
        let sessions: Vec<SharedSession> = sessions.into_iter().map(SessionSlot::shared).collect();
        let mut threads = Vec::with_capacity(sessions.len());
        for (i, session) in sessions.iter().enumerate() {
            let node = config.node.clone();
            let (config, stats, rx) = (Arc::clone(&config), Arc::clone(&stats), rx.clone());
            let session = Arc::clone(session);
            let cpu = pins.as_ref().map(|p| p.caller(i, threads_per_call));
            let handle = spawn_session_thread(node, i, move || {
                if let Some(cpu) = cpu {
                    pin_or_warn(&config.node, cpu);
                }
                session_loop(session, &config, &stats, &rx);
            })?;
            threads.push(handle);
        }
        Ok(ModelExecutor {
            config,
            queue: Some(tx),
            stats,
            threads,
            sessions,
            board: None,
            controller: None,
        })
    }

    /// Starts an executor that can switch live among `configs` (concurrency × intra-op threads),
    /// running `initial` first; `config.instances`/`intra_op_threads` are ignored. Every session
    /// any configuration needs is created here (see [`super::parallelism`]), so switching with
    /// [`ModelExecutor::set_parallelism`] never loads the model again.
    ///
    /// # Errors
    /// When `initial` is not among `configs`, the runtime is missing, or a session cannot be
    /// created.
    pub fn start_switchable(
        runtime: &OrtRuntime,
        config: ExecutorConfig,
        configs: &[Config],
        initial: Config,
    ) -> Result<ModelExecutor, ExecError> {
        let (board, wakes) =
            Switchboard::new(&config.node, configs, initial).map_err(|e| ExecError::Session {
                node: config.node.clone(),
                path: config.path.display().to_string(),
                message: e.to_string(),
            })?;
        let config = Arc::new(config);
        let (tx, rx) = bounded::<Job>(config.queue_capacity.max(1));
        let stats = Arc::new(LoadStats::default());
        let warmup = WarmupCalls::prepare(&config)?;
        let synthetic = if warmup.is_none() {
            warmup_inputs(&config)
        } else {
            None
        };
        let pins = core_pins(&config)?;
        let mut per_thread = Vec::with_capacity(board.thread_count());
        for i in 0..board.thread_count() {
            let mut sessions = Vec::new();
            for t in board.thread_counts_of(i) {
                let workers = pins.as_ref().and_then(|p| p.workers(i, t));
                let mut session = runtime.session_on(
                    &config.node,
                    &config.path,
                    &config.session_settings(t, workers.as_deref()),
                )?;
                if let Some(calls) = &warmup {
                    calls.run_on(&mut session, &stats)?;
                } else if let Some(inputs) = &synthetic {
                    warm_up(&config.node, &mut session, inputs, t);
                }
                sessions.push((t, session));
            }
            per_thread.push(sessions);
        }
        let mut threads = Vec::with_capacity(per_thread.len());
        for ((i, sessions), wake) in per_thread.into_iter().enumerate().zip(wakes) {
            let node = config.node.clone();
            let (config, stats, rx, board) = (
                Arc::clone(&config),
                Arc::clone(&stats),
                rx.clone(),
                Arc::clone(&board),
            );
            let pins = pins.clone();
            let handle = spawn_session_thread(node, i, move || {
                let channels = (&rx, &wake);
                switchable_loop(
                    i,
                    sessions,
                    &config,
                    &stats,
                    channels,
                    &board,
                    pins.as_ref(),
                )
            })?;
            threads.push(handle);
        }
        Ok(ModelExecutor {
            config,
            queue: Some(tx),
            stats,
            threads,
            sessions: Vec::new(),
            board: Some(board),
            controller: None,
        })
    }

    /// Starts a switchable executor over `auto`'s candidates with SERF's control loop choosing
    /// the configuration from the arrival rate (`parallelism: auto`).
    ///
    /// # Errors
    /// As [`ModelExecutor::start_switchable`], or when the scheduler rejects its options.
    pub fn start_auto(
        runtime: &OrtRuntime,
        config: ExecutorConfig,
        auto: AutoOptions,
    ) -> Result<ModelExecutor, ExecError> {
        let configs: Vec<Config> = auto.candidates.configs().collect();
        let mut executor =
            ModelExecutor::start_switchable(runtime, config, &configs, auto.initial)?;
        if let Some(board) = &executor.board {
            let controller =
                Controller::start(Arc::clone(board), Arc::clone(&executor.stats), auto).map_err(
                    |e| ExecError::Session {
                        node: executor.config.node.clone(),
                        path: executor.config.path.display().to_string(),
                        message: format!("SERF scheduler: {e}"),
                    },
                )?;
            executor.controller = Some(controller);
        }
        Ok(executor)
    }

    /// Switches to `concurrency` requests at once with `threads` intra-op threads each: batches
    /// taken from now on use it, batches running keep their session. Returns whether it changed.
    ///
    /// # Errors
    /// [`ParallelismError::Fixed`] for an executor started with one configuration,
    /// [`ParallelismError::Unknown`] for a configuration not prepared at start.
    pub fn set_parallelism(
        &self,
        concurrency: usize,
        threads: usize,
    ) -> Result<bool, ParallelismError> {
        match &self.board {
            Some(board) => board.set(concurrency, threads),
            None => Err(ParallelismError::Fixed {
                node: self.config.node.clone(),
            }),
        }
    }

    /// The parallelism gauges of a switchable executor (`None` for a fixed one).
    pub fn parallelism(&self) -> Option<ParallelismSnapshot> {
        self.board.as_ref().map(|b| b.snapshot())
    }

    /// The configuration.
    pub fn config(&self) -> &ExecutorConfig {
        &self.config
    }

    /// Queues `job`, or hands it back when the queue is full (or the executor is stopping).
    pub fn try_submit(&self, job: Job) -> Result<(), Job> {
        let Some(queue) = &self.queue else {
            return Err(job);
        };
        let rows = job.rows() as u64;
        match queue.try_send(job) {
            Ok(()) => {
                self.stats.enqueued.fetch_add(1, Ordering::Relaxed);
                if let Some(board) = &self.board {
                    board.record_arrivals(rows);
                }
                Ok(())
            }
            Err(TrySendError::Full(job)) | Err(TrySendError::Disconnected(job)) => Err(job),
        }
    }

    /// Runs `job` on the calling thread, now, when the executor is idle: nothing queued, no call
    /// running, a session free, and its threads not pinned to cores (a switchable executor never
    /// lends its sessions). Then its `done` has been called when this returns; otherwise the job
    /// comes back untouched, for [`ModelExecutor::try_submit`]. It saves the hand-off to a
    /// session thread and back, at the price of blocking the caller for the call.
    pub fn try_run_here(&self, job: Job) -> Result<(), Job> {
        let idle = self.queue.as_ref().is_some_and(Sender::is_empty)
            && self.stats.calls_running() == 0
            && self.config.pin_cores_from.is_none();
        if !idle {
            return Err(job);
        }
        for slot in &self.sessions {
            if let Ok(mut slot) = slot.try_lock() {
                self.stats.enqueued.fetch_add(1, Ordering::Relaxed);
                run_here(&mut slot, &self.config, &self.stats, job);
                return Ok(());
            }
        }
        Err(job)
    }

    /// How many jobs a batch of `rows` rows arriving now should be cut into: one per free session
    /// of a fixed CPU executor with nothing queued, when the node's measured time per row says
    /// the rows moved off the first session save at least [`SPREAD_PAYS_FROM`] (`spread.rs`); 1
    /// otherwise. Always 1 for a switchable executor (SERF sets its concurrency), a GPU session
    /// (where rows do cost less in one call) and a batch-specialised build (each part would be
    /// padded to the whole batch).
    pub fn spread(&self, rows: usize) -> usize {
        let spreadable = self.config.call == CallShape::Batched
            && self.config.device == weir_engine::spec::Device::Cpu
            && self.sessions.len() >= 2;
        if !spreadable || self.queue.as_ref().is_none_or(|q| !q.is_empty()) {
            return 1;
        }
        let running = usize::try_from(self.stats.calls_running()).unwrap_or(usize::MAX);
        let free = self.sessions.len().saturating_sub(running);
        spread::parts(rows, free, self.stats.time_per_row())
    }

    /// The load counters now.
    pub fn stats(&self) -> LoadSnapshot {
        self.stats.snapshot()
    }

    /// The live counters (to record call durations: [`LoadStats::record_calls`]).
    pub fn load_stats(&self) -> &LoadStats {
        &self.stats
    }

    /// The live counters, shared (for a job's `done` to count time it holds the session).
    pub fn shared_stats(&self) -> Arc<LoadStats> {
        Arc::clone(&self.stats)
    }
}

impl Drop for ModelExecutor {
    fn drop(&mut self) {
        self.controller = None;
        self.queue = None;
        if let Some(board) = &self.board {
            board.stop();
        }
        let me = std::thread::current().id();
        for t in self.threads.drain(..) {
            // The last owner may be a job's completion running on one of these very threads
            // (a wrapper service captured in the callback): that thread ends by itself once the
            // queue is gone; joining it from itself would deadlock.
            if t.thread().id() == me {
                continue;
            }
            if t.join().is_err() {
                warn!(node = %self.config.node, "An executor thread panicked.");
            }
        }
    }
}

#[cfg(test)]
mod tests;
