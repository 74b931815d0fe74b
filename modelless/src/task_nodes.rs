//! Model-less nodes in graphs ("INFaaS: Automated Model-less Inference Serving", §3.1): a model
//! node that names a `task:` instead of a file gets a variant of that task from a model
//! repository, chosen by the model-less front end's own selection policy — among the variants
//! this process can run (executor type `local`), the one meeting the node's requirements with the
//! least load + inference time (§4.1's choice when nothing is loaded yet). The node then runs the
//! variant's file (its SHA-256 checked against the repository's record) with the settings it was
//! profiled with: its intra-op threads, its graph-optimisation level, its fixed batch.
//!
//! The choice is made once, when the graph is loaded: a graph's plan is fixed while it runs.
//! Per-request choices are what a task served as a model (`weir serve --repository`) makes.

use std::path::Path;

use weir_engine::diagnostic::{Diagnostic, Diagnostics};
use weir_engine::spec::{GraphSpec, NodeSpec, Spanned, TaskSpec};
use weir_infaas::dispatch::Dispatcher;
use weir_infaas::query::{Query, Requirements, Target};
use weir_infaas::repository::Repository;
use weir_infaas::state::{Event, Worker};
use weir_infaas::store::MetadataStore;

/// The worker id and executor type a graph's own process has.
const LOCAL: &str = "local";

/// Fills in every task node of `spec` from the repository at `repository`; a graph without task
/// nodes is left as it is, and needs none.
///
/// # Errors
/// Diagnostics naming each task node that could not be resolved (no repository, an unknown task,
/// requirements no variant meets with the closest one, a file that does not match its record).
pub fn resolve(spec: &mut GraphSpec, repository: Option<&Path>) -> Result<(), Diagnostics> {
    let has_tasks = spec
        .nodes
        .iter()
        .any(|n| matches!(&n.value, NodeSpec::Model(m) if m.task.is_some()));
    let Some(dir) = repository.filter(|_| has_tasks) else {
        // Without a repository the validator names each task node.
        return Ok(());
    };
    let fail = |message: String| Diagnostics {
        items: vec![Diagnostic::error(
            "(repository)",
            Default::default(),
            message,
        )],
        source: None,
    };
    let repo = Repository::open(dir)
        .map_err(|e| fail(format!("model repository {}: {e}", dir.display())))?;
    let local: Vec<_> = repo
        .variants()
        .filter(|v| v.config.hardware == LOCAL)
        .cloned()
        .collect();
    let store =
        MetadataStore::start(local).map_err(|e| fail(format!("the metadata store: {e}")))?;
    store.record(Event::WorkerUp(Worker {
        id: LOCAL.into(),
        hardware: LOCAL.into(),
    }));
    store
        .sync()
        .map_err(|e| fail(format!("the metadata store: {e}")))?;
    let mut problems = Vec::new();
    for node in &mut spec.nodes {
        let NodeSpec::Model(m) = &mut node.value else {
            continue;
        };
        let Some(task) = m.task.take() else { continue };
        let id = m.id.value.clone();
        let at = task.location;
        let field = format!("nodes.{id}.task");
        let mut problem = |message: String| problems.push(Diagnostic::error(&field, at, message));
        if !m.path.value.as_os_str().is_empty() {
            problem(format!("node `{id}` names both `path:` and `task:`; a model-less node's file is its variant's"));
            continue;
        }
        // Read with the request parameters' own checks, so a node and a request agree.
        let mut parameters = serde_json::Map::new();
        let name = match &task.value {
            TaskSpec::Name(n) => n.clone(),
            TaskSpec::Requirements(r) => {
                for (key, value) in [
                    ("latency_ms", r.latency_ms),
                    ("min_accuracy", r.min_accuracy),
                    ("max_cost", r.max_cost),
                ] {
                    if let Some(v) = value {
                        let number = serde_json::Number::from_f64(v)
                            .map_or(serde_json::Value::Null, serde_json::Value::Number);
                        parameters.insert(key.to_string(), number);
                    }
                }
                r.name.clone()
            }
        };
        let requirements = match Requirements::from_parameters(&parameters) {
            Ok(r) => r,
            Err(e) => {
                let message = e.to_string().replacen("parameters.", "task.", 1);
                problem(format!("node `{id}`: {message}"));
                continue;
            }
        };
        let query = Query {
            target: Target::Task(name.clone()),
            requirements,
            batch: 1,
        };
        let chosen = match store.select(&query) {
            Ok(c) => c,
            Err(no) => {
                let closest = match (&no.closest, no.distance) {
                    (Some(v), Some(d)) => format!("; closest variant: {v} (distance {d:.3})"),
                    _ => String::new(),
                };
                problem(format!("node `{id}`: no variant of task `{name}` this process can run meets the requirements: {}{closest}", no.reason));
                continue;
            }
        };
        let Some(variant) = repo.variant(&chosen.variant) else {
            continue;
        };
        let path = match repo.verify(variant) {
            Ok(p) => p,
            Err(e) => {
                problem(format!("node `{id}`: variant {}: {e}", variant.name));
                continue;
            }
        };
        tracing::info!(node = %id, task = %name, variant = %variant.name, accuracy = variant.accuracy, "Task node resolved.");
        m.path = Spanned {
            value: path,
            location: at,
        };
        m.executor.intra_op_threads = variant.config.intra_threads.max(1) as usize;
        m.executor.graph_optimization = variant.config.graph_level;
        if let Some(b) = variant.config.fixed_batch.filter(|b| *b > 1) {
            m.batching.fixed_size = Some(Spanned {
                value: b as usize,
                location: at,
            });
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Diagnostics {
            items: problems,
            source: None,
        })
    }
}
