//! The `weir executor` server: models loaded into ONNX Runtime, served as zenoh queryables.
//!
//! Each model gets a [`ModelExecutor`] (the same one a graph runs in-process) and a queryable on
//! `<prefix>/model/<name>`. A query's payload is decoded, reordered into the model's input order
//! and queued; the executor thread that finishes it sends the reply, so zenoh's threads never wait
//! on inference. A full queue answers at once with an `overloaded` error (the client retries
//! another replica). The liveliness token is declared last, once every model is loaded and served,
//! so a graph never sees a replica that cannot answer yet.
//!
//! Each model is called as the graph's validation reads the same file: batched when every input's
//! first dimension is dynamic, one request per call when it is 1, and without a batch dimension
//! when an input cannot have one (a scalar, a first dimension fixed to more than 1) or the model
//! is named with `--unbatched`. A graph node with `batch: false` says so in its queries
//! ([`UNBATCHED_PARAMETER`]); a query that disagrees with how the executor calls the model is
//! refused with the flag that would fix it, never run with shapes the graph did not mean. A model
//! named with `--pad NAME=DIM:VALUE` joins requests that differ along the ONNX dimension `DIM` into
//! one call, padded as a graph node's `batching.pad` does; without it, jobs whose rows differ in
//! shape run row by row here. A query may carry the time its client still waits
//! ([`BUDGET_PARAMETER`], milliseconds; a duration, so no clocks need agree): a job still queued
//! when it runs out is answered `expired`, not run (`weir_operators::model::expiry`).
//!
//! Emulated heterogeneity (Kairos's pools of instance types; [`crate::emulation`]): the
//! session thread that ran a job sleeps before replying until the emulated type's time for the job
//! has passed (F × its real time with `--slowdown F`; `BASE + PER_ROW × rows` with
//! `--emulate-latency`), so the process behaves like another instance type, with real ONNX Runtime
//! outputs, and holds its session for that long (a slower machine is busy longer, not just late to
//! reply). The time counted is from when the session thread could start the job (the later of its
//! arrival and the thread's previous reply) to its outputs, so time queued behind other jobs is not
//! stretched. With `--emulate-latency` every job is its own call (the executor does not merge
//! queued jobs; the graph's router batches), so a job's rows are its call's rows.
//! The price of such an instance is a label in the graph's `executors:`, not the executor's.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tracing::{debug, info, warn};
use weir_engine::batch::TensorColumn;
use weir_engine::onnx::ModelMetadata;
use weir_engine::spec::Device;
use weir_engine::tensor::Dim;
use weir_engine::validate::CallShape;
use weir_engine::wire::{decode_columns, encode_columns};
use weir_operators::model::{ExecError, ExecutorConfig, Job, ModelExecutor, OrtRuntime};
use zenoh::liveliness::LivelinessToken;
use zenoh::query::{Query, Queryable};
use zenoh::{Session, Wait};

use crate::emulation::Emulation;
use crate::protocol::{ErrorKind, ErrorReply, LoadReport, ModelLoad};
use crate::served::{serve_model, ModelDefaults, Registry, ServedModel};
use weir_connectors::zenoh_peer::open_peer;

/// How often the load report is published.
const LOAD_REPORT_EVERY: Duration = Duration::from_millis(500);

