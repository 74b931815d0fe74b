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

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender, TrySendError};
use ort::session::{Session, SessionInputValue};
use ort::value::TensorRef;
use tracing::{debug, warn};
use weir_engine::batch::TensorColumn;
use weir_engine::tensor::{DType, TensorData};

use super::ort_env::OrtRuntime;
use super::ExecError;

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
    /// Runs by batch size: 1, 2, 3–4, 5–8, ..., 129+.
    batch_sizes: [AtomicU64; BATCH_BUCKETS],
    /// Calls by duration, bucketed by [`CALL_SECONDS_BOUNDS`] (the last is open).
    call_seconds: [AtomicU64; CALL_BUCKETS],
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
    fn record_run(&self, rows: usize, elapsed: Duration, ok: bool) {
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
        let mut sessions = Vec::with_capacity(config.instances.max(1));
        for _ in 0..config.instances.max(1) {
            sessions.push(runtime.session_on(
                &config.node,
                &config.path,
                config.intra_op_threads.max(1),
                config.spinning,
                config.device,
            )?);
        }
        let mut threads = Vec::with_capacity(sessions.len());
        for (i, session) in sessions.into_iter().enumerate() {
            let node = config.node.clone();
            let (config, stats, rx) = (Arc::clone(&config), Arc::clone(&stats), rx.clone());
            let handle = std::thread::Builder::new()
                .name(format!("ort-{node}-{i}"))
                .spawn(move || session_loop(session, &config, &stats, &rx))
                .map_err(|e| ExecError::Session {
                    node,
                    path: String::new(),
                    message: format!("spawning a session thread: {e}"),
                })?;
            threads.push(handle);
        }
        Ok(ModelExecutor {
            config,
            queue: Some(tx),
            stats,
            threads,
        })
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
        match queue.try_send(job) {
            Ok(()) => {
                self.stats.enqueued.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(TrySendError::Full(job)) | Err(TrySendError::Disconnected(job)) => Err(job),
        }
    }

    /// The load counters now.
    pub fn stats(&self) -> LoadSnapshot {
        self.stats.snapshot()
    }
}

impl Drop for ModelExecutor {
    fn drop(&mut self) {
        self.queue = None;
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

fn session_loop(
    mut session: Session,
    config: &ExecutorConfig,
    stats: &LoadStats,
    rx: &Receiver<Job>,
) {
    let max_batch = if config.batched {
        config.max_batch.max(1)
    } else {
        1
    };
    let mut carried: Option<Job> = None;
    loop {
        let first = match carried.take() {
            Some(j) => j,
            None => match rx.recv() {
                Ok(j) => j,
                Err(_) => return,
            },
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
                        carried = Some(j);
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
        let started = Instant::now();
        let result = if config.batched {
            run_batched(&mut session, config, &jobs, rows)
        } else {
            run_per_row(&mut session, config, &jobs)
        };
        stats.record_run(rows, started.elapsed(), result.is_ok());
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
    }
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
