//! The ONNX Runtime executor of one model node: sessions on their own threads, a bounded job queue,
//! dynamic batching and load statistics.
//!
//! `instances` threads each own a `Session` with `intra_op_threads` threads. They share one bounded
//! queue (a full queue refuses [`ModelExecutor::try_submit`], which holds work back in the dataflow:
//! back-pressure, not an unbounded buffer). A thread takes a job, and for a model with a dynamic
//! batch dimension keeps taking jobs until `max_batch` rows are gathered or the first job has
//! waited `max_delay`; the rows run as one call and the outputs are sliced back per job without a
//! copy. A model whose batch dimension is fixed to 1 runs one call per row. A job's `done` callback
//! runs on the executor thread; it must only hand the result over (channel + activator).
//!
//! A *switchable* executor ([`ModelExecutor::start_switchable`], [`ModelExecutor::start_auto`] for
//! `parallelism: auto`) changes its concurrency × intra-op threads live, with every session made
//! and warmed with [`SWITCHABLE_WARMUP_CALLS`] synthetic calls at start; [`super::parallelism`]
//! describes how. A fixed executor takes exactly the path it always did (one session per thread,
//! blocking on the queue; its first requests warm it).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender, TrySendError};
use ort::session::{Session, SessionInputValue};
use ort::value::TensorRef;
use tracing::{debug, warn};
use weir_engine::batch::TensorColumn;
use weir_engine::tensor::{DType, TensorData};

use super::ort_env::OrtRuntime;
use super::parallelism::{
    AutoOptions, Controller, ParallelismError, ParallelismSnapshot, Switchboard,
};
use super::pinning::{pin_current_thread, CorePins};
use super::synthetic::SyntheticInputs;
use super::ExecError;
use weir_serf::config::Config;

/// What an executor serves and how.
#[derive(Debug, Clone)]
pub struct ExecutorConfig {
    /// Node id (for errors and logs).
    pub node: String,
    /// The model file.
    pub path: std::path::PathBuf,
    /// Whether the model takes a dynamic batch dimension.
    pub batched: bool,
    /// Most rows per call (1 for per-request models).
    pub max_batch: usize,
    /// Longest the first job of a batch waits for more.
    pub max_delay: Duration,
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
    /// How long a remote replica may take per job before it is re-dispatched (remote only).
    pub timeout: Option<Duration>,
    /// Device the sessions run on.
    pub device: weir_engine::spec::Device,
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
    fn rows(&self) -> usize {
        self.inputs.first().map(TensorColumn::len).unwrap_or(0)
    }
}

/// Counters of one executor; every field only grows.
#[derive(Debug, Default)]
pub struct LoadStats {
    enqueued: AtomicU64,
    dequeued: AtomicU64,
    runs: AtomicU64,
    rows: AtomicU64,
    errors: AtomicU64,
    busy_ns: AtomicU64,
    /// Jobs answered by a call (ok or failed) and their time from queued to answered, summed.
    jobs_answered: AtomicU64,
    sojourn_ns: AtomicU64,
    /// Runs by batch size: 1, 2, 3–4, 5–8, ..., 129+.
    batch_sizes: [AtomicU64; BATCH_BUCKETS],
    /// Calls by duration, bucketed by [`CALL_SECONDS_BOUNDS`] (the last is open).
    call_seconds: [AtomicU64; CALL_BUCKETS],
    /// Each call's duration, while someone records them.
    call_log: CallLog,
}

/// Every call, kept only between [`LoadStats::record_calls`] and [`LoadStats::take_calls`]
/// (profiling a node through the graph: the serving path's own call times, one by one); otherwise
/// a relaxed flag read per call.
#[derive(Debug, Default)]
struct CallLog {
    on: AtomicBool,
    calls: Mutex<RecordedCalls>,
}

/// What the call log kept between [`LoadStats::record_calls`] and [`LoadStats::take_calls`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordedCalls {
    /// Every call, in the order they ended.
    pub calls: Vec<CallRecord>,
    /// When each job answered meanwhile had been queued at the node (its arrival there), in time
    /// order.
    pub arrivals: Vec<Instant>,
}

/// One call of a session, as the call log keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallRecord {
    /// When the call returned.
    pub ended_at: Instant,
    /// How long it took.
    pub duration: Duration,
    /// How long its session thread had been idle before it (since the end of its last call; `None`
    /// for the thread's first call, or a call of several rows: `idle_gap`).
    pub idle_before: Option<Duration>,
}

const CALL_BUCKETS: usize = 13;

/// Upper bounds of the call-duration buckets, in seconds (the last bucket is open).
pub const CALL_SECONDS_BOUNDS: [f64; CALL_BUCKETS - 1] = [
    0.0001, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0,
];

const BATCH_BUCKETS: usize = 9;

/// Upper bounds of the batch-size buckets (the last is open).
pub const BATCH_BUCKET_BOUNDS: [usize; BATCH_BUCKETS - 1] = [1, 2, 4, 8, 16, 32, 64, 128];