/// What a `weir executor` process serves and how.
#[derive(Debug, Clone)]
pub struct ExecutorOptions {
    /// Name; the key prefix defaults to `weir/executor/<name>`.
    pub name: String,
    /// Key-expression prefix, overriding the default.
    pub key: Option<String>,
    /// zenoh endpoints to listen on.
    pub listen: Vec<String>,
    /// zenoh endpoints to connect to.
    pub connect: Vec<String>,
    /// Models: name → ONNX file.
    pub models: Vec<(String, PathBuf)>,
    /// Device.
    pub device: Device,
    /// Intra-op threads per session.
    pub threads: usize,
    /// Sessions per model.
    pub instances: usize,
    /// Most rows per call for models with a dynamic batch dimension.
    pub max_batch: usize,
    /// Longest a job waits for others to join its batch.
    pub max_delay: Duration,
    /// Jobs a model's queue holds.
    pub queue_capacity: usize,
    /// Emulated instance type: how long each call is held after its real inference.
    pub emulation: Emulation,
    /// Emulated instance type: the least time a variant load takes (its model served no
    /// sooner), as a type whose loads are slower than this machine's would take.
    pub emulated_load: Duration,
    /// Models (by name) served without a batch dimension whatever their first dimension: each
    /// job's rows are calls with the tensors as they are (a graph node with `batch: false`).
    /// A model whose inputs cannot have a batch dimension (a scalar, a first dimension fixed to
    /// more than 1) is served so without being named here.
    pub unbatched: Vec<String>,
    /// Models (by name) whose calls join requests of different lengths padded along an ONNX
    /// dimension: (model, dimension name, pad value), as a graph node's `batching.pad`.
    pub pad: Vec<(String, String, f64)>,
    /// Stateful models (HAMS): name → ONNX file, served as primary or backup as assigned.
    pub stateful: Vec<(String, PathBuf)>,
    /// How stateful models run (non-determinism option, state-link delay).
    pub stateful_options: crate::stateful::StatefulOptions,
    /// The executor's own repository: with one, it loads and unloads variants on signed
    /// commands ([`crate::variants`]).
    pub variants: Option<Arc<dyn crate::variants::VariantSource>>,
}

impl ExecutorOptions {
    /// The key-expression prefix served under.
    pub fn key_prefix(&self) -> String {
        match &self.key {
            Some(k) => k.trim_end_matches('/').to_string(),
            None => format!("weir/executor/{}", self.name),
        }
    }
}

/// Errors starting an executor.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A model could not be read or loaded.
    #[error("model `{model}`: {message}")]
    Model {
        /// Model name.
        model: String,
        /// Why.
        message: String,
    },
    /// zenoh failed.
    #[error(transparent)]
    Zenoh(#[from] weir_connectors::zenoh_peer::SessionError),
    /// The options are not usable.
    #[error("{0}")]
    Options(String),
}

pub(crate) fn zenoh_err(e: impl std::fmt::Display) -> ServeError {
    ServeError::Zenoh(weir_connectors::zenoh_peer::SessionError(e.to_string()))
}

/// A running executor. Dropping it stops serving (undeclaring its token) and drains its queues.
pub struct ExecutorServer {
    prefix: String,
    stop: Arc<AtomicBool>,
    reporter: Option<JoinHandle<()>>,
    token: Option<LivelinessToken>,
    /// `<prefix>/zid/<zid>`: which zenoh session is this executor (graphs take replies only
    /// from it).
    zid_token: Option<LivelinessToken>,
    models: Registry,
    /// `<prefix>/control/variants`, with a repository.
    control: Option<Queryable<()>>,
    members: Vec<crate::stateful::StatefulMember>,
    session: Session,
}

impl std::fmt::Debug for ExecutorServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecutorServer")
            .field("prefix", &self.prefix)
            .finish()
    }
}

