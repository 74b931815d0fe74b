//! Reading and planning a graph: YAML text → spec → validated graph → plan.
//!
//! A caller that rewrites the spec before it is validated (model-less serving resolves `task:`
//! nodes to a variant's file) passes the rewrite to [`load_graph_resolving`], so its findings are
//! located in the same file and reported with the same snippets as validation's.

use std::path::Path;
use std::sync::Arc;

use weir_engine::diagnostic::{Diagnostics, SourceText};
use weir_engine::paths::FileRules;
use weir_engine::plan::Plan;
use weir_engine::spec::{GraphSpec, SpecError};

/// A graph read, validated and planned, with the warnings validation raised.
#[derive(Debug, Clone)]
pub struct LoadedGraph {
    /// The plan to run.
    pub plan: Plan,
    /// Findings that do not stop the graph.
    pub warnings: Diagnostics,
}

/// Errors loading a graph.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read (missing, not a regular file, over the size cap).
    #[error("{source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: weir_engine::paths::FileError,
    },
    /// The spec is invalid; the diagnostics render with YAML snippets.
    #[error("{0}")]
    Invalid(Diagnostics),
}

/// Reads, validates and plans the YAML graph at `path`. Model paths resolve against its folder.
///
/// # Errors
/// [`LoadError::Invalid`] with every problem found, located in the file.
pub fn load_graph(path: &Path) -> Result<LoadedGraph, LoadError> {
    load_graph_under(path, &FileRules::default())
}

/// As [`load_graph`], with every file the graph names read within `files` (a path root, size
/// caps). The graph file itself is the caller's and need not be under the root.
///
/// # Errors
/// As [`load_graph`].
pub fn load_graph_under(path: &Path, files: &FileRules) -> Result<LoadedGraph, LoadError> {
    load_graph_resolving(path, files, |_| Ok(()))
}

/// As [`load_graph_under`], with `resolve` rewriting the spec before it is validated; its
/// diagnostics are located in the graph file like validation's.
///
/// # Errors
/// As [`load_graph`], and what `resolve` finds.
pub fn load_graph_resolving(
    path: &Path,
    files: &FileRules,
    resolve: impl FnOnce(&mut GraphSpec) -> Result<(), Diagnostics>,
) -> Result<LoadedGraph, LoadError> {
    let text = weir_engine::paths::read_text(path, &FileRules::default()).map_err(|source| {
        LoadError::Read {
            path: path.display().to_string(),
            source,
        }
    })?;
    let name = path.display().to_string();
    let source = SourceText {
        name: name.clone(),
        text: Arc::from(text.as_str()),
    };
    let located = |mut d: Diagnostics| {
        d.source = Some(source.clone());
        LoadError::Invalid(d)
    };
    let mut spec = GraphSpec::from_yaml(&text, &name).map_err(|e| match e {
        SpecError::Invalid(d) => LoadError::Invalid(d),
        SpecError::Read { path, source } => LoadError::Read { path, source },
    })?;
    resolve(&mut spec).map_err(located)?;
    let base = path.parent().unwrap_or(Path::new("."));
    let mut graph = plan_spec_under(&spec, base, files).map_err(located)?;
    graph.warnings.source = Some(source);
    Ok(graph)
}

/// Validates and plans a spec (from the builder API, say), resolving model paths against `base_dir`.
///
/// # Errors
/// Every problem found, as [`Diagnostics`].
pub fn plan_spec(spec: &GraphSpec, base_dir: &Path) -> Result<LoadedGraph, Diagnostics> {
    plan_spec_under(spec, base_dir, &FileRules::default())
}

/// As [`plan_spec`], with every file the graph names read within `files`.
///
/// # Errors
/// Every problem found, as [`Diagnostics`].
pub fn plan_spec_under(
    spec: &GraphSpec,
    base_dir: &Path,
    files: &FileRules,
) -> Result<LoadedGraph, Diagnostics> {
    let valid = weir_engine::validate::validate_under(spec, base_dir, files)?;
    let warnings = Diagnostics {
        items: valid.warnings.clone(),
        source: None,
    };
    let mut plan = weir_engine::plan::plan(&valid);
    crate::warmup_file::read_warmup_files(&mut plan, spec, files)?;
    Ok(LoadedGraph { plan, warnings })
}
