//! Model-less serving over the Open Inference Protocol (INFaaS §3.1, §4.1): a client infers on a
//! *task* with `parameters: {latency_ms, min_accuracy, max_cost}` — or names a variant, as a model
//! or with `parameters: {variant}` — and weir picks the variant and the worker through the
//! metadata store's selection policy, loading it there when no instance runs.
//!
//! Workers are this process (`local`, hardware type `local`) and the `weir executor --repository`
//! processes named with `--executor NAME=HARDWARE` ([`remote`]). Each instance is a one-node graph
//! of its own ([`variant_graph`], [`instances`]), so a variant is served by the same dataflow,
//! batching, validation and error mapping as any graph, and requests that chose the same instance
//! share its calls. The reply's `parameters` carry `variant`, `worker` and `cold_start`.
//!
//! A request whose remote instance's executor dies under it (SIGKILL drops its liveliness) moves:
//! the instance is forgotten, the store told, and the request chooses again and runs where the
//! choice now falls, a few times within its deadline; a request is answered once, by the attempt
//! that finished. A model's own error on a live executor is the request's answer.
//!
//! A traced request (sampled) gets one `choose {task}` span per attempt, a child of its server
//! span, naming the variant, the worker, whether it was a cold start and how many moves came
//! before; the chosen instance's graph adds its own spans under the same server span.
//!
//! The store learns the local worker's load every second (`load_reports`); what a request asks
//! of it is read from its name and `parameters` (`query`). Variants of executor types no worker
//! has are left out of the store. A batch-specialised build is served with its calls padded to
//! its batch.

mod error;
mod instances;
mod load_reports;
mod query;
pub mod register;
pub mod remote;
pub mod scaling;
mod signature;
mod status;
pub mod task_nodes;
mod variant_graph;

pub use error::ModelLessError;

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use serde_json::Value;
use weir_connectors::models::InferStats;
use weir_connectors::offline::PauseSignal;
use weir_connectors::oip::{
    InferFuture, InferOutputs, InferRequest, ModelLess, ModelLessModel, OipError, ProtocolError,
};
use weir_engine::request::RequestError;
use weir_engine::trace::AttributeValue;
use weir_infaas::dispatch::Dispatcher;
use weir_infaas::query::{Choice, Query, Target};
use weir_infaas::repository::Repository;
use weir_infaas::state::{Event, InstanceState, Worker};
use weir_infaas::store::MetadataStore;
use weir_infaas::variant::Variant;

use weir_engine::runtime::RuntimeOptions;
use weir_runtime::RunningGraph;

use instances::{Instance, InstanceKey, Instances, Loaded};
use remote::{RemoteOptions, RemoteWorkers};

/// The id and hardware type this process has in the store.
pub const LOCAL_WORKER: &str = "local";
/// How long a query's requirements count for the autoscaler.
const DEMAND_WINDOW: Duration = Duration::from_secs(10);
/// Wait between attempts of a preload whose executor is not up yet.
const PRELOAD_RETRY: Duration = Duration::from_millis(250);
/// Most times one request moves after its executor died under it.
const MAX_MOVES: u32 = 4;
/// Wait before a move's choice, times the moves so far: the executor's liveliness loss reaches
/// the store (and takes its other instances out) within it.
const MOVE_BACKOFF: Duration = Duration::from_millis(25);

/// The model-less front end of `weir serve --repository`.
pub struct ModelLessServer {
    /// This server, for the load tasks it spawns.
    me: Weak<ModelLessServer>,
    repository: Repository,
    store: Arc<MetadataStore>,
    tasks: BTreeSet<String>,
    /// Executor types some worker has: `local` and the remote executors'.
    hardware: BTreeSet<String>,
    options: RuntimeOptions,
    instances: Arc<Instances>,
    remote: Option<Arc<RemoteWorkers>>,
    /// Requests moved off an executor that died under them.
    moved: prometheus_client::metrics::counter::Counter,
    /// What recent queries asked of the variants they chose, for the autoscaler.
    demand: Arc<weir_infaas::autoscale::demand::Demand>,
    /// Per name served (each task and each variant), its requests, for Triton's statistics.
    stats: HashMap<String, Arc<InferStats>>,
    /// The autoscaler's recent actions, for the status document.
    actions: scaling::ActionLog,
}