impl ExecutorServer {
    /// Loads every model, opens the zenoh session, serves, and declares liveliness.
    ///
    /// # Errors
    /// When a model cannot be loaded, the device is not available, or zenoh cannot start.
    pub fn start(options: &ExecutorOptions) -> Result<ExecutorServer, ServeError> {
        if options.models.is_empty() && options.stateful.is_empty() && options.variants.is_none() {
            return Err(ServeError::Options(
                "no model to serve (give --model or --stateful NAME=PATH, or --repository)".into(),
            ));
        }
        options
            .emulation
            .check()
            .map_err(|e| ServeError::Options(e.to_string()))?;
        let runtime = OrtRuntime::get().map_err(|e| ServeError::Model {
            model: "*".into(),
            message: e.to_string(),
        })?;
        let defaults = ModelDefaults {
            runtime,
            options: options.clone(),
        };
        let mut loaded = Vec::new();
        for (name, path) in &options.models {
            let model = crate::variants::ResolvedVariant {
                path: path.clone(),
                intra_threads: options.threads,
                max_batch: options.max_batch,
                fixed_batch: None,
                graph_level: weir_engine::spec::GraphLevel::All,
            };
            let executor = defaults.start_model(name, &model)?;
            loaded.push((name.clone(), executor));
        }
        let session = open_peer(&options.listen, &options.connect)?;
        let prefix = options.key_prefix();
        let models: Registry = Arc::default();
        for (name, executor) in loaded {
            let served = serve_model(&session, &prefix, &name, executor, options.emulation)?;
            models
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(name, served);
        }
        let control = match &options.variants {
            Some(source) => Some(crate::variant_loader::serve_commands(
                &session,
                &prefix,
                Arc::clone(source),
                defaults,
                Arc::clone(&models),
            )?),
            None => None,
        };
        let mut members = Vec::with_capacity(options.stateful.len());
        for (name, path) in &options.stateful {
            let member = crate::stateful::StatefulMember::start(
                &session,
                &options.name,
                &prefix,
                name,
                path.clone(),
                crate::stateful::StatefulOptions {
                    threads: options.threads.max(1),
                    ..options.stateful_options.clone()
                },
            )
            .map_err(|e| ServeError::Model {
                model: name.clone(),
                message: e.message,
            })?;
            members.push(member);
        }
        let zid_token = session
            .liveliness()
            .declare_token(format!("{prefix}/zid/{}", session.zid()))
            .wait()
            .map_err(zenoh_err)?;
        let token = session
            .liveliness()
            .declare_token(format!("{prefix}/alive"))
            .wait()
            .map_err(zenoh_err)?;
        let stop = Arc::new(AtomicBool::new(false));
        let reporter = spawn_reporter(
            session.clone(),
            format!("{prefix}/load"),
            options.name.clone(),
            options.device,
            Arc::clone(&models),
            Arc::clone(&stop),
        );
        let count = models.lock().map_or(0, |m| m.len());
        info!(executor = %options.name, %prefix, models = count, "Executor serving.");
        Ok(ExecutorServer {
            prefix,
            stop,
            reporter: Some(reporter),
            token: Some(token),
            zid_token: Some(zid_token),
            models,
            control,
            members,
            session,
        })
    }

    /// The key-expression prefix served under.
    pub fn key_prefix(&self) -> &str {
        &self.prefix
    }

    /// The models served now, by name (stateful ones too).
    pub fn models(&self) -> Vec<String> {
        let served: Vec<String> = self
            .models
            .lock()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        served
            .into_iter()
            .chain(self.members.iter().map(|m| m.model().to_string()))
            .collect()
    }

    /// Stops serving: liveliness first (graphs stop sending), then the queryables; queued jobs
    /// still finish and are answered.
    pub fn shutdown(mut self) {
        self.stop_serving();
    }

    fn stop_serving(&mut self) {
        if let Some(token) = self.token.take() {
            let _ = token.undeclare().wait();
        }
        if let Some(token) = self.zid_token.take() {
            let _ = token.undeclare().wait();
        }
        self.stop.store(true, Ordering::Release);
        if let Some(r) = self.reporter.take() {
            let _ = r.join();
        }
        if let Some(q) = self.control.take() {
            let _ = q.undeclare().wait();
        }
        // Retiring a model drains its queue (each job replies) and joins its threads.
        let served = std::mem::take(&mut *self.models.lock().unwrap_or_else(|p| p.into_inner()));
        served.into_values().for_each(ServedModel::retire);
        self.members.clear();
        let _ = self.session.close().wait();
    }
}

impl Drop for ExecutorServer {
    fn drop(&mut self) {
        self.stop_serving();
    }
}

fn reply_error(query: &Query, kind: ErrorKind, message: String) {
    let body = ErrorReply { kind, message }.to_bytes();
    if let Err(e) = query.reply_err(body).wait() {
        debug!(error = %e, "Could not send a reply error.");
    }
}

thread_local! {
    /// When this session thread last replied (the earliest its next job could start).
    static FREE_SINCE: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
}