/// A copy of an executor's counters at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadSnapshot {
    /// Jobs queued.
    pub enqueued: u64,
    /// Jobs taken by a session.
    pub dequeued: u64,
    /// Inference calls.
    pub runs: u64,
    /// Rows inferred.
    pub rows: u64,
    /// Calls that failed.
    pub errors: u64,
    /// Time inside ONNX Runtime, summed over sessions.
    pub busy: Duration,
    /// Jobs answered by a call (ok or failed).
    pub jobs_answered: u64,
    /// Time from queued to answered (waiting in the node's queue plus the call), summed over the
    /// answered jobs: the sojourn a queueing model of the node predicts.
    pub sojourn: Duration,
    /// Calls per batch-size bucket (see [`BATCH_BUCKET_BOUNDS`]).
    pub batch_sizes: [u64; BATCH_BUCKETS],
    /// Calls per duration bucket (see [`CALL_SECONDS_BOUNDS`]).
    pub call_seconds: [u64; CALL_BUCKETS],
}

impl LoadSnapshot {
    /// Jobs waiting in the queue.
    pub fn queue_depth(&self) -> u64 {
        self.enqueued.saturating_sub(self.dequeued)
    }

    /// Mean rows per call.
    pub fn mean_batch_size(&self) -> f64 {
        if self.runs == 0 {
            0.0
        } else {
            self.rows as f64 / self.runs as f64
        }
    }
}

impl LoadStats {
    /// Counts `jobs`, answered now, with their time since they were queued.
    fn record_answers(&self, jobs: &[Job], now: Instant) {
        if self.call_log.on.load(Ordering::Relaxed) {
            self.call_log
                .calls
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .arrivals
                .extend(jobs.iter().map(|j| j.enqueued_at));
        }
        let sojourn: Duration = jobs
            .iter()
            .map(|j| now.saturating_duration_since(j.enqueued_at))
            .sum();
        self.jobs_answered
            .fetch_add(jobs.len() as u64, Ordering::Relaxed);
        self.sojourn_ns
            .fetch_add(sojourn.as_nanos() as u64, Ordering::Relaxed);
    }