fn bad(field: impl Into<String>, message: impl Into<String>) -> OipError {
    OipError::Malformed(ProtocolError {
        field: field.into(),
        message: message.into(),
    })
}

/// Whether some worker among `hardware` can serve `v`.
fn servable(hardware: &BTreeSet<String>, v: &Variant) -> bool {
    hardware.contains(&v.config.hardware)
}

/// Whether a graph's remote replicas are all gone (its executor died).
fn executor_gone(graph: &RunningGraph) -> bool {
    graph
        .replica_pools()
        .iter()
        .all(|(_, pool)| pool.replica_states().iter().all(|(_, alive, _, _)| !alive))
}

impl ModelLessServer {
    /// Opens the repository at `dir` and starts a store over the variants this process or the
    /// executors of `remote` can serve, following those executors.
    ///
    /// # Errors
    /// When the repository cannot be read, or the store or the zenoh session cannot start.
    pub fn start(
        dir: &Path,
        options: RuntimeOptions,
        remote: &RemoteOptions,
    ) -> Result<Arc<Self>, ModelLessError> {
        let repository = Repository::open(dir).map_err(|source| ModelLessError::Repository {
            dir: dir.display().to_string(),
            source,
        })?;
        let mut hardware: BTreeSet<String> = remote
            .executors
            .iter()
            .map(|e| e.hardware.clone())
            .chain(remote.launchable.iter().cloned())
            .collect();
        hardware.insert(LOCAL_WORKER.to_string());
        let variants: Vec<Variant> = repository
            .variants()
            .filter(|v| servable(&hardware, v))
            .cloned()
            .collect();
        let tasks: BTreeSet<String> = variants.iter().map(|v| v.task.clone()).collect();
        let stats = tasks
            .iter()
            .chain(variants.iter().map(|v| &v.name))
            .map(|n| (n.clone(), Arc::default()))
            .collect();
        let store = Arc::new(MetadataStore::start(variants)?);
        store.record(Event::WorkerUp(Worker {
            id: LOCAL_WORKER.to_string(),
            hardware: LOCAL_WORKER.to_string(),
        }));
        // Executors named now, or ones that will connect to the endpoints listened on.
        let remote = match remote.executors.is_empty() && remote.listen.is_empty() {
            true => None,
            false => Some(Arc::new(RemoteWorkers::start(
                remote,
                Arc::clone(&store) as Arc<dyn Dispatcher>,
            )?)),
        };
        // Serving starts once the store knows its worker.
        store.sync()?;
        Ok(Arc::new_cyclic(|me| ModelLessServer {
            me: me.clone(),
            repository,
            store,
            tasks,
            hardware,
            options,
            instances: Arc::new(Instances::default()),
            remote,
            moved: Default::default(),
            demand: Arc::new(weir_infaas::autoscale::demand::Demand::new(DEMAND_WINDOW)),
            stats,
            actions: scaling::ActionLog::default(),
        }))
    }

    /// The tasks served (each a model name).
    pub fn tasks(&self) -> impl Iterator<Item = &str> {
        self.tasks.iter().map(String::as_str)
    }

    fn served(&self, v: &Variant) -> bool {
        servable(&self.hardware, v)
    }

    /// The store's Prometheus families, and the autoscaler's when one runs, for `/metrics`.
    pub fn metrics_source(
        self: &Arc<Self>,
        scaling: Option<&weir_infaas::autoscale::metrics::ScalingMetrics>,
    ) -> weir_connectors::http::MetricsSource {
        let mut registry = prometheus_client::registry::Registry::default();
        self.store.register(&mut registry);
        if let Some(scaling) = scaling {
            scaling.register(&mut registry);
        }
        registry.register(
            "weir_infaas_requests_moved",
            "Requests moved to another choice after the executor serving them died",
            self.moved.clone(),
        );
        Box::new(move |out| {
            if let Err(e) = weir_engine::metrics::encode(out, &registry) {
                tracing::warn!(error = %e, "Model-less metrics could not be encoded.");
            }
        })
    }

