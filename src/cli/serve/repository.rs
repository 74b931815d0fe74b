//! `weir serve --model-repository DIR`: each model of a Triton model repository served beside
//! the graphs, every version its policy serves as a graph of its own, with the configuration
//! Triton would report (auto-completed from the ONNX file) and Triton's statistics.
//!
//! Models are loaded once at start (Triton's `--model-control-mode none`): a model or version
//! that cannot be served is reported on stderr with why, and the others are served. A model whose
//! tensor names are not weir identifiers is refused naming the tensor, since a request's names
//! would have to be translated on every call.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use prost::Message;
use weir_connectors::models::ModelVersion;
use weir_triton::{json, LoadOptions, Repository};

use super::{runtime_options, ServeArgs};
use crate::RunningGraph;

/// One started version of a repository model.
struct StartedVersion {
    /// The model's name (the repository folder's).
    name: String,
    /// What it serves, for the shared model table.
    version: ModelVersion,
    /// The running graph, to stop at the end.
    graph: RunningGraph,
}

/// The repositories' models as started: their versions for the model table, and their graphs.
pub(super) struct Started {
    /// (model name, version), for the model table.
    pub versions: Vec<(String, ModelVersion)>,
    /// The graphs, to stop at the end.
    pub graphs: Vec<RunningGraph>,
}

/// Starts every servable version of every model in `args`' repositories.
///
/// # Errors
/// When a repository root cannot be read, no model of a repository can be served, or a model's
/// name is that of a graph served too.
pub(super) fn start(args: &ServeArgs, graphs: &[RunningGraph]) -> Result<Started> {
    let mut started: Vec<StartedVersion> = Vec::new();
    for root in &args.model_repositories {
        let repo = weir_triton::load(root, &LoadOptions::default())
            .with_context(|| format!("--model-repository {}", root.display()))?;
        for w in &repo.warnings {
            eprintln!("{}: {w}", root.display());
        }
        let before = started.len();
        for (name, entry) in &repo.models {
            for w in &entry.warnings {
                eprintln!("{}: model `{name}`: {w}", root.display());
            }
            let model = match &entry.outcome {
                Ok(m) => m,
                Err(e) => {
                    eprintln!("{}: not serving `{name}`: {e}", root.display());
                    continue;
                }
            };
            if graphs.iter().any(|g| g.runtime().plan().name == *name)
                || started.iter().any(|s| s.name == *name)
            {
                bail!(
                    "model `{name}` of {} has the name of a model served too",
                    root.display()
                );
            }
            for (v, outcome) in &model.versions {
                let result = outcome
                    .as_ref()
                    .map_err(|e| anyhow::anyhow!("{e}"))
                    .and_then(|served| start_version(args, &repo, root, name, served));
                match result {
                    Ok(s) => started.push(s),
                    Err(e) => eprintln!(
                        "{}: not serving `{name}` version {v}: {e:#}",
                        root.display()
                    ),
                }
            }
        }
        if started.len() == before {
            bail!(
                "--model-repository {}: no model could be served",
                root.display()
            );
        }
    }
    let mut out = Started {
        versions: Vec::new(),
        graphs: Vec::new(),
    };
    for s in started {
        eprintln!(
            "weir serving model `{}` version {}",
            s.name, s.version.version
        );
        out.versions.push((s.name, s.version));
        out.graphs.push(s.graph);
    }
    Ok(out)
}

fn start_version(
    args: &ServeArgs,
    repo: &Repository,
    root: &Path,
    name: &str,
    served: &weir_triton::ServedVersion,
) -> Result<StartedVersion> {
    let graph = weir_triton::graph(repo, name, Some(served.version))?;
    if let Some((triton, weir)) = graph.inputs.iter().find(|(t, w)| t != w) {
        bail!("input `{triton}` is not a name weir serves as it is (it would be `{weir}`)");
    }
    let base: PathBuf = root.to_path_buf();
    let loaded = weir_runtime::plan_spec(&graph.spec, &base).map_err(|d| anyhow::anyhow!("{d}"))?;
    let running = crate::TopologyBuilder::new(loaded.plan)
        .options(runtime_options(args))
        .build()
        .context("starting its graph")?;
    let config = json::config_json(&served.config)?;
    let version = ModelVersion {
        runtime: running.runtime_handle(),
        version: served.version,
        config,
        config_proto: served.config.encode_to_vec(),
        stats: Default::default(),
        execution: Some(running.execution_stats()),
    };
    Ok(StartedVersion {
        name: name.to_string(),
        version,
        graph: running,
    })
}
