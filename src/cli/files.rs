//! The flags every command that loads graphs shares: where the files a graph names may be and how
//! large (`--path-root`, `--max-model-bytes`), and loading a graph under them.

use std::path::{Path, PathBuf};

use crate::{load_graph_under, LoadError};
use anyhow::{anyhow, Context, Result};
use clap::Args;

/// Where the files a graph names may be, and how large.
#[derive(Debug, Clone, Args)]
pub(super) struct FileArgs {
    /// Every file a graph names (models, profiles, stream inputs and outputs) must resolve, symlinks
    /// followed, to a path under this folder (default: no such root).
    #[arg(long, env = "WEIR_PATH_ROOT")]
    path_root: Option<PathBuf>,
    /// Largest model file a graph may name, in bytes.
    #[arg(long, default_value_t = crate::FileRules::default().max_model_bytes, env = "WEIR_MAX_MODEL_BYTES")]
    max_model_bytes: u64,
}

impl FileArgs {
    pub(super) fn rules(&self) -> Result<crate::FileRules> {
        let rules = match &self.path_root {
            Some(root) => crate::FileRules::under(root).context("--path-root")?,
            None => crate::FileRules::default(),
        };
        Ok(crate::FileRules {
            max_model_bytes: self.max_model_bytes,
            ..rules
        })
    }
}

/// Loads, validates and plans the graph at `path` under `files`' rules, its diagnostics as the
/// error's text.
pub(super) fn load(path: &Path, files: &FileArgs) -> Result<crate::LoadedGraph> {
    load_graph_under(path, &files.rules()?).map_err(load_error)
}

/// As [`load`], its task nodes resolved from the model-less repository at `repository` and its
/// `repository:` nodes from the Triton model repositories at `model_repositories`.
pub(super) fn load_with(
    path: &Path,
    files: &FileArgs,
    repository: Option<&Path>,
    model_repositories: &[PathBuf],
) -> Result<crate::LoadedGraph> {
    weir_runtime::load_graph_resolving(path, &files.rules()?, |spec| {
        weir_modelless::task_nodes::resolve(spec, repository)?;
        weir_triton::graph_nodes::resolve_from(
            spec,
            model_repositories,
            &weir_triton::LoadOptions::default(),
        )
    })
    .map_err(load_error)
}

/// A graph that did not load, as an error whose text is its diagnostics (each with its YAML
/// location) when it was invalid.
pub(super) fn load_error(e: LoadError) -> anyhow::Error {
    match e {
        LoadError::Invalid(d) => anyhow!("{d}"),
        other => anyhow!(other),
    }
}