    /// The store's choice for `query` on `task`, or a 400 naming the closest variant.
    fn choose(&self, task: &str, query: &Query) -> Result<Choice, OipError> {
        self.store.select(query).map_err(|m| {
            let closest = match (&m.closest, m.distance) {
                (Some(v), Some(d)) => format!("; closest variant: {v} (distance {d:.3})"),
                _ => String::new(),
            };
            bad(
                "parameters",
                format!(
                    "no variant of task `{task}` meets the requirements: {}{closest}",
                    m.reason
                ),
            )
        })
    }

    /// The instance of `variant` on `worker`, its load spawned when there is none.
    fn instance(&self, variant: &Variant, worker: &str) -> Arc<Instance> {
        let key: InstanceKey = (variant.name.clone(), worker.to_string());
        let (me, variant, worker) = (self.me.clone(), variant.clone(), worker.to_string());
        self.instances.get_or_load(&key, move || {
            tokio::spawn(async move {
                match me.upgrade() {
                    Some(server) => server.load(variant, worker).await,
                    None => Err("the server is stopping".to_string()),
                }
            })
        })
    }

    /// Loads `variant` on `worker` as a one-node graph, telling the store.
    async fn load(&self, variant: Variant, worker: String) -> Loaded {
        self.store.record(Event::Loading {
            variant: variant.name.clone(),
            worker: worker.clone(),
        });
        let path = self.repository.verify(&variant).map_err(|e| e.to_string());
        let signature = self.repository.task_signature(&variant.task).cloned();
        let remote = match (worker == LOCAL_WORKER, &self.remote) {
            (true, _) => None,
            (false, Some(r)) if r.knows(&worker) => Some(Arc::clone(r)),
            (false, _) => {
                return self.loaded(
                    &variant.name,
                    &worker,
                    Err(format!("unknown worker `{worker}`")),
                )
            }
        };
        let options = self.options;
        let (name, at) = (variant.name.clone(), worker.clone());
        let started = Instant::now();
        let result = match (path, signature) {
            (Ok(path), Some(sig)) => tokio::task::spawn_blocking(move || {
                if let Some(r) = &remote {
                    r.command(remote::Action::Load, &variant.name, &at)?;
                }
                let spec = variant_graph::variant_graph(
                    &variant,
                    &sig,
                    &path,
                    remote.is_some().then_some(at.as_str()),
                );
                let loaded =
                    weir_runtime::plan_spec(&spec, Path::new(".")).map_err(|d| d.to_string())?;
                match &remote {
                    Some(r) => r.start_graph(loaded.plan, options, &variant.name),
                    None => weir_runtime::start(loaded.plan, options).map_err(|e| e.to_string()),
                }
                .map(Arc::new)
            })
            .await
            .unwrap_or_else(|e| Err(e.to_string())),
            (Err(e), _) => Err(e),
            (_, None) => Err("the task has no signature".to_string()),
        };
        if result.is_ok() {
            tracing::info!(variant = %name, %worker, ms = started.elapsed().as_millis() as u64, "Variant loaded.");
        }
        self.loaded(&name, &worker, result)
    }

    /// Loads `variant` on `worker` ahead of any query that needs it (a scale-up), waiting up to
    /// `timeout` for the load.
    ///
    /// # Errors
    /// When the variant is unknown or not servable, or the load failed or did not finish in time.
    pub async fn preload(
        &self,
        variant: &str,
        worker: &str,
        timeout: Duration,
    ) -> Result<(), String> {
        let found = self
            .repository
            .variant(variant)
            .filter(|v| self.served(v))
            .cloned()
            .ok_or_else(|| format!("no servable variant `{variant}`"))?;
        let instance = self.instance(&found, worker);
        match instance.ready(tokio::time::Instant::now() + timeout).await {
            Some(Ok(_)) => Ok(()),
            Some(Err(e)) => Err(e),
            None => Err(format!(
                "`{variant}` on {worker} did not load within {timeout:?}"
            )),
        }
    }