    fn record_run(&self, rows: usize, elapsed: Duration, idle_before: Option<Duration>, ok: bool) {
        self.runs.fetch_add(1, Ordering::Relaxed);
        self.rows.fetch_add(rows as u64, Ordering::Relaxed);
        self.busy_ns
            .fetch_add(elapsed.as_nanos() as u64, Ordering::Relaxed);
        if !ok {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        let bucket = BATCH_BUCKET_BOUNDS
            .iter()
            .position(|&b| rows <= b)
            .unwrap_or(BATCH_BUCKETS - 1);
        self.batch_sizes[bucket].fetch_add(1, Ordering::Relaxed);
        let secs = elapsed.as_secs_f64();
        let bucket = CALL_SECONDS_BOUNDS
            .iter()
            .position(|&b| secs <= b)
            .unwrap_or(CALL_BUCKETS - 1);
        self.call_seconds[bucket].fetch_add(1, Ordering::Relaxed);
        if self.call_log.on.load(Ordering::Relaxed) {
            let record = CallRecord {
                ended_at: Instant::now(),
                duration: elapsed,
                idle_before,
            };
            self.call_log
                .calls
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .calls
                .push(record);
        }
    }

    /// Starts keeping every call, in the order they end, and the arrival of every job answered
    /// (forgetting any kept before).
    pub fn record_calls(&self) {
        *self
            .call_log
            .calls
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = RecordedCalls::default();
        self.call_log.on.store(true, Ordering::Relaxed);
    }

    /// Stops keeping calls and returns those kept since [`LoadStats::record_calls`], with the
    /// arrivals sorted.
    pub fn take_calls(&self) -> RecordedCalls {
        self.call_log.on.store(false, Ordering::Relaxed);
        let mut kept = std::mem::take(
            &mut *self
                .call_log
                .calls
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        );
        kept.arrivals.sort_unstable();
        kept
    }

    /// Jobs waiting in the queue now (queued, not yet taken by a session).
    pub fn queue_depth(&self) -> u64 {
        self.enqueued
            .load(Ordering::Relaxed)
            .saturating_sub(self.dequeued.load(Ordering::Relaxed))
    }

    /// The counters now.
    pub fn snapshot(&self) -> LoadSnapshot {
        let load = |buckets: &[AtomicU64], out: &mut [u64]| {
            for (o, b) in out.iter_mut().zip(buckets) {
                *o = b.load(Ordering::Relaxed);
            }
        };
        let mut batch_sizes = [0; BATCH_BUCKETS];
        load(&self.batch_sizes, &mut batch_sizes);
        let mut call_seconds = [0; CALL_BUCKETS];
        load(&self.call_seconds, &mut call_seconds);
        LoadSnapshot {
            enqueued: self.enqueued.load(Ordering::Relaxed),
            dequeued: self.dequeued.load(Ordering::Relaxed),
            runs: self.runs.load(Ordering::Relaxed),
            rows: self.rows.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            busy: Duration::from_nanos(self.busy_ns.load(Ordering::Relaxed)),
            jobs_answered: self.jobs_answered.load(Ordering::Relaxed),
            sojourn: Duration::from_nanos(self.sojourn_ns.load(Ordering::Relaxed)),
            batch_sizes,
            call_seconds,
        }
    }
}

/// A running executor. Dropping it lets queued jobs finish, then stops its threads.
pub struct ModelExecutor {
    config: Arc<ExecutorConfig>,
    queue: Option<Sender<Job>>,
    stats: Arc<LoadStats>,
    threads: Vec<JoinHandle<()>>,
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
        let stats = Arc::new(LoadStats::default());
        let pins = core_pins(&config)?;
        let threads_per_call = config.intra_op_threads.max(1);
        let mut sessions = Vec::with_capacity(config.instances.max(1));
        for i in 0..config.instances.max(1) {
            let workers = pins.as_ref().and_then(|p| p.workers(i, threads_per_call));
            sessions.push(runtime.session_on(
                &config.node,
                &config.path,
                threads_per_call,
                config.spinning,
                config.device,
                workers.as_deref(),
            )?);
        }
        let mut threads = Vec::with_capacity(sessions.len());
        for (i, session) in sessions.into_iter().enumerate() {
            let node = config.node.clone();
            let (config, stats, rx) = (Arc::clone(&config), Arc::clone(&stats), rx.clone());
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
        let warmup = warmup_inputs(&config);
        let pins = core_pins(&config)?;
        let mut per_thread = Vec::with_capacity(board.thread_count());
        for i in 0..board.thread_count() {
            let mut sessions = Vec::new();
            for t in board.thread_counts_of(i) {
                let workers = pins.as_ref().and_then(|p| p.workers(i, t));
                let mut session = runtime.session_on(
                    &config.node,
                    &config.path,
                    t,
                    config.spinning,
                    config.device,
                    workers.as_deref(),
                )?;
                if let Some(inputs) = &warmup {
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

    /// The load counters now.
    pub fn stats(&self) -> LoadSnapshot {
        self.stats.snapshot()
    }

    /// The live counters (to record call durations: [`LoadStats::record_calls`]).
    pub fn load_stats(&self) -> &LoadStats {
        &self.stats
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

/// The node's [`CorePins`] when `pin_cores_from` is set.
fn core_pins(config: &ExecutorConfig) -> Result<Option<CorePins>, ExecError> {
    config
        .pin_cores_from
        .map(CorePins::from_first)
        .transpose()
        .map_err(|e| ExecError::Session {
            node: config.node.clone(),
            path: config.path.display().to_string(),
            message: e.to_string(),
        })
}

/// Pins the calling session thread to `cpu`; a failure leaves it where the OS put it, logged.
fn pin_or_warn(node: &str, cpu: usize) {
    if let Err(e) = pin_current_thread(cpu) {
        warn!(node = %node, error = %e, "Session thread not pinned.");
    }
}

/// Starts session thread `i` of node `node`, named `ort-<node>-<i>`.
fn spawn_session_thread(
    node: String,
    i: usize,
    run: impl FnOnce() + Send + 'static,
) -> Result<JoinHandle<()>, ExecError> {
    std::thread::Builder::new()
        .name(format!("ort-{node}-{i}"))
        .spawn(run)
        .map_err(|e| ExecError::Session {
            node,
            path: String::new(),
            message: format!("spawning a session thread: {e}"),
        })
}

fn session_loop(
    mut session: Session,
    config: &ExecutorConfig,
    stats: &LoadStats,
    rx: &Receiver<Job>,
) {
    let mut carried: Option<Job> = None;
    let mut idle_since: Option<Instant> = None;
    loop {
        let first = match carried.take() {
            Some(j) => j,
            None => match rx.recv() {
                Ok(j) => j,
                Err(_) => return,
            },
        };
        let (jobs, rows) = gather_batch(first, config, stats, rx, &mut carried);
        let idle_before = idle_gap(idle_since, rows);
        idle_since = Some(run_jobs(
            &mut session,
            config,
            stats,
            (jobs, rows),
            idle_before,
        ));
    }
}

/// Calls each pre-created session of a switchable executor gets before it serves, so that the
/// first jobs after a switch run on a warm session (see [`super::synthetic`]).
pub const SWITCHABLE_WARMUP_CALLS: usize = 2;

/// The random request a switchable executor warms its sessions with; `None` (logged) when the
/// model's inputs have no synthetic form, in which case sessions start cold.
fn warmup_inputs(config: &ExecutorConfig) -> Option<SyntheticInputs> {
    match SyntheticInputs::random(&config.path, 0) {
        Ok(inputs) => Some(inputs),
        Err(e) => {
            warn!(node = %config.node, error = %e, "Sessions start cold: no warm-up request for this model.");
            None
        }
    }
}

/// Runs [`SWITCHABLE_WARMUP_CALLS`] calls on `session`. A failing call is logged, not an error:
/// warming is an optimisation, and real requests get their own errors.
fn warm_up(node: &str, session: &mut Session, inputs: &SyntheticInputs, threads: usize) {
    for _ in 0..SWITCHABLE_WARMUP_CALLS {
        if let Err(e) = inputs.timed_call(session) {
            warn!(node, threads, error = %e, "Warm-up call failed; the session starts cold.");
            return;
        }
    }
}

/// The loop of thread `i` of a switchable executor (see [`super::parallelism`]): takes jobs only
/// while `i < c`, runs each batch on its session for the `t` in force when the batch was taken.
/// With `pins`, the thread moves to the core [`CorePins::caller`] gives for the `t` of each call.
fn switchable_loop(
    i: usize,
    mut sessions: Vec<(usize, Session)>,
    config: &ExecutorConfig,
    stats: &LoadStats,
    (rx, wake): (&Receiver<Job>, &Receiver<()>),
    board: &Switchboard,
    pins: Option<&CorePins>,
) {
    let mut carried: Option<Job> = None;
    let mut on_cpu: Option<usize> = None;
    let mut idle_since: Option<Instant> = None;
    loop {
        // A job carried over from the last gather was already taken: it runs whatever happened
        // since, so going inactive never strands it.
        let first = match carried.take() {
            Some(j) => j,
            None => {
                if !board.wait_active(i) {
                    return;
                }
                crossbeam_channel::select! {
                    recv(rx) -> job => match job {
                        Ok(j) => j,
                        Err(_) => return,
                    },
                    // Told to look at the configuration again (this thread may be inactive now).
                    recv(wake) -> _ => continue,
                }
            }
        };
        let (jobs, rows) = gather_batch(first, config, stats, rx, &mut carried);
        let threads = board.current().threads;
        let pos = sessions
            .iter()
            .position(|(t, _)| *t == threads)
            .unwrap_or(0);
        let Some((session_threads, session)) = sessions.get_mut(pos) else {
            // No session at all cannot happen (start creates at least one per thread); answer
            // rather than lose the jobs.
            for job in jobs {
                (job.done)(Err(ExecError::Inference {
                    node: config.node.clone(),
                    message: "no session for the current parallelism".into(),
                }));
            }
            continue;
        };
        if let Some(cpu) = pins.map(|p| p.caller(i, *session_threads)) {
            if on_cpu != Some(cpu) {
                pin_or_warn(&config.node, cpu);
                on_cpu = Some(cpu);
            }
        }
        let idle_before = idle_gap(idle_since, rows);
        let call = board.begin_call(*session_threads, idle_before);
        idle_since = Some(run_jobs(session, config, stats, (jobs, rows), idle_before));
        board.end_call(call, rows, !config.batched);
    }
}

/// Counts `first` as dequeued and, for a batched model, takes more jobs until `max_batch` rows or
/// the first job's deadline; a job that does not fit is left in `carried`.
fn gather_batch(
    first: Job,
    config: &ExecutorConfig,
    stats: &LoadStats,
    rx: &Receiver<Job>,
    carried: &mut Option<Job>,
) -> (Vec<Job>, usize) {
    let max_batch = if config.batched {
        config.max_batch.max(1)
    } else {
        1
    };
    stats.dequeued.fetch_add(1, Ordering::Relaxed);
    let mut rows = first.rows();
    let deadline = first.enqueued_at + config.max_delay;
    let mut jobs = vec![first];
    while config.batched && rows < max_batch {
        let next = if config.max_delay.is_zero() {
            rx.try_recv().map_err(|_| RecvTimeoutError::Timeout)
        } else {
            rx.recv_deadline(deadline)
        };
        match next {
            Ok(j) => {
                stats.dequeued.fetch_add(1, Ordering::Relaxed);
                if rows + j.rows() > max_batch {
                    *carried = Some(j);
                    break;
                }
                rows += j.rows();
                jobs.push(j);
            }
            Err(_) => break,
        }
    }
    // A carried job was already counted as dequeued; balance it when it is taken again.
    if carried.is_some() {
        stats.dequeued.fetch_sub(1, Ordering::Relaxed);
    }
    (jobs, rows)
}

/// How long a session thread whose last call ended at `idle_since` has been idle before a call of
/// `rows` rows starting now: `None` for its first call, and for several rows (of rows run one after
/// the other, only the first started after the gap).
fn idle_gap(idle_since: Option<Instant>, rows: usize) -> Option<Duration> {
    idle_since
        .filter(|_| rows == 1)
        .map(|t| Instant::now().saturating_duration_since(t))
}

/// Runs `jobs` (`rows` rows in all) as one call (batched) or one call per row on a session thread
/// idle for `idle_before` ([`idle_gap`]), and answers each; returns when the call ended.
fn run_jobs(
    session: &mut Session,
    config: &ExecutorConfig,
    stats: &LoadStats,
    (jobs, rows): (Vec<Job>, usize),
    idle_before: Option<Duration>,
) -> Instant {
    let started = Instant::now();
    let result = if config.batched {
        run_batched(session, config, &jobs, rows)
    } else {
        run_per_row(session, config, &jobs)
    };
    let ended = Instant::now();
    stats.record_run(rows, ended - started, idle_before, result.is_ok());
    stats.record_answers(&jobs, ended);
    match result {
        Ok(per_job) => {
            for (job, outputs) in jobs.into_iter().zip(per_job) {
                (job.done)(Ok(outputs));
            }
        }
        Err(e) => {
            debug!(node = %config.node, error = %e, "Inference failed.");
            for job in jobs {
                (job.done)(Err(e.clone()));
            }
        }
    }
    ended
}

/// Input data for one call: borrowed when one job covers it, gathered otherwise.
enum Gathered<'a> {
    F32(std::borrow::Cow<'a, [f32]>),
    I64(std::borrow::Cow<'a, [i64]>),
}

fn gather<'a>(jobs: &'a [Job], input: usize, rows: std::ops::Range<usize>) -> Gathered<'a> {
    use std::borrow::Cow;
    let col = |j: &'a Job| &j.inputs[input];
    let first = col(&jobs[0]);
    let n = first.row_len();
    match first.dtype() {
        DType::F32 => {
            if jobs.len() == 1 {
                let v = first.f32_values().unwrap_or(&[]);
                Gathered::F32(Cow::Borrowed(&v[rows.start * n..rows.end * n]))
            } else {
                Gathered::F32(Cow::Owned(
                    jobs.iter()
                        .flat_map(|j| col(j).f32_values().unwrap_or(&[]).iter().copied())
                        .collect(),
                ))
            }
        }
        DType::I64 => {
            if jobs.len() == 1 {
                let v = first.i64_values().unwrap_or(&[]);
                Gathered::I64(Cow::Borrowed(&v[rows.start * n..rows.end * n]))
            } else {
                Gathered::I64(Cow::Owned(
                    jobs.iter()
                        .flat_map(|j| col(j).i64_values().unwrap_or(&[]).iter().copied())
                        .collect(),
                ))
            }
        }
    }
}

/// Runs one call over `rows` rows whose inputs are `data`; returns each output's per-row shape and
/// elements.
fn infer(
    session: &mut Session,
    config: &ExecutorConfig,
    data: &[Gathered<'_>],
    shapes: &[Vec<usize>],
    rows: usize,
) -> Result<Vec<(Vec<usize>, TensorData)>, ExecError> {
    let wrap = |e: ort::Error| ExecError::Inference {
        node: config.node.clone(),
        message: e.to_string(),
    };
    let mut inputs: Vec<(std::borrow::Cow<'_, str>, SessionInputValue<'_>)> =
        Vec::with_capacity(data.len());
    for ((name, d), shape) in config.inputs.iter().zip(data).zip(shapes) {
        let mut full = Vec::with_capacity(shape.len() + 1);
        full.push(rows);
        full.extend_from_slice(shape);
        let value: SessionInputValue<'_> = match d {
            Gathered::F32(v) => TensorRef::from_array_view((full, v.as_ref()))
                .map_err(wrap)?
                .into(),
            Gathered::I64(v) => TensorRef::from_array_view((full, v.as_ref()))
                .map_err(wrap)?
                .into(),
        };
        inputs.push((name.as_str().into(), value));
    }
    let outputs = session.run(inputs).map_err(wrap)?;
    let mut result = Vec::with_capacity(config.outputs.len());
    for (name, dtype) in &config.outputs {
        let value = outputs.get(name).ok_or_else(|| ExecError::Inference {
            node: config.node.clone(),
            message: format!("the model returned no output `{name}`"),
        })?;
        let (shape, data) = match dtype {
            DType::F32 => {
                let (shape, v) = value.try_extract_tensor::<f32>().map_err(wrap)?;
                (shape.to_vec(), TensorData::F32(v.to_vec()))
            }
            DType::I64 => {
                let (shape, v) = value.try_extract_tensor::<i64>().map_err(wrap)?;
                (shape.to_vec(), TensorData::I64(v.to_vec()))
            }
        };
        if shape.first().copied() != Some(rows as i64) {
            return Err(ExecError::Inference {
                node: config.node.clone(),
                message: format!("output `{name}` has shape {shape:?} for a batch of {rows}"),
            });
        }
        result.push((
            shape[1..].iter().map(|&d| d.max(0) as usize).collect(),
            data,
        ));
    }
    Ok(result)
}

fn run_batched(
    session: &mut Session,
    config: &ExecutorConfig,
    jobs: &[Job],
    rows: usize,
) -> Result<Vec<Vec<TensorColumn>>, ExecError> {
    let shapes: Vec<Vec<usize>> = jobs[0].inputs.iter().map(|c| c.shape().to_vec()).collect();
    let data: Vec<Gathered<'_>> = (0..config.inputs.len())
        .map(|i| gather(jobs, i, 0..jobs[0].rows()))
        .collect();
    let outputs = infer(session, config, &data, &shapes, rows)?;
    let columns = outputs
        .into_iter()
        .zip(&config.outputs)
        .map(|((shape, data), (name, _))| to_column(config, name, shape, rows, data))
        .collect::<Result<Vec<_>, _>>()?;
    let mut per_job = Vec::with_capacity(jobs.len());
    let mut offset = 0;
    for job in jobs {
        let n = job.rows();
        per_job.push(columns.iter().map(|c| c.slice(offset, n)).collect());
        offset += n;
    }
    Ok(per_job)
}

fn run_per_row(
    session: &mut Session,
    config: &ExecutorConfig,
    jobs: &[Job],
) -> Result<Vec<Vec<TensorColumn>>, ExecError> {
    let mut per_job = Vec::with_capacity(jobs.len());
    for job in jobs {
        let shapes: Vec<Vec<usize>> = job.inputs.iter().map(|c| c.shape().to_vec()).collect();
        let mut acc: Vec<Option<(Vec<usize>, TensorData)>> = vec![None; config.outputs.len()];
        for row in 0..job.rows() {
            let single = std::slice::from_ref(job);
            let data: Vec<Gathered<'_>> = (0..config.inputs.len())
                .map(|i| gather(single, i, row..row + 1))
                .collect();
            for (slot, (shape, data)) in acc
                .iter_mut()
                .zip(infer(session, config, &data, &shapes, 1)?)
            {
                match slot {
                    None => *slot = Some((shape, data)),
                    Some((_, TensorData::F32(all))) => {
                        if let TensorData::F32(v) = data {
                            all.extend(v);
                        }
                    }
                    Some((_, TensorData::I64(all))) => {
                        if let TensorData::I64(v) = data {
                            all.extend(v);
                        }
                    }
                }
            }
        }
        let columns = acc
            .into_iter()
            .zip(&config.outputs)
            .map(|(slot, (name, dtype))| {
                let (shape, data) = slot.unwrap_or((
                    Vec::new(),
                    match dtype {
                        DType::F32 => TensorData::F32(Vec::new()),
                        DType::I64 => TensorData::I64(Vec::new()),
                    },
                ));
                to_column(config, name, shape, job.rows(), data)
            })
            .collect::<Result<Vec<_>, _>>()?;
        per_job.push(columns);
    }
    Ok(per_job)
}

fn to_column(
    config: &ExecutorConfig,
    name: &str,
    shape: Vec<usize>,
    rows: usize,
    data: TensorData,
) -> Result<TensorColumn, ExecError> {
    TensorColumn::from_data(name, shape, rows, data).map_err(|e| ExecError::Inference {
        node: config.node.clone(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    //! Live switching on real ONNX Runtime (`constant_batch1.onnx`: y = 2x + 1, one row per call),
    //! from `scripts/setup.sh`'s `.weir/`.

    use super::*;
    use std::collections::HashMap;
    use std::sync::Mutex;

    fn model() -> std::path::PathBuf {
        crate::model::test_model("constant_batch1.onnx")
    }

    fn config(queue_capacity: usize) -> ExecutorConfig {
        ExecutorConfig {
            node: "double".into(),
            path: model(),
            batched: false,
            max_batch: 1,
            max_delay: Duration::ZERO,
            instances: 1,
            intra_op_threads: 1,
            queue_capacity,
            spinning: false,
            pin_cores_from: None,
            inputs: vec!["x".into()],
            outputs: vec![("y".into(), DType::F32)],
            timeout: None,
            device: weir_engine::spec::Device::Cpu,
        }
    }

    fn configs() -> Vec<Config> {
        vec![Config::new(1, 1), Config::new(1, 2), Config::new(2, 1)]
    }

    type Answers = Arc<Mutex<HashMap<u64, Vec<Result<Vec<f32>, String>>>>>;

    fn job(id: u64, answers: &Answers) -> Job {
        let x = [id as f32, 1.0, -2.0, 0.5];
        let col = TensorColumn::from_data("x", vec![4], 1, TensorData::F32(x.to_vec())).unwrap();
        let answers = Arc::clone(answers);
        Job {
            inputs: vec![col],
            enqueued_at: Instant::now(),
            done: Box::new(move |r| {
                let r = r
                    .map(|c| c[0].f32_values().unwrap().to_vec())
                    .map_err(|e| e.to_string());
                answers.lock().unwrap().entry(id).or_default().push(r);
            }),
        }
    }

    /// Submits `job` until the queue takes it (the test's back-pressure).
    fn submit(executor: &ModelExecutor, mut job: Job) {
        loop {
            match executor.try_submit(job) {
                Ok(()) => return,
                Err(j) => {
                    job = j;
                    std::thread::sleep(Duration::from_micros(100));
                }
            }
        }
    }

    fn wait_for(answers: &Answers, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while answers.lock().unwrap().len() < n && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn assert_each_answered_once_right(answers: &Answers, n: u64) {
        let answers = answers.lock().unwrap();
        assert_eq!(answers.len() as u64, n, "jobs answered");
        for id in 0..n {
            let got = answers
                .get(&id)
                .unwrap_or_else(|| panic!("job {id} unanswered"));
            assert_eq!(got.len(), 1, "job {id} answered {} times", got.len());
            let y = got[0].as_ref().unwrap_or_else(|e| panic!("job {id}: {e}"));
            assert_eq!(y, &[2.0 * id as f32 + 1.0, 3.0, -3.0, 2.0], "job {id}");
        }
    }

    #[test]
    fn switching_while_submitting_answers_every_job_once() {
        let runtime = OrtRuntime::get().unwrap();
        let executor = Arc::new(
            ModelExecutor::start_switchable(&runtime, config(16), &configs(), Config::new(1, 2))
                .unwrap(),
        );
        let answers: Answers = Arc::default();
        let (producers, per_producer) = (4u64, 150u64);
        let handles: Vec<_> = (0..producers)
            .map(|p| {
                let (executor, answers) = (Arc::clone(&executor), Arc::clone(&answers));
                std::thread::spawn(move || {
                    for k in 0..per_producer {
                        submit(&executor, job(p * per_producer + k, &answers));
                        if k % 4 == 0 {
                            std::thread::sleep(Duration::from_micros(300));
                        }
                    }
                })
            })
            .collect();
        // Switch through every configuration, repeatedly, until the producers are done (and at
        // least 40 times).
        let cycle = [
            Config::new(2, 1),
            Config::new(1, 1),
            Config::new(1, 2),
            Config::new(2, 1),
            Config::new(1, 2),
        ];
        let mut switches = 0;
        let mut k = 0;
        while k < 40 || handles.iter().any(|h| !h.is_finished()) {
            let c = cycle[k % cycle.len()];
            if executor.set_parallelism(c.concurrency, c.threads).unwrap() {
                switches += 1;
            }
            k += 1;
            std::thread::sleep(Duration::from_micros(500));
        }
        for h in handles {
            h.join().unwrap();
        }
        wait_for(&answers, (producers * per_producer) as usize);
        assert_each_answered_once_right(&answers, producers * per_producer);
        let p = executor.parallelism().unwrap();
        assert_eq!(p.switches, switches);
        assert_eq!(executor.stats().rows, producers * per_producer);
        assert!(matches!(
            executor.set_parallelism(2, 2),
            Err(ParallelismError::Unknown { .. })
        ));
        // Nothing more arrives after the executor is dropped, and nothing is answered twice.
        drop(executor);
        assert_each_answered_once_right(&answers, producers * per_producer);
    }

    #[test]
    fn shrinking_concurrency_strands_no_queued_job() {
        let runtime = OrtRuntime::get().unwrap();
        let executor =
            ModelExecutor::start_switchable(&runtime, config(256), &configs(), Config::new(2, 1))
                .unwrap();
        let answers: Answers = Arc::default();
        let n = 200;
        // Fill the queue, then drop to one request at once while it drains: thread 1 parks, thread
        // 0 takes everything that was queued.
        for id in 0..n {
            submit(&executor, job(id, &answers));
        }
        assert!(executor.set_parallelism(1, 1).unwrap());
        wait_for(&answers, n as usize);
        assert_each_answered_once_right(&answers, n);
        // Up again and down to the 2-thread session: still answered, with the right outputs.
        assert!(executor.set_parallelism(2, 1).unwrap());
        assert!(executor.set_parallelism(1, 2).unwrap());
        for id in n..2 * n {
            submit(&executor, job(id, &answers));
        }
        wait_for(&answers, 2 * n as usize);
        assert_each_answered_once_right(&answers, 2 * n);
        // Dropping with jobs queued answers them all before the threads stop.
        for id in 2 * n..3 * n {
            submit(&executor, job(id, &answers));
        }
        drop(executor);
        assert_each_answered_once_right(&answers, 3 * n);
    }

    #[test]
    fn switchable_sessions_are_warmed_at_start_without_counting_as_served_calls() {
        let runtime = OrtRuntime::get().unwrap();
        let executor =
            ModelExecutor::start_switchable(&runtime, config(4), &configs(), Config::new(1, 1))
                .unwrap();
        // The warm-up calls ran on the sessions directly: the load counters (and SERF's service
        // samples) only ever see jobs.
        let stats = executor.stats();
        assert_eq!((stats.runs, stats.rows, stats.busy), (0, 0, Duration::ZERO));
        assert_eq!(executor.parallelism().map(|p| p.switches), Some(0));
        let answers: Answers = Arc::default();
        submit(&executor, job(0, &answers));
        wait_for(&answers, 1);
        assert_each_answered_once_right(&answers, 1);
        assert_eq!(executor.stats().runs, 1);
    }

    #[test]
    fn the_time_at_the_node_counts_from_queued_to_answered() {
        let runtime = OrtRuntime::get().unwrap();
        let executor =
            ModelExecutor::start_switchable(&runtime, config(4), &configs(), Config::new(1, 1))
                .unwrap();
        let answers: Answers = Arc::default();
        // Three jobs that were queued 50 ms before they reached the executor (as if they had waited).
        let waited = Duration::from_millis(50);
        for id in 0..3 {
            let queued_earlier = Job {
                enqueued_at: Instant::now() - waited,
                ..job(id, &answers)
            };
            submit(&executor, queued_earlier);
        }
        wait_for(&answers, 3);
        assert_each_answered_once_right(&answers, 3);
        let stats = executor.stats();
        assert_eq!(stats.jobs_answered, 3);
        assert!(stats.sojourn >= 3 * waited, "{:?}", stats.sojourn);
        // The calls are part of each job's time at the node.
        assert!(stats.sojourn >= 3 * waited + stats.busy, "{stats:?}");
    }

    /// The CPUs session thread `name` of this process may run on (`Cpus_allowed_list`).
    #[cfg(target_os = "linux")]
    fn allowed_cpus_of_thread(name: &str) -> Option<String> {
        std::fs::read_dir("/proc/self/task").ok()?.find_map(|task| {
            let dir = task.ok()?.path();
            let comm = std::fs::read_to_string(dir.join("comm")).ok()?;
            (comm.trim() == name).then_some(())?;
            let status = std::fs::read_to_string(dir.join("status")).ok()?;
            status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .map(|v| v.trim().to_string())
        })
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn pinned_session_threads_run_on_their_cores_and_answer_every_job_once() {
        use crate::model::pinning::CorePins;
        let runtime = OrtRuntime::get().unwrap();
        let pins = CorePins::from_first(0).unwrap();
        let pinned = |node: &str| ExecutorConfig {
            node: node.into(),
            pin_cores_from: Some(0),
            ..config(64)
        };
        // Fixed (2, 1): thread i on the process's i-th CPU.
        let fixed = ModelExecutor::start(
            &runtime,
            ExecutorConfig {
                instances: 2,
                ..pinned("pinfix")
            },
        )
        .unwrap();
        let answers: Answers = Arc::default();
        for id in 0..50 {
            submit(&fixed, job(id, &answers));
        }
        wait_for(&answers, 50);
        assert_each_answered_once_right(&answers, 50);
        for i in 0..2 {
            assert_eq!(
                allowed_cpus_of_thread(&format!("ort-pinfix-{i}")),
                Some(pins.caller(i, 1).to_string()),
                "thread {i}"
            );
        }
        drop(fixed);
        // Switchable: thread 0 stays on its core whatever t is; jobs across switches all answered.
        let switchable = ModelExecutor::start_switchable(
            &runtime,
            pinned("pinsw"),
            &configs(),
            Config::new(1, 2),
        )
        .unwrap();
        let answers: Answers = Arc::default();
        for id in 0..300 {
            submit(&switchable, job(id, &answers));
            if id % 50 == 49 {
                let c = configs()[(id as usize / 50) % 3];
                switchable
                    .set_parallelism(c.concurrency, c.threads)
                    .unwrap();
            }
        }
        wait_for(&answers, 300);
        assert_each_answered_once_right(&answers, 300);
        assert_eq!(
            allowed_cpus_of_thread("ort-pinsw-0"),
            Some(pins.caller(0, 2).to_string())
        );
    }

    #[test]
    fn a_first_core_beyond_the_process_cpus_fails_at_start_saying_so() {
        let runtime = OrtRuntime::get().unwrap();
        let err = ModelExecutor::start(
            &runtime,
            ExecutorConfig {
                pin_cores_from: Some(100_000),
                ..config(4)
            },
        )
        .map(drop)
        .unwrap_err();
        assert!(err.to_string().contains("pin_cores_from 100000"), "{err}");
    }

    #[test]
    fn only_a_one_row_call_after_an_earlier_one_has_an_idle_gap() {
        let before = Instant::now();
        assert!(idle_gap(Some(before), 1).is_some());
        assert_eq!(idle_gap(None, 1), None, "the thread's first call");
        assert_eq!(
            idle_gap(Some(before), 2),
            None,
            "of rows run one after the other only the first started after the gap"
        );
    }

    #[test]
    fn call_durations_are_kept_only_between_record_and_take() {
        let runtime = OrtRuntime::get().unwrap();
        let executor = ModelExecutor::start(&runtime, config(16)).unwrap();
        let answers: Answers = Arc::default();
        submit(&executor, job(0, &answers));
        wait_for(&answers, 1);
        executor.load_stats().record_calls();
        for id in 1..11 {
            submit(&executor, job(id, &answers));
        }
        wait_for(&answers, 11);
        let RecordedCalls { calls, arrivals } = executor.load_stats().take_calls();
        assert_eq!(calls.len(), 10, "one record per call while recording");
        assert_eq!(arrivals.len(), 10, "one arrival per job answered");
        assert!(arrivals.windows(2).all(|w| w[0] <= w[1]), "{arrivals:?}");
        assert!(
            calls.iter().all(|c| c.duration > Duration::ZERO),
            "{calls:?}"
        );
        assert!(
            calls.windows(2).all(|w| w[0].ended_at <= w[1].ended_at),
            "kept in the order the calls ended: {calls:?}"
        );
        assert!(
            calls.iter().all(|c| c.idle_before.is_some()),
            "the one session thread had served before each call, so each knows its idle gap: {calls:?}"
        );
        let runs = executor.stats().runs;
        for id in 11..14 {
            submit(&executor, job(id, &answers));
        }
        wait_for(&answers, 14);
        assert_eq!(executor.stats().runs, runs + 3);
        assert_eq!(
            executor.load_stats().take_calls(),
            RecordedCalls::default(),
            "not recording any more"
        );
        assert_each_answered_once_right(&answers, 14);
    }

    #[test]
    fn fixed_executor_refuses_to_switch() {
        let runtime = OrtRuntime::get().unwrap();
        let executor = ModelExecutor::start(&runtime, config(4)).unwrap();
        assert!(executor.parallelism().is_none());
        assert!(matches!(
            executor.set_parallelism(1, 1),
            Err(ParallelismError::Fixed { .. })
        ));
    }
}
