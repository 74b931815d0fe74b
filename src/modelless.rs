//! Model-less serving over the Open Inference Protocol (INFaaS §3.1, §4.1): a client infers on a
//! *task* with `parameters: {latency_ms, min_accuracy, max_cost}` — or names a variant, as a model
//! or with `parameters: {variant}` — and weir picks the variant through the metadata store's
//! selection policy, loading it when no instance runs.
//!
//! Each loaded variant is a one-node graph of its own (the task's signature in, the variant's ONNX
//! file on an executor with the variant's threads, its outputs out), so a variant is served by the
//! same dataflow, batching, validation and error mapping as any graph, and requests that chose the
//! same variant share its calls. A cold start loads the graph on a blocking thread; the requests
//! that chose it while it loads wait for that one load, bounded by their deadline, and requests for
//! other variants are not held. The reply's `parameters` carry `variant` and `cold_start`.
//!
//! The store sees this process as one worker (`local`, hardware type `local`): lifecycle events as
//! variants load, and every second each instance's served rate, mean latency and requests in
//! flight, with the machine's CPU utilisation, so instance states (Overloaded, Interfered) follow
//! the load. Variants of other executor types, and batch-specialised builds (which take exactly
//! their batch), are not served by this process and are left out of its store.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::{Map, Value};
use tokio::sync::OnceCell;
use weir_connectors::offline::PauseSignal;
use weir_connectors::oip::{
    InferFuture, InferOutputs, InferRequest, ModelLess, OipError, ProtocolError,
};
use weir_infaas::dispatch::Dispatcher;
use weir_infaas::query::{Query, Requirements, Target};
use weir_infaas::repository::Repository;
use weir_infaas::state::{Event, InstanceState, Worker};
use weir_infaas::store::MetadataStore;
use weir_infaas::variant::Variant;

use crate::{RunningGraph, RuntimeOptions};

/// The id and hardware type this process has in the store.
pub const LOCAL_WORKER: &str = "local";
/// How often instance load is reported to the store.
const REPORT_EVERY: Duration = Duration::from_secs(1);
/// The parameter naming a variant explicitly on a task.
const VARIANT_PARAMETER: &str = "variant";

/// One variant's instance in this process, loaded at most once.
#[derive(Default)]
struct Instance {
    graph: OnceCell<Result<Arc<RunningGraph>, String>>,
    /// Requests answering now.
    in_flight: AtomicU32,
}

/// The executor's counts at the last report, per variant: rows, calls, time inside ONNX Runtime.
type Reported = HashMap<String, (u64, u64, Duration)>;

/// The model-less front end of `weir serve --repository`.
pub struct ModelLessServer {
    repository: Repository,
    store: MetadataStore,
    tasks: BTreeSet<String>,
    options: RuntimeOptions,
    instances: Mutex<HashMap<String, Arc<Instance>>>,
}

fn bad(field: impl Into<String>, message: impl Into<String>) -> OipError {
    OipError::Malformed(ProtocolError {
        field: field.into(),
        message: message.into(),
    })
}

/// Whether this process serves `v` itself.
fn served_here(v: &Variant) -> bool {
    v.config.hardware == LOCAL_WORKER && v.config.fixed_batch.is_none()
}

impl ModelLessServer {
    /// Opens the repository at `dir` and starts a store over the variants this process serves.
    ///
    /// # Errors
    /// When the repository cannot be read or the store cannot start.
    pub fn start(dir: &Path, options: RuntimeOptions) -> Result<Arc<Self>> {
        let repository =
            Repository::open(dir).with_context(|| format!("model repository {}", dir.display()))?;
        let variants: Vec<Variant> = repository
            .variants()
            .filter(|v| served_here(v))
            .cloned()
            .collect();
        let tasks = variants.iter().map(|v| v.task.clone()).collect();
        let store = MetadataStore::start(variants).context("starting the metadata store")?;
        store.record(Event::WorkerUp(Worker {
            id: LOCAL_WORKER.to_string(),
            hardware: LOCAL_WORKER.to_string(),
        }));
        // Serving starts once the store knows its worker.
        store.sync().context("starting the metadata store")?;
        Ok(Arc::new(ModelLessServer {
            repository,
            store,
            tasks,
            options,
            instances: Mutex::new(HashMap::new()),
        }))
    }