/// Emulates another instance type: on the session thread that just ran a job of `rows` rows queued
/// at `enqueued_at`, sleeps for [`Emulation::hold`] of the time since the job could start, and
/// returns how long. Runs only on executor threads (the `done` of a job that produced outputs).
fn emulate(emulation: Emulation, enqueued_at: Instant, rows: usize) -> Duration {
    if !emulation.is_on() {
        return Duration::ZERO;
    }
    let now = Instant::now();
    let started = FREE_SINCE
        .with(|f| f.get())
        .map_or(enqueued_at, |free| free.max(enqueued_at));
    let ran = now.saturating_duration_since(started);
    let hold = emulation.hold(ran, rows);
    std::thread::sleep(hold);
    FREE_SINCE.with(|f| f.set(Some(Instant::now())));
    hold
}

/// How the executor calls a model it serves: without a batch dimension when named among the
/// `--unbatched` models or when an input cannot have one (a scalar, or a first dimension fixed to
/// more than 1 that is not the `fixed` batch of a batch-specialised build), batched when every
/// input's first dimension is dynamic or every one is fixed to `fixed` (then padded to it), one
/// request per call otherwise. The graph's validation reads the same file the same way, but for `batch: false`,
/// which a query states ([`UNBATCHED_PARAMETER`]).
pub(crate) fn call_shape(meta: &ModelMetadata, unbatched: bool, fixed: Option<usize>) -> CallShape {
    let firsts: Vec<Option<&Dim>> = meta.inputs.iter().map(|i| i.dims.first()).collect();
    if let Some(n) = fixed.filter(|&n| n > 1) {
        let at_n = |d: &Option<&Dim>| matches!(d, Some(Dim::Fixed(f)) if *f == n);
        if !unbatched && firsts.iter().all(at_n) {
            return CallShape::Fixed(n);
        }
    }
    if unbatched
        || firsts
            .iter()
            .any(|d| !matches!(d, Some(Dim::Dynamic | Dim::Fixed(1))))
    {
        CallShape::Unbatched
    } else if firsts.iter().all(|d| d == &Some(&Dim::Dynamic)) {
        CallShape::Batched
    } else {
        CallShape::PerRequest
    }
}

/// The selector parameter a graph adds to the queries of a node with `batch: false` (its value
/// `false`), so that an executor calling the model with a batch dimension refuses the job rather
/// than run it with the wrong shapes.
pub const UNBATCHED_PARAMETER: &str = "batch";

/// The selector parameter carrying how many milliseconds the job's client still waits.
pub const BUDGET_PARAMETER: &str = "budget_ms";

/// The longest budget honoured; a longer one is taken as this (a peer cannot make a job
/// outlive any sensible client).
const MAX_BUDGET: Duration = Duration::from_secs(3600);

/// The deadline a query's [`BUDGET_PARAMETER`] sets from `now`: `Ok(None)` without one, an
/// error naming the parameter when it is not a whole number of milliseconds.
fn budget_deadline(query: &Query, now: Instant) -> Result<Option<Instant>, String> {
    let Some(text) = query.parameters().get(BUDGET_PARAMETER) else {
        return Ok(None);
    };
    let ms: u64 = text.parse().map_err(|_| {
        format!(
            "selector parameter `{BUDGET_PARAMETER}` must be whole milliseconds, not `{}`",
            weir_connectors::echo::quote(text)
        )
    })?;
    Ok(Some(now + Duration::from_millis(ms).min(MAX_BUDGET)))
}

/// Why a query's `batch` parameter does not fit how `config` calls its model, if it does not.
fn batch_mismatch(config: &ExecutorConfig, query: &Query) -> Option<String> {
    let unbatched = query.parameters().get(UNBATCHED_PARAMETER) == Some("false");
    match (unbatched, config.call == CallShape::Unbatched) {
        (true, false) => Some(format!(
            "the graph calls model `{0}` without a batch dimension (`batch: false`), but this executor reads its first dimension as one; start it with `--unbatched {0}`",
            config.node
        )),
        (false, true) => Some(format!(
            "this executor calls model `{0}` without a batch dimension, but the graph's node has one; give the node `batch: false`, or start the executor without `--unbatched {0}`",
            config.node
        )),
        _ => None,
    }
}