    /// [`ModelLessServer::preload`], tried again every [`PRELOAD_RETRY`] until `timeout` has
    /// passed: an executor named at start may still be starting (its load is then refused
    /// or unanswered), and the start of a fixed pool waits for it.
    ///
    /// # Errors
    /// The last attempt's error once the time is up, or at once when the variant is unknown.
    pub async fn preload_when_up(
        &self,
        variant: &str,
        worker: &str,
        timeout: Duration,
    ) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let error = match self.preload(variant, worker, left).await {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            let known = self.repository.variant(variant).is_some();
            if !known || tokio::time::Instant::now() + PRELOAD_RETRY >= deadline {
                return Err(error);
            }
            tracing::debug!(%variant, %worker, %error, "Preload failed; trying again.");
            tokio::time::sleep(PRELOAD_RETRY).await;
        }
    }

    /// The variants loaded or loading on `worker`.
    pub fn variants_on(&self, worker: &str) -> Vec<String> {
        self.instances.on(worker)
    }

    /// Follows the executor `slot` from now on (one the worker autoscaler launched).
    ///
    /// # Errors
    /// When this front end reaches no executors (it names none and listens on no endpoint), or
    /// the executor's events cannot be subscribed to.
    pub fn follow(&self, slot: remote::ExecutorSlot) -> Result<(), ModelLessError> {
        match &self.remote {
            Some(r) => r.follow(slot),
            None => Err(ModelLessError::NoExecutors),
        }
    }

    /// Unloads `variant` on `worker`: no request chooses it from now on, the requests already
    /// on it are answered (its graph stops when the last of them lets go of it), and a remote
    /// executor is told to unload it (blocking until it answers, so call it off the query path).
    ///
    /// # Errors
    /// When the executor refused or did not answer; the instance is out of the store either way.
    pub fn unload(&self, variant: &str, worker: &str) -> Result<(), String> {
        let key: InstanceKey = (variant.to_string(), worker.to_string());
        self.instances.remove(&key);
        self.store.record(Event::Unloaded {
            variant: variant.to_string(),
            worker: worker.to_string(),
        });
        match (&self.remote, worker == LOCAL_WORKER) {
            (Some(remote), false) => remote.command(remote::Action::Unload, variant, worker),
            _ => Ok(()),
        }
    }

    /// Tells the store how a load ended.
    fn loaded(&self, variant: &str, worker: &str, result: Loaded) -> Loaded {
        let (variant, worker) = (variant.to_string(), worker.to_string());
        match &result {
            Ok(_) => self.store.record(Event::Loaded { variant, worker }),
            Err(e) => {
                tracing::warn!(%variant, %worker, error = %e, "Variant failed to load.");
                self.store.record(Event::Unloaded { variant, worker });
            }
        }
        result
    }

    async fn answer(
        &self,
        name: &str,
        mut request: InferRequest,
        timeout: Duration,
    ) -> Result<InferOutputs, OipError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        let (task, query) = self.query(name, &request)?;
        let mut moves = 0;
        loop {
            let chose_at = std::time::SystemTime::now();
            let choice = self.choose(&task, &query)?;
            let variant = self
                .repository
                .variant(&choice.variant)
                .cloned()
                .ok_or_else(|| bad("parameters", "the chosen variant left the repository"))?;
            let remote = choice.worker != LOCAL_WORKER;
            self.demand.note(
                &variant.name,
                &query.requirements,
                matches!(query.target, Target::Variant(_)),
            );
            let instance = self.instance(&variant, &choice.worker);
            let cold = !instance.settled();
            let ready = instance.ready(deadline).await;
            if let Some(trace) = &request.trace {
                trace.export_step(
                    format!("choose {name}"),
                    chose_at,
                    vec![
                        ("weir.task", AttributeValue::Str(task.clone())),
                        ("weir.variant", AttributeValue::Str(variant.name.clone())),
                        ("weir.worker", AttributeValue::Str(choice.worker.clone())),
                        ("weir.cold_start", AttributeValue::Bool(cold)),
                        ("weir.moves", AttributeValue::Int(i64::from(moves))),
                    ],
                    !matches!(ready, Some(Ok(_))),
                );
            }
            let graph = match ready {
                None => return Err(OipError::Deadline { ms: timeout_ms }),
                Some(Ok(graph)) => graph,
                // A remote load that failed (its executor may be gone): choose again.
                Some(Err(_)) if remote && moves < MAX_MOVES => {
                    moves += 1;
                    tokio::time::sleep(MOVE_BACKOFF * moves).await;
                    continue;
                }
                Some(Err(e)) => {
                    return Err(OipError::Request(RequestError::Node {
                        node: variant.name.clone(),
                        message: format!("the variant could not be loaded: {e}"),
                    }))
                }
            };
            // A remote attempt that may still move sends a copy and keeps the request, to move
            // it if the executor dies under it; any other sends the request itself.
            let (sent, kept) = match remote && moves < MAX_MOVES {
                true => (request.clone(), Some(request)),
                false => (request, None),
            };
            instance.in_flight.fetch_add(1, Ordering::Relaxed);
            let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
            let result =
                weir_connectors::oip::infer_outputs(graph.runtime(), sent, remaining).await;
            instance.in_flight.fetch_sub(1, Ordering::Relaxed);
            if let (Err(OipError::Request(e)), Some(back)) = (&result, kept) {
                // Nothing ran (the instance's one replica could not be reached, however often
                // it was tried), or the executor is known gone: the instance is lost to this
                // request either way. Its liveliness may not have dropped yet when it died while
                // starting, so an unreachable replica is not left to the liveliness signal alone.
                let unreachable = matches!(e, RequestError::NodeUnavailable { .. });
                let failed = matches!(e, RequestError::Node { .. });
                if unreachable || (failed && executor_gone(&graph)) {
                    tracing::warn!(variant = %variant.name, worker = %choice.worker, "The instance was lost under a request (its executor gone or unreachable); the request moves.");
                    let key: InstanceKey = (variant.name.clone(), choice.worker.clone());
                    self.instances.forget(&key, &instance);
                    self.store.record(Event::Unloaded {
                        variant: variant.name.clone(),
                        worker: choice.worker.clone(),
                    });
                    self.moved.inc();
                    moves += 1;
                    request = back;
                    tokio::time::sleep(MOVE_BACKOFF * moves).await;
                    continue;
                }
            }
            let mut reply = result?;
            reply.model = name.to_string();
            for (key, value) in [
                ("variant", Value::String(variant.name)),
                ("worker", Value::String(choice.worker)),
                ("cold_start", Value::Bool(cold)),
            ] {
                reply.parameters.insert(key.to_string(), value);
            }
            return Ok(reply);
        }
    }
}

