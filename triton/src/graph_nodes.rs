//! Model nodes of service graphs that run a model of a Triton repository (`repository: resnet`,
//! or `{name: resnet, version: 2}`) instead of naming a file, so a pipeline and Triton's clients
//! share one repository.
//!
//! The node takes from the repository what the repository owns: the version's ONNX file and how
//! its configuration says to call it — batching (`max_batch_size`, `dynamic_batching`), the
//! executor (`instance_group` counts, thread parameters) and per-sequence state — by the same
//! rules that serve the model on its own ([`mod@crate::graph`]). The graph owns the rest: which
//! tensors feed the model's inputs, its replicas and routing, resilience. A node that also sets
//! what the configuration owns is refused naming the field, so one setting never has two sources.
//!
//! The node runs its own executor, started with its graph; loading or unloading the model through
//! the repository API does not move it.

use std::path::PathBuf;

use weir_engine::diagnostic::{Diagnostic, Diagnostics};
use weir_engine::spec::{BatchingSpec, ExecutorSpec, GraphSpec, ModelSpec, NodeSpec};

use crate::autocomplete::ModelKind;
use crate::graph::{model_node, served};
use crate::load::{load, LoadOptions, Repository};
use crate::reshape::reshapes;

/// As [`resolve_nodes`], reading the repositories at `roots` (with `options`) only when `spec`
/// has a `repository:` node; without roots such nodes are left for the validator, which names
/// each.
///
/// # Errors
/// As [`resolve_nodes`], and a repository root that cannot be read.
pub fn resolve_from(
    spec: &mut GraphSpec,
    roots: &[PathBuf],
    options: &LoadOptions,
) -> Result<(), Diagnostics> {
    let wanted = spec
        .nodes
        .iter()
        .any(|n| matches!(&n.value, NodeSpec::Model(m) if m.repository.is_some()));
    if !wanted || roots.is_empty() {
        return Ok(());
    }
    let repositories = roots
        .iter()
        .map(|root| load(root, options))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Diagnostics {
            items: vec![Diagnostic::error(
                "(model repository)",
                Default::default(),
                e.to_string(),
            )],
            source: None,
        })?;
    resolve_nodes(spec, &repositories)
}

/// Fills in every `repository:` model node of `spec` from `repositories` (the first that holds
/// the model, as requests find it). A graph without such nodes is left as it is.
///
/// # Errors
/// Diagnostics naming each node that could not be resolved: a model no repository holds, a
/// version not served, an ensemble, a configuration the engine cannot run, an input the node
/// does not feed, or a setting given both in the node and in the configuration.
pub fn resolve_nodes(spec: &mut GraphSpec, repositories: &[Repository]) -> Result<(), Diagnostics> {
    let mut problems = Vec::new();
    for node in &mut spec.nodes {
        let NodeSpec::Model(m) = &mut node.value else {
            continue;
        };
        let Some(wanted) = m.repository.take() else {
            continue;
        };
        let id = m.id.value.clone();
        let field = format!("nodes.{id}.repository");
        let name = wanted.value.name().to_string();
        match resolve_one(m, &name, wanted.value.version(), repositories) {
            Ok(()) => {}
            Err(message) => problems.push(Diagnostic::error(
                &field,
                wanted.location,
                format!("node `{id}`: {message}"),
            )),
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

/// Fills `m` from version `version` (highest when `None`) of `name`, or says why it cannot be.
fn resolve_one(
    m: &mut ModelSpec,
    name: &str,
    version: Option<u64>,
    repositories: &[Repository],
) -> Result<(), String> {
    if let Some(set) = owned_by_the_node(m) {
        return Err(format!(
            "`{set}` is set both here and by repository model `{name}`'s configuration; set it in its config.pbtxt"
        ));
    }
    let repo = repositories
        .iter()
        .find(|r| r.models.contains_key(name))
        .ok_or_else(|| {
            let roots: Vec<String> = repositories
                .iter()
                .map(|r| r.root.display().to_string())
                .collect();
            format!(
                "no model repository holds a model `{name}` (searched: {})",
                if roots.is_empty() {
                    "none given".to_string()
                } else {
                    roots.join(", ")
                }
            )
        })?;
    if repo.model(name).map(|l| l.kind) == Some(ModelKind::Ensemble) {
        return Err(format!(
            "repository model `{name}` is an ensemble; a graph names its steps' models as nodes of its own"
        ));
    }
    let version = served(repo, name, version).map_err(|e| e.to_string())?;
    let (into, out_of) = reshapes(name, version).map_err(|e| e.to_string())?;
    if let Some(r) = into.iter().chain(&out_of).next() {
        return Err(format!(
            "repository model `{name}`'s `{}` reshapes `{}`; inside a graph the node's tensors are the file's, so write a `reshape` node of the graph instead",
            r.field, r.tensor
        ));
    }
    let bind = |input: &str| m.inputs.get(input).map(|r| r.value.clone());
    let built = model_node(name, &m.id.value, version, bind)
        .map_err(|e| e.to_string())?
        .into_spec();
    m.path = built.path;
    m.batch = built.batch;
    m.batching = built.batching;
    m.executor = built.executor;
    m.state = built.state;
    Ok(())
}

/// The first setting a node gives that the repository model's configuration owns.
fn owned_by_the_node(m: &ModelSpec) -> Option<&'static str> {
    if !m.path.value.as_os_str().is_empty() {
        Some("path")
    } else if m.task.is_some() {
        Some("task")
    } else if !m.batch.value {
        Some("batch")
    } else if m.batching != BatchingSpec::default() {
        Some("batching")
    } else if m.executor != ExecutorSpec::default() {
        Some("executor")
    } else if m.state.is_some() {
        Some("state")
    } else {
        None
    }
}
