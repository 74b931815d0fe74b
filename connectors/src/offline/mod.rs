//! Offline (batch) jobs: a JSON-lines file of requests run through a served graph in the
//! background, its replies written to another file (INFaaS's `offline_query`, §3.1, Table 4), paced
//! so online requests keep their latency (§5 and §6.3.2: paused while utilisation is above 40 %).
//!
//! A client submits `{"model", "input", "output", "parameters"}` and gets a job id at once; the
//! job's state (`queued`, `running`, `paused` with its reason, `done`, `failed`, `cancelled`) and
//! counts are read back by id, and a finished job is the completion signal. Each line of the
//! input is one Open Inference Protocol request document, answered exactly once in the output (a
//! reply or an error document), as the JSON-lines stream connector does; the job's `parameters`
//! are added to every request that does not set them (e.g. `min_accuracy` for a task).
//!
//! Paths come from the network, so they are names under the one folder the operator gave
//! (`weir serve --offline-dir`): relative, without `..`, resolved and confined there, the input
//! a regular file, the output a new file (never overwritten, never a symlink). Jobs are bounded:
//! at most [`OfflineConfig::max_running`] run at once (the rest queue) and
//! [`OfflineConfig::max_jobs`] are remembered; past that, with none finished to forget, a
//! submission is refused (429).

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Map, Value};
use tokio::sync::{watch, Semaphore};
use weir_engine::paths::{check_output, resolve_input, FileRules, OutputMode};
use weir_engine::runtime::GraphRuntime;
use weir_engine::stream::StreamEnd;

use crate::echo::{cap_error, quote};
use crate::oip::ModelLess;
use crate::stream::jsonl::{run_jsonl, Ends, Pace};
use crate::stream::{Answerer, StreamOptions};

pub use crate::stream::pacing::{CpuUtilisation, PauseSignal, Progress, Throttle};

/// Largest job submission document, in bytes.
pub const MAX_SUBMISSION_BYTES: usize = 64 << 10;
/// Longest path name a submission may give, in bytes.
const MAX_PATH_BYTES: usize = 1024;

/// How offline jobs run.
#[derive(Debug, Clone)]
pub struct OfflineConfig {
    /// The folder every job's input and output are under.
    pub root: PathBuf,
    /// Jobs running at once; later ones wait their turn.
    pub max_running: usize,
    /// Jobs remembered (queued, running and finished); the oldest finished are forgotten first.
    pub max_jobs: usize,
    /// Requests of one job in flight at once (each line waits at the throttle first).
    pub max_in_flight: usize,
    /// Per-request deadline and line cap, as the streams have.
    pub stream: StreamOptions,
}

/// Why a submission or a look-up failed.
#[derive(Debug, thiserror::Error)]
pub enum OfflineError {
    /// The submission is malformed, or a field's value cannot be used.
    #[error("{field}: {message}")]
    Field {
        /// The field, as the client wrote it.
        field: &'static str,
        /// Why.
        message: String,
    },
    /// No such job (or it was forgotten).
    #[error("no offline job `{0}`")]
    UnknownJob(String),
    /// Every remembered job is unfinished.
    #[error("{0} offline jobs are queued or running; retry when one finishes")]
    TooManyJobs(usize),
}

fn field(field: &'static str, message: impl Into<String>) -> OfflineError {
    OfflineError::Field {
        field,
        message: message.into(),
    }
}

/// A job's submission document.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Submission {
    model: String,
    input: String,
    output: String,
    #[serde(default)]
    parameters: Option<Map<String, Value>>,
}

/// Where a job is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    Queued,
    Running,
    Done,
    Failed(String),
    Cancelled,
}

/// One job.
struct Job {
    id: String,
    model: String,
    input: String,
    output: String,
    phase: Mutex<Phase>,
    paused: Mutex<Option<String>>,
    progress: Arc<Progress>,
    cancel: watch::Sender<bool>,
}