    /// The tasks served (each a model name).
    pub fn tasks(&self) -> impl Iterator<Item = &str> {
        self.tasks.iter().map(String::as_str)
    }

    /// The store's Prometheus families, for `/metrics`.
    pub fn metrics_source(self: &Arc<Self>) -> weir_connectors::http::MetricsSource {
        let mut registry = prometheus_client::registry::Registry::default();
        self.store.register(&mut registry);
        Box::new(move |out| {
            if let Err(e) = weir_engine::metrics::encode(out, &registry) {
                tracing::warn!(error = %e, "Model-less metrics could not be encoded.");
            }
        })
    }

    /// Reports every loaded instance's load, and the machine's utilisation, every second, until
    /// the server is dropped.
    pub fn spawn_reports(self: &Arc<Self>, cpu: Arc<weir_connectors::offline::CpuUtilisation>) {
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut last: Reported = HashMap::new();
            let mut at = Instant::now();
            loop {
                tokio::time::sleep(REPORT_EVERY).await;
                let Some(me) = weak.upgrade() else { return };
                let now = Instant::now();
                me.report(&mut last, now.duration_since(at).as_secs_f64(), cpu.busy());
                at = now;
            }
        });
    }

    fn report(&self, last: &mut Reported, seconds: f64, busy: Option<f64>) {
        if let Some(utilisation) = busy {
            self.store.record(Event::WorkerLoad {
                worker: LOCAL_WORKER.to_string(),
                utilisation,
            });
        }
        let loaded: Vec<(String, Arc<RunningGraph>, u32)> = self
            .instances
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter_map(|(n, i)| match i.graph.get() {
                Some(Ok(g)) => Some((
                    n.clone(),
                    Arc::clone(g),
                    i.in_flight.load(Ordering::Relaxed),
                )),
                _ => None,
            })
            .collect();
        for (variant, graph, in_flight) in loaded {
            // The model node's own counts: a call's time is ONNX Runtime's, comparable with the
            // profile (a request's end-to-end time also holds batching waits and the dataflow).
            let Some((_, now)) = graph.executor_stats().into_iter().next() else {
                continue;
            };
            let (r0, c0, b0) = last
                .insert(variant.clone(), (now.rows, now.runs, now.busy))
                .unwrap_or((0, 0, Duration::ZERO));
            let (rows, calls) = (now.rows.saturating_sub(r0), now.runs.saturating_sub(c0));
            let busy = now.busy.saturating_sub(b0);
            self.store.record(Event::InstanceLoad {
                variant,
                worker: LOCAL_WORKER.to_string(),
                qps: rows as f64 / seconds.max(1e-3),
                mean_latency_ms: if calls == 0 {
                    0.0
                } else {
                    busy.as_secs_f64() * 1e3 / calls as f64
                },
                outstanding: in_flight,
            });
        }
    }

    /// What `request` for `name` asks for.
    fn query(&self, name: &str, request: &InferRequest) -> Result<(String, Query), OipError> {
        let parameters: Map<String, Value> = match request.parameters.as_deref() {
            Some(text) => {
                serde_json::from_str(text).map_err(|_| bad("parameters", "not a JSON object"))?
            }
            None => Map::new(),
        };
        let requirements =
            Requirements::from_parameters(&parameters).map_err(|e| bad(e.field, e.message))?;
        let (task, target) = match (
            self.repository.variant(name),
            parameters.get(VARIANT_PARAMETER),
        ) {
            (Some(v), _) => (v.task.clone(), Target::Variant(name.to_string())),
            (None, Some(Value::String(v))) => match self.repository.variant(v) {
                Some(found) if found.task == name && served_here(found) => {
                    (name.to_string(), Target::Variant(v.clone()))
                }
                _ => {
                    return Err(bad(
                        "parameters.variant",
                        format!(
                            "task `{name}` has no variant `{}` served here",
                            weir_connectors::echo::quote(v)
                        ),
                    ))
                }
            },
            (None, Some(_)) => return Err(bad("parameters.variant", "must be a variant's name")),
            (None, None) => (name.to_string(), Target::Task(name.to_string())),
        };
        let rows = self.rows(&task, request)?;
        Ok((
            task,
            Query {
                target,
                requirements,
                batch: rows,
            },
        ))
    }

    /// Rows the request holds: the leading dimension when its first input carries a batch
    /// dimension beyond the task's per-row shape.
    fn rows(&self, task: &str, request: &InferRequest) -> Result<u32, OipError> {
        let Some(sig) = self.repository.task_signature(task) else {
            return Ok(1);
        };
        let Some(first) = request.inputs.first() else {
            return Err(bad("inputs", "no inputs"));
        };
        let per_row = sig
            .inputs
            .iter()
            .find(|i| i.name == first.name)
            .map(|i| i.dims.len().saturating_sub(1));
        let rows = match per_row {
            Some(rank) if first.shape.len() == rank + 1 => first.shape[0],
            _ => 1,
        };
        u32::try_from(rows).map_err(|_| bad("inputs[0].shape", "too many rows"))
    }

    /// The variant's graph, loaded once; whether this call waited for the load.
    async fn instance(
        &self,
        variant: &Variant,
        deadline: tokio::time::Instant,
        timeout_ms: u64,
    ) -> Result<(Arc<Instance>, bool), OipError> {
        let instance = Arc::clone(
            self.instances
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(variant.name.clone())
                .or_default(),
        );
        let cold = !instance.graph.initialized();
        let load = instance.graph.get_or_init(|| self.load(variant.clone()));
        match tokio::time::timeout_at(deadline, load).await {
            Ok(Ok(_)) => Ok((instance, cold)),
            Ok(Err(e)) => {
                // Forget the failed load, so a later request tries again.
                let mut instances = self.instances.lock().unwrap_or_else(|p| p.into_inner());
                if instances
                    .get(&variant.name)
                    .is_some_and(|i| Arc::ptr_eq(i, &instance))
                {
                    instances.remove(&variant.name);
                }
                Err(OipError::Request(
                    weir_engine::request::RequestError::Node {
                        node: variant.name.clone(),
                        message: format!("the variant could not be loaded: {e}"),
                    },
                ))
            }
            Err(_) => Err(OipError::Deadline { ms: timeout_ms }),
        }
    }

    /// Loads `variant` as a one-node graph, telling the store.
    async fn load(&self, variant: Variant) -> Result<Arc<RunningGraph>, String> {
        self.store.record(Event::Loading {
            variant: variant.name.clone(),
            worker: LOCAL_WORKER.to_string(),
        });
        let path = self.repository.verify(&variant).map_err(|e| e.to_string());
        let signature = self.repository.task_signature(&variant.task).cloned();
        let options = self.options;
        let name = variant.name.clone();
        let started = Instant::now();
        let result = match (path, signature) {
            (Ok(path), Some(sig)) => tokio::task::spawn_blocking(move || {
                let yaml = variant_graph(&variant, &sig, &path);
                let spec = weir_engine::spec::GraphSpec::from_yaml(&yaml, &variant.name)
                    .map_err(|e| e.to_string())?;
                let loaded = crate::plan_spec(&spec, Path::new(".")).map_err(|d| d.to_string())?;
                crate::start(loaded.plan, options)
                    .map(Arc::new)
                    .map_err(|e| e.to_string())
            })
            .await
            .unwrap_or_else(|e| Err(e.to_string())),
            (Err(e), _) => Err(e),
            (_, None) => Err("the task has no signature".to_string()),
        };
        match &result {
            Ok(_) => {
                tracing::info!(variant = %name, ms = started.elapsed().as_millis() as u64, "Variant loaded.");
                self.store.record(Event::Loaded {
                    variant: name,
                    worker: LOCAL_WORKER.to_string(),
                });
            }
            Err(e) => {
                tracing::warn!(variant = %name, error = %e, "Variant failed to load.");
                self.store.record(Event::Unloaded {
                    variant: name,
                    worker: LOCAL_WORKER.to_string(),
                });
            }
        }
        result
    }

    async fn answer(
        &self,
        name: &str,
        request: InferRequest,
        timeout: Duration,
    ) -> Result<InferOutputs, OipError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let (task, query) = self.query(name, &request)?;
        let choice = self.store.select(&query).map_err(|m| {
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
        })?;
        let variant = self
            .repository
            .variant(&choice.variant)
            .cloned()
            .ok_or_else(|| bad("parameters", "the chosen variant left the repository"))?;
        let timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        let (instance, cold) = self.instance(&variant, deadline, timeout_ms).await?;
        let graph = match instance.graph.get() {
            Some(Ok(g)) => Arc::clone(g),
            _ => return Err(bad("parameters", "the variant is not loaded")),
        };
        instance.in_flight.fetch_add(1, Ordering::Relaxed);
        let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
        let result = weir_connectors::oip::infer_outputs(graph.runtime(), request, remaining).await;
        instance.in_flight.fetch_sub(1, Ordering::Relaxed);
        let mut reply = result?;
        reply.model = name.to_string();
        reply
            .parameters
            .insert("variant".to_string(), Value::String(variant.name));
        reply
            .parameters
            .insert("cold_start".to_string(), Value::Bool(cold));
        Ok(reply)
    }
}