/// Decodes a query and queues it; the executor thread replies.
pub(crate) fn handle_query(executor: &ModelExecutor, emulation: Emulation, query: Query) {
    let config = executor.config();
    if let Some(message) = batch_mismatch(config, &query) {
        reply_error(&query, ErrorKind::Invalid, message);
        return;
    }
    let Some(payload) = query.payload() else {
        reply_error(
            &query,
            ErrorKind::Invalid,
            "the query carries no payload".into(),
        );
        return;
    };
    let bytes = payload.to_bytes();
    let columns = match decode_columns(&bytes) {
        Ok(c) => c,
        Err(e) => {
            reply_error(
                &query,
                ErrorKind::Invalid,
                format!("undecodable payload: {e}"),
            );
            return;
        }
    };
    let mut by_name: BTreeMap<String, TensorColumn> = columns.into_iter().collect();
    let mut inputs = Vec::with_capacity(config.inputs.len());
    for name in &config.inputs {
        match by_name.remove(name) {
            Some(c) => inputs.push(c),
            None => {
                reply_error(
                    &query,
                    ErrorKind::Invalid,
                    format!("model `{}` needs input `{name}`", config.node),
                );
                return;
            }
        }
    }
    let output_names: Vec<String> = config.outputs.iter().map(|(n, _)| n.clone()).collect();
    let rows = inputs.first().map_or(0, TensorColumn::len);
    let stats = executor.shared_stats();
    let enqueued_at = Instant::now();
    let deadline = match budget_deadline(&query, enqueued_at) {
        Ok(d) => d,
        Err(message) => {
            reply_error(&query, ErrorKind::Invalid, message);
            return;
        }
    };
    let job = Job {
        inputs,
        enqueued_at,
        deadline,
        done: Box::new(move |outcome| match outcome {
            Ok(columns) => {
                stats.add_held(emulate(emulation, enqueued_at, rows));
                let named = output_names.iter().map(String::as_str).zip(columns.iter());
                match encode_columns(named) {
                    Ok(body) => {
                        if let Err(e) = query.reply(query.key_expr().clone(), body).wait() {
                            debug!(error = %e, "Could not send a reply.");
                        }
                    }
                    Err(e) => reply_error(&query, ErrorKind::Inference, e.to_string()),
                }
            }
            Err(e @ ExecError::Unavailable { .. }) => {
                reply_error(&query, ErrorKind::Overloaded, e.to_string())
            }
            Err(e @ ExecError::Expired { .. }) => {
                reply_error(&query, ErrorKind::Expired, e.to_string())
            }
            Err(e) => reply_error(&query, ErrorKind::Inference, e.to_string()),
        }),
    };
    if let Err(job) = executor.try_submit(job) {
        // The job owns the query; answer through it so the reply goes out exactly once.
        let node = config.node.clone();
        (job.done)(Err(ExecError::Unavailable {
            node,
            message: "overloaded".into(),
        }));
    }
}

fn spawn_reporter(
    session: Session,
    key: String,
    name: String,
    device: Device,
    models: Registry,
    stop: Arc<AtomicBool>,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let publisher = match session.declare_publisher(key).wait() {
            Ok(p) => p,
            Err(e) => {
                warn!(error = %e, "No load reports: cannot declare the publisher.");
                return;
            }
        };
        while !stop.load(Ordering::Acquire) {
            let executors: Vec<(String, Arc<ModelExecutor>)> = models
                .lock()
                .map(|m| {
                    m.iter()
                        .map(|(n, s)| (n.clone(), Arc::clone(&s.executor)))
                        .collect()
                })
                .unwrap_or_default();
            let report = LoadReport {
                executor: name.clone(),
                device: device.to_string(),
                models: executors
                    .iter()
                    .map(|(n, e)| {
                        let s = e.stats();
                        (
                            n.clone(),
                            ModelLoad {
                                queue_depth: s.queue_depth(),
                                runs: s.runs,
                                rows: s.rows,
                                busy_ms: s.busy.as_secs_f64() * 1e3,
                                held_ms: s.held.as_secs_f64() * 1e3,
                                sessions: u32::try_from(e.config().instances).unwrap_or(u32::MAX),
                            },
                        )
                    })
                    .collect(),
            };
            if let Ok(body) = serde_json::to_vec(&report) {
                let _ = publisher.put(body).wait();
            }
            let until = Instant::now() + LOAD_REPORT_EVERY;
            while Instant::now() < until && !stop.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    })
}