impl ModelLess for ModelLessServer {
    fn serves(&self, name: &str) -> bool {
        self.tasks.contains(name)
            || self
                .repository
                .variant(name)
                .is_some_and(|v| self.served(v))
    }

    fn infer<'a>(
        &'a self,
        name: &'a str,
        request: InferRequest,
        timeout: Duration,
    ) -> InferFuture<'a> {
        Box::pin(async move {
            let started = Instant::now();
            let task = self
                .repository
                .variant(name)
                .map_or(name, |v| v.task.as_str());
            let rows = self.rows(task, &request).map_or(1, u64::from);
            let result = self.answer(name, request, timeout).await;
            if let Some(stats) = self.stats.get(name) {
                match &result {
                    Ok(_) => stats.success(rows, started.elapsed()),
                    Err(_) => stats.failure(started.elapsed()),
                }
            }
            result
        })
    }

    fn describe(&self, name: &str) -> Option<ModelLessModel> {
        let stats = Arc::clone(self.stats.get(name)?);
        let signature = signature::of_name(&self.repository, |v| self.served(v), name)?;
        Some(ModelLessModel { signature, stats })
    }

    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.stats.keys().cloned().collect();
        names.sort();
        names
    }
}

/// Online work slower than its profile pauses offline jobs: the second of INFaaS's two throttling
/// conditions (§6.3.2; the first is utilisation above 40 %).
impl PauseSignal for ModelLessServer {
    fn pause_reason(&self) -> Option<String> {
        self.store
            .states()
            .into_iter()
            .find(|(_, _, s)| *s == InstanceState::Interfered)
            .map(|(variant, _, _)| format!("variant {variant} runs slower than its profile"))
    }
}