impl ModelLess for ModelLessServer {
    fn serves(&self, name: &str) -> bool {
        self.tasks.contains(name) || self.repository.variant(name).is_some_and(served_here)
    }

    fn infer<'a>(
        &'a self,
        name: &'a str,
        request: InferRequest,
        timeout: Duration,
    ) -> InferFuture<'a> {
        Box::pin(self.answer(name, request, timeout))
    }
}

/// Online work slower than its profile pauses offline jobs (INFaaS §4.2, R18's second clause).
impl PauseSignal for ModelLessServer {
    fn pause_reason(&self) -> Option<String> {
        self.store
            .states()
            .into_iter()
            .find(|(_, _, s)| *s == InstanceState::Interfered)
            .map(|(variant, _, _)| format!("variant {variant} runs slower than its profile"))
    }
}

/// The one-node graph that serves `variant` (file at `path`) with the task's signature `sig`.
fn variant_graph(
    variant: &Variant,
    sig: &weir_infaas::repository::Signature,
    path: &Path,
) -> String {
    let dims = |d: &[Option<u64>]| -> String {
        d.iter()
            .skip(1)
            .map(|x| x.map_or_else(|| "-1".to_string(), |n| n.to_string()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut yaml = format!("name: {}\ninputs:\n", variant.task);
    for i in &sig.inputs {
        yaml.push_str(&format!(
            "  - {{name: {}, dtype: {}, shape: [{}]}}\n",
            i.name,
            i.dtype.name(),
            dims(&i.dims)
        ));
    }
    let inputs: Vec<String> = sig
        .inputs
        .iter()
        .map(|i| format!("{0}: {0}", i.name))
        .collect();
    yaml.push_str(&format!(
        "nodes:\n  - model: {{id: m, path: {:?}, inputs: {{{}}}, batching: {{max_size: {}}}, executor: {{intra_op_threads: {}}}}}\noutputs:\n",
        path.display().to_string(),
        inputs.join(", "),
        variant.max_batch.max(1),
        variant.config.intra_threads.max(1)
    ));
    for o in &sig.outputs {
        yaml.push_str(&format!("  - {{name: {0}, from: m.{0}}}\n", o.name));
    }
    yaml
}