impl Job {
    fn phase(&self) -> Phase {
        self.phase.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set_phase(&self, phase: Phase) {
        *self.phase.lock().unwrap_or_else(|p| p.into_inner()) = phase;
    }

    fn finished(&self) -> bool {
        matches!(
            self.phase(),
            Phase::Done | Phase::Failed(_) | Phase::Cancelled
        )
    }

    /// The job's status document.
    fn status(&self) -> Value {
        let paused = self
            .paused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let (state, error) = match self.phase() {
            Phase::Queued => ("queued", None),
            Phase::Running if paused.is_some() => ("paused", None),
            Phase::Running => ("running", None),
            Phase::Done => ("done", None),
            Phase::Failed(e) => ("failed", Some(cap_error(e))),
            Phase::Cancelled => ("cancelled", None),
        };
        let p = &self.progress;
        let mut doc = json!({
            "id": self.id,
            "model": quote(&self.model),
            "input": quote(&self.input),
            "output": quote(&self.output),
            "state": state,
            "requests": p.read.load(Ordering::Relaxed),
            "answered": p.answered.load(Ordering::Relaxed),
            "errors": p.errors.load(Ordering::Relaxed),
        });
        if let (Some(reason), "paused") = (&paused, state) {
            doc["paused_reason"] = json!(reason);
        }
        if let Some(e) = error {
            doc["error"] = json!(e);
        }
        doc
    }
}

struct Table {
    jobs: BTreeMap<u64, Arc<Job>>,
    next: u64,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// The offline jobs of one server.
pub struct OfflineJobs {
    config: OfflineConfig,
    rules: FileRules,
    graphs: BTreeMap<String, Arc<GraphRuntime>>,
    modelless: Option<Arc<dyn ModelLess>>,
    throttle: Arc<Throttle>,
    running: Arc<Semaphore>,
    table: Mutex<Table>,
}

impl OfflineJobs {
    /// Jobs over `graphs` (by graph name) and the names `modelless` serves (tasks: a job's
    /// `parameters`, e.g. `min_accuracy`, pick the variant), paced by `throttle`.
    ///
    /// # Errors
    /// When the root folder cannot be resolved.
    pub fn new(
        config: OfflineConfig,
        graphs: &[Arc<GraphRuntime>],
        modelless: Option<Arc<dyn ModelLess>>,
        throttle: Arc<Throttle>,
    ) -> Result<Arc<Self>, weir_engine::paths::FileError> {
        let rules = FileRules::under(&config.root)?;
        Ok(Arc::new(OfflineJobs {
            graphs: graphs
                .iter()
                .map(|g| (g.plan().name.clone(), Arc::clone(g)))
                .collect(),
            modelless,
            running: Arc::new(Semaphore::new(config.max_running.max(1))),
            rules,
            throttle,
            config,
            table: Mutex::new(Table {
                jobs: BTreeMap::new(),
                next: 1,
                tasks: Vec::new(),
            }),
        }))
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A path under the root from a client's name for it.
    fn place(&self, name: &str, which: &'static str) -> Result<PathBuf, OfflineError> {
        if name.is_empty() || name.len() > MAX_PATH_BYTES {
            return Err(field(
                which,
                format!("must be a file name of 1 to {MAX_PATH_BYTES} bytes"),
            ));
        }
        let path = Path::new(name);
        if !path.components().all(|c| matches!(c, Component::Normal(_))) {
            return Err(field(
                which,
                format!(
                    "`{}` must be relative to the offline folder, without `..`",
                    quote(name)
                ),
            ));
        }
        let root = self.rules.root.as_deref().unwrap_or(&self.config.root);
        Ok(root.join(path))
    }

    /// Submits a job from its JSON document; it starts when a run slot is free.
    ///
    /// # Errors
    /// A malformed document or unusable field (naming it), or too many jobs.
    pub fn submit(self: &Arc<Self>, body: &[u8]) -> Result<Value, OfflineError> {
        let sub: Submission = serde_json::from_slice(body).map_err(|e| {
            field(
                "body",
                format!("not a job submission: {}", cap_error(e.to_string())),
            )
        })?;
        let runtime = match (self.graphs.get(&sub.model), &self.modelless) {
            (Some(g), _) => Answerer::Graph(Arc::clone(g)),
            (None, Some(m)) if m.serves(&sub.model) => Answerer::ModelLess {
                front: Arc::clone(m),
                name: sub.model.clone(),
            },
            _ => {
                return Err(field(
                    "model",
                    format!("no model `{}` is served", quote(&sub.model)),
                ))
            }
        };
        let input = self.place(&sub.input, "input")?;
        resolve_input(&input, &self.rules).map_err(|e| field("input", e.to_string()))?;
        let output = self.place(&sub.output, "output")?;
        check_output(&output, OutputMode::Create, &self.rules)
            .map_err(|e| field("output", e.to_string()))?;
        let (cancel, cancelled) = watch::channel(false);
        let job = {
            let mut table = self.table();
            if table
                .jobs
                .values()
                .any(|j| !j.finished() && j.output == sub.output)
            {
                return Err(field(
                    "output",
                    format!("another unfinished job writes `{}`", quote(&sub.output)),
                ));
            }
            if table.jobs.len() >= self.config.max_jobs.max(1) {
                let oldest_done = table
                    .jobs
                    .iter()
                    .find(|(_, j)| j.finished())
                    .map(|(id, _)| *id);
                match oldest_done {
                    Some(id) => {
                        table.jobs.remove(&id);
                    }
                    None => return Err(OfflineError::TooManyJobs(table.jobs.len())),
                }
            }
            let n = table.next;
            table.next += 1;
            let job = Arc::new(Job {
                id: format!("job-{n}"),
                model: sub.model,
                input: sub.input,
                output: sub.output,
                phase: Mutex::new(Phase::Queued),
                paused: Mutex::new(None),
                progress: Arc::default(),
                cancel,
            });
            table.jobs.insert(n, Arc::clone(&job));
            table.tasks.retain(|t| !t.is_finished());
            let me = Arc::clone(self);
            let task_job = Arc::clone(&job);
            let parameters = sub.parameters.map(Arc::new);
            table.tasks.push(tokio::spawn(async move {
                me.run(task_job, runtime, input, output, parameters, cancelled)
                    .await;
            }));
            job
        };
        tracing::info!(job = %job.id, model = %job.model, "Offline job submitted.");
        Ok(job.status())
    }

    async fn run(
        &self,
        job: Arc<Job>,
        runtime: Answerer,
        input: PathBuf,
        output: PathBuf,
        parameters: Option<Arc<Map<String, Value>>>,
        mut cancelled: watch::Receiver<bool>,
    ) {
        let slot = tokio::select! {
            slot = Arc::clone(&self.running).acquire_owned() => slot,
            _ = cancelled.wait_for(|c| *c) => {
                job.set_phase(Phase::Cancelled);
                return;
            }
        };
        let Ok(_slot) = slot else { return };
        job.set_phase(Phase::Running);
        let (input, output) = (StreamEnd::File(input), StreamEnd::File(output));
        let ends = Ends {
            input: &input,
            output: &output,
            output_mode: OutputMode::Create,
            rules: &self.rules,
        };
        let options = StreamOptions {
            max_in_flight: self.config.max_in_flight.max(1),
            ..self.config.stream
        };
        let pace = Pace {
            throttle: Some((Arc::clone(&self.throttle), &job.paused)),
            progress: Some(Arc::clone(&job.progress)),
            parameters,
        };
        let result = run_jsonl(runtime, ends, options, pace, cancelled.clone()).await;
        *job.paused.lock().unwrap_or_else(|p| p.into_inner()) = None;
        let phase = match result {
            Err(e) => Phase::Failed(e.to_string()),
            Ok(_) if *cancelled.borrow() => Phase::Cancelled,
            Ok(_) => Phase::Done,
        };
        tracing::info!(job = %job.id, phase = ?phase, "Offline job finished.");
        job.set_phase(phase);
    }

    /// The status document of job `id`.
    ///
    /// # Errors
    /// When there is no such job.
    pub fn status(&self, id: &str) -> Result<Value, OfflineError> {
        self.find(id).map(|j| j.status())
    }

    /// Every remembered job's status, oldest first.
    pub fn list(&self) -> Value {
        Value::Array(self.table().jobs.values().map(|j| j.status()).collect())
    }

    /// Cancels job `id`: it reads no more requests, answers those it read, and ends `cancelled`.
    ///
    /// # Errors
    /// When there is no such job.
    pub fn cancel(&self, id: &str) -> Result<Value, OfflineError> {
        let job = self.find(id)?;
        let _ = job.cancel.send(true);
        Ok(job.status())
    }

    fn find(&self, id: &str) -> Result<Arc<Job>, OfflineError> {
        let n = id
            .strip_prefix("job-")
            .and_then(|n| n.parse::<u64>().ok())
            .ok_or_else(|| OfflineError::UnknownJob(quote(id).into_owned()))?;
        self.table()
            .jobs
            .get(&n)
            .cloned()
            .ok_or_else(|| OfflineError::UnknownJob(quote(id).into_owned()))
    }

    /// Cancels every job and waits until each has answered what it read.
    pub async fn shutdown(&self, within: Duration) {
        let tasks = {
            let mut table = self.table();
            for job in table.jobs.values() {
                let _ = job.cancel.send(true);
            }
            std::mem::take(&mut table.tasks)
        };
        let all = futures_join(tasks);
        if tokio::time::timeout(within, all).await.is_err() {
            tracing::warn!("Offline jobs did not finish within the drain timeout.");
        }
    }
}

async fn futures_join(tasks: Vec<tokio::task::JoinHandle<()>>) {
    for t in tasks {
        let _ = t.await;
    }
}
