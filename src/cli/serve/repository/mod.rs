//! `weir serve --model-repository DIR`: the models of Triton model repositories served beside
//! the graphs, every version its policy serves as a graph of its own, with the configuration
//! Triton would report (auto-completed from the ONNX file) and Triton's statistics — and model
//! control as Triton's `--model-control-mode` gives it:
//!
//! - `none`: every model is loaded at start and the repository is not read again; loads and
//!   unloads through the API are refused.
//! - `explicit`: only the models named by `--load-model` (`*` for all) are loaded at start; the
//!   repository API (`POST /v2/repository/models/{m}/load|unload`, gRPC `RepositoryModelLoad`)
//!   loads, reloads and unloads.
//! - `poll`: every model is loaded at start, and the repositories are read again every poll
//!   interval: a model whose files changed is reloaded, a new one loaded, a removed one unloaded.
//!
//! A reload starts the new versions' graphs first, each model node warming its sessions with the
//! version's warm-up samples as it starts (`warmup.rs`), and swaps them into the model table only once all have started, so requests never see a half-loaded model; a failed reload leaves the old
//! versions serving. Old graphs are stopped (`retire.rs`) once no request holds them, or after
//! the drain timeout. One load or unload runs at a time.
//!
//! A model whose tensor names are not weir identifiers is refused naming the tensor, since a
//! request's names would have to be translated on every call.

mod poll;
mod retire;
mod warmup;

pub(super) use poll::Poller;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::ValueEnum;
use prost::Message;
use weir_connectors::models::control::{
    ControlError, IndexEntry, LoadRequest, ModelControl, ModelState, UnloadRequest,
};
use weir_connectors::models::{ModelTable, ModelVersion};
use weir_triton::{json, LoadOptions, Repository};

use crate::{RunningGraph, RuntimeOptions};
use retire::Retiring;

/// How the repositories' models are loaded and unloaded (Triton's `--model-control-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ControlMode {
    /// Everything at start, nothing after.
    None,
    /// `--load-model` at start, then the repository API.
    Explicit,
    /// Everything at start, then changes found by reading the repositories again.
    Poll,
}

impl ControlMode {
    fn name(self) -> &'static str {
        match self {
            ControlMode::None => "none",
            ControlMode::Explicit => "explicit",
            ControlMode::Poll => "poll",
        }
    }
}

/// What a repository server is started with.
pub(super) struct Settings {
    /// The repositories, in the order a model is looked for.
    pub roots: Vec<PathBuf>,
    /// The model control mode.
    pub mode: ControlMode,
    /// Models loaded at start in `explicit` mode (`*`: all).
    pub load: Vec<String>,
    /// How often `poll` mode reads the repositories.
    pub poll_interval: Duration,
    /// Longest an old version waits for the requests holding it before its graph stops.
    pub drain: Duration,
    /// The dataflow options of every graph.
    pub options: RuntimeOptions,
    /// Names of the graphs served from files (a repository model may not take one).
    pub reserved: BTreeSet<String>,
}

/// One version a model serves, or why it does not.
#[derive(Debug, Clone)]
struct VersionState {
    state: ModelState,
    reason: String,
}

/// A model of a repository as this server knows it.
#[derive(Default)]
struct Entry {
    /// Its state at the model level (versions have their own once loaded).
    state: Option<ModelState>,
    reason: String,
    versions: BTreeMap<u64, VersionState>,
    /// The graphs serving it.
    graphs: Vec<RunningGraph>,
    /// Its files as last loaded, for `poll` mode.
    fingerprint: Option<u64>,
}

/// The repositories' models, their graphs, and what loads and unloads them.
pub(super) struct Repositories {
    settings: Settings,
    table: Arc<ModelTable>,
    entries: Arc<Mutex<BTreeMap<String, Entry>>>,
    /// Held by each load and unload: one at a time.
    ops: Mutex<()>,
    retiring: Retiring,
}

/// A started version: what the table serves, and its graph.
struct Started {
    version: ModelVersion,
    graph: RunningGraph,
}

impl Repositories {
    /// Loads what `settings.mode` loads at start into `table`.
    ///
    /// # Errors
    /// When a repository root cannot be read, no model of a repository can be served (modes
    /// `none` and `poll`), or a model `--load-model` names cannot be.
    pub(super) fn start(settings: Settings, table: Arc<ModelTable>) -> Result<Arc<Repositories>> {
        let repositories = Arc::new(Repositories {
            settings,
            table,
            entries: Arc::default(),
            ops: Mutex::new(()),
            retiring: Retiring::default(),
        });
        match repositories.settings.mode {
            ControlMode::None | ControlMode::Poll => repositories.load_everything()?,
            ControlMode::Explicit => repositories.load_named()?,
        }
        Ok(repositories)
    }

    fn entries(&self) -> MutexGuard<'_, BTreeMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn ops(&self) -> MutexGuard<'_, ()> {
        self.ops.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every model of every repository, each reported on stderr when it cannot be served.
    fn load_everything(&self) -> Result<()> {
        let _op = self.ops();
        for root in &self.settings.roots {
            let repo = read(root, &LoadOptions::default())?;
            let mut served = 0;
            for name in repo.models.keys() {
                if self.served_elsewhere(name, root) {
                    continue;
                }
                match self.start_model(&repo, name) {
                    Ok(()) => served += 1,
                    Err(e) => eprintln!("{}: not serving `{name}`: {e}", root.display()),
                }
            }
            if served == 0 {
                bail!(
                    "--model-repository {}: no model could be served",
                    root.display()
                );
            }
        }
        Ok(())
    }

    /// The models `--load-model` names.
    fn load_named(&self) -> Result<()> {
        let _op = self.ops();
        let all = self.settings.load.iter().any(|n| n == "*");
        for root in &self.settings.roots {
            let repo = read(root, &LoadOptions::default())?;
            for name in repo.models.keys() {
                let wanted = all || self.settings.load.iter().any(|n| n == name);
                if wanted && !self.served_elsewhere(name, root) {
                    self.start_model(&repo, name)
                        .map_err(|e| anyhow!("--load-model {name}: {e}"))?;
                }
            }
        }
        for name in self.settings.load.iter().filter(|n| *n != "*") {
            if !self.entries().contains_key(name) {
                bail!("--load-model {name}: no such model in the model repositories");
            }
        }
        Ok(())
    }

    /// Whether `name` in `root` is shadowed: a graph file has the name, or a repository before
    /// `root` has a model of that name.
    fn served_elsewhere(&self, name: &str, root: &Path) -> bool {
        if self.settings.reserved.contains(name) {
            eprintln!(
                "{}: not serving `{name}`: a graph of that name is served",
                root.display()
            );
            return true;
        }
        self.home(name).is_some_and(|first| first != root)
    }

    /// The first repository holding a folder `name`: the one its model is served from.
    fn home(&self, name: &str) -> Option<&Path> {
        self.settings
            .roots
            .iter()
            .map(PathBuf::as_path)
            .find(|r| r.join(name).is_dir())
    }

    /// The first repository holding `name`, read with `options`.
    fn find(&self, name: &str, options: &LoadOptions) -> Result<Repository, ControlError> {
        let root = self
            .home(name)
            .ok_or_else(|| ControlError::UnknownModel(name.to_string()))?;
        read(root, options).map_err(|e| ControlError::LoadFailed {
            model: name.to_string(),
            reason: format!("{e:#}"),
        })
    }

    /// Starts every servable version of `name` from `repo` and swaps them in for what served
    /// it; a model none of whose versions starts is an error, and what served it serves on.
    fn start_model(&self, repo: &Repository, name: &str) -> Result<(), ControlError> {
        let failed = |reason: String| ControlError::LoadFailed {
            model: name.to_string(),
            reason,
        };
        if self.settings.reserved.contains(name) {
            return Err(failed("a graph of that name is served".into()));
        }
        let entry = repo
            .models
            .get(name)
            .ok_or_else(|| ControlError::UnknownModel(name.to_string()))?;
        for w in &entry.warnings {
            eprintln!("{}: model `{name}`: {w}", repo.root.display());
        }
        let fingerprint = poll::fingerprint(&repo.root.join(name));
        self.mark(name, ModelState::Loading, "");
        let model = match &entry.outcome {
            Ok(m) => m,
            Err(e) => return Err(self.load_failed(name, e.to_string(), fingerprint)),
        };
        let mut started = Vec::new();
        let mut versions = BTreeMap::new();
        for (v, outcome) in &model.versions {
            let result = outcome
                .as_ref()
                .map_err(|e| anyhow!("{e}"))
                .and_then(|served| self.start_version(repo, name, served));
            match result {
                Ok(s) => {
                    versions.insert(*v, ready());
                    started.push(s);
                }
                Err(e) => {
                    let reason = format!("{e:#}");
                    eprintln!(
                        "{}: not serving `{name}` version {v}: {reason}",
                        repo.root.display()
                    );
                    versions.insert(*v, unavailable(reason));
                }
            }
        }
        if started.is_empty() {
            let reasons: Vec<String> = versions
                .iter()
                .map(|(v, s)| format!("version {v}: {}", s.reason))
                .collect();
            let reason = if reasons.is_empty() {
                "its version policy serves no version present".to_string()
            } else {
                reasons.join("; ")
            };
            return Err(self.load_failed(name, reason, fingerprint));
        }
        let (table_versions, graphs): (Vec<ModelVersion>, Vec<RunningGraph>) =
            started.into_iter().map(|s| (s.version, s.graph)).unzip();
        for v in &table_versions {
            eprintln!("weir serving model `{name}` version {}", v.version);
        }
        let old_versions = self.table.set(name, table_versions);
        let old_graphs = {
            let mut entries = self.entries();
            let e = entries.entry(name.to_string()).or_default();
            e.state = Some(ModelState::Ready);
            e.reason.clear();
            e.versions = versions;
            e.fingerprint = fingerprint;
            std::mem::replace(&mut e.graphs, graphs)
        };
        self.retiring
            .retire(old_versions, old_graphs, self.settings.drain, None);
        Ok(())
    }

    /// Records a failed load of `name` and the error to answer: a model that was serving serves
    /// on (and says its last load failed), one that was not is unavailable.
    fn load_failed(&self, name: &str, reason: String, fingerprint: Option<u64>) -> ControlError {
        let mut entries = self.entries();
        let e = entries.entry(name.to_string()).or_default();
        e.fingerprint = fingerprint;
        if e.graphs.is_empty() {
            e.state = Some(ModelState::Unavailable);
            e.reason.clone_from(&reason);
            e.versions.clear();
        } else {
            e.state = Some(ModelState::Ready);
            e.reason = format!("the last load failed: {reason}");
        }
        ControlError::LoadFailed {
            model: name.to_string(),
            reason,
        }
    }

    fn mark(&self, name: &str, state: ModelState, reason: &str) {
        let mut entries = self.entries();
        let e = entries.entry(name.to_string()).or_default();
        e.state = Some(state);
        e.reason = reason.to_string();
    }

    fn start_version(
        &self,
        repo: &Repository,
        name: &str,
        served: &weir_triton::load::ServedVersion,
    ) -> Result<Started> {
        let graph = weir_triton::graph(repo, name, Some(served.version))?;
        let mut loaded =
            weir_runtime::plan_spec(&graph.spec, &repo.root).map_err(|d| anyhow!("{d}"))?;
        warmup::attach(&mut loaded.plan, &served.warmups)?;
        let running = crate::TopologyBuilder::new(loaded.plan)
            .options(self.settings.options)
            .build()
            .context("starting its graph")?;
        let version = ModelVersion {
            runtime: running.runtime_handle(),
            version: served.version,
            config: json::config_json(&served.config)?,
            config_proto: served.config.encode_to_vec(),
            stats: Default::default(),
            execution: Some(running.execution_stats()),
        };
        Ok(Started {
            version,
            graph: running,
        })
    }

    /// Stops serving `name`; its graphs stop once the requests holding them are answered.
    fn stop_model(&self, name: &str) {
        let old_versions = self.table.set(name, Vec::new());
        let old_graphs = {
            let mut entries = self.entries();
            let Some(e) = entries.get_mut(name) else {
                return;
            };
            e.state = Some(ModelState::Unloading);
            e.reason.clear();
            for v in e.versions.values_mut() {
                v.state = ModelState::Unloading;
            }
            std::mem::take(&mut e.graphs)
        };
        let done = (Arc::clone(&self.entries), name.to_string());
        self.retiring
            .retire(old_versions, old_graphs, self.settings.drain, Some(done));
    }

    /// The loaded ensembles whose steps use `name`.
    fn dependents(&self, name: &str) -> Vec<String> {
        self.table
            .snapshot()
            .all()
            .filter(|(_, v)| {
                v.config["ensemble_scheduling"]["step"]
                    .as_array()
                    .is_some_and(|steps| steps.iter().any(|s| s["model_name"] == name))
            })
            .map(|(n, _)| n.to_string())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    }

    /// Stops every graph, waiting for those being retired.
    pub(super) fn shutdown(&self) {
        let _op = self.ops();
        let names: Vec<String> = self.entries().keys().cloned().collect();
        for name in names {
            self.table.set(&name, Vec::new());
            let graphs = self
                .entries()
                .get_mut(&name)
                .map(|e| std::mem::take(&mut e.graphs))
                .unwrap_or_default();
            for g in graphs {
                g.shutdown();
            }
        }
        self.retiring.wait();
    }
}

fn ready() -> VersionState {
    VersionState {
        state: ModelState::Ready,
        reason: String::new(),
    }
}

fn unavailable(reason: String) -> VersionState {
    VersionState {
        state: ModelState::Unavailable,
        reason,
    }
}

/// `name` when it can be a model folder's name (no separator, not hidden, not empty): anything
/// else names no model, and is never joined to a repository's path.
fn folder_name(name: &str) -> Result<&str, ControlError> {
    let plain = !name.is_empty() && !name.starts_with('.') && !name.contains(['/', '\\', '\0']);
    if plain {
        Ok(name)
    } else {
        Err(ControlError::UnknownModel(
            weir_connectors::echo::quote(name).into_owned(),
        ))
    }
}

/// Reads the repository at `root`.
fn read(root: &Path, options: &LoadOptions) -> Result<Repository> {
    let repo = weir_triton::load(root, options)
        .with_context(|| format!("--model-repository {}", root.display()))?;
    for w in &repo.warnings {
        eprintln!("{}: {w}", root.display());
    }
    Ok(repo)
}

impl ModelControl for Repositories {
    fn index(&self, ready_only: bool) -> Vec<IndexEntry> {
        let mut names: BTreeSet<String> = BTreeSet::new();
        for root in &self.settings.roots {
            if let Ok(scan) =
                weir_triton::repository::scan(root, &weir_triton::repository::Limits::default())
            {
                names.extend(scan.models.into_iter().map(|m| m.name));
            }
        }
        let entries = self.entries();
        names.extend(entries.keys().cloned());
        let mut out = Vec::new();
        for name in names {
            let row = |version: String, state: ModelState, reason: String| IndexEntry {
                name: name.clone(),
                version,
                state,
                reason,
            };
            match entries.get(&name) {
                Some(e) if !e.versions.is_empty() => {
                    for (v, s) in &e.versions {
                        let reason = if s.reason.is_empty() {
                            e.reason.clone()
                        } else {
                            s.reason.clone()
                        };
                        out.push(row(v.to_string(), s.state, reason));
                    }
                }
                Some(e) => out.push(row(
                    String::new(),
                    e.state.unwrap_or(ModelState::Unavailable),
                    e.reason.clone(),
                )),
                None => out.push(row(
                    String::new(),
                    ModelState::Unavailable,
                    "not loaded".into(),
                )),
            }
        }
        if ready_only {
            out.retain(|e| e.state == ModelState::Ready);
        }
        out
    }

    fn load(&self, model: &str, request: LoadRequest) -> Result<(), ControlError> {
        if self.settings.mode != ControlMode::Explicit {
            return Err(ControlError::NotAllowed(self.settings.mode.name()));
        }
        folder_name(model)?;
        let _op = self.ops();
        let mut options = LoadOptions::default();
        if let Some(config) = request.config {
            options.config_overrides.insert(model.to_string(), config);
        }
        let repo = self.find(model, &options)?;
        self.start_model(&repo, model)
    }

    fn unload(&self, model: &str, request: UnloadRequest) -> Result<(), ControlError> {
        if self.settings.mode != ControlMode::Explicit {
            return Err(ControlError::NotAllowed(self.settings.mode.name()));
        }
        folder_name(model)?;
        let _op = self.ops();
        let known = self.entries().contains_key(model) || self.home(model).is_some();
        if !known {
            return Err(ControlError::UnknownModel(model.to_string()));
        }
        if request.unload_dependents {
            for dependent in self.dependents(model) {
                self.stop_model(&dependent);
            }
        }
        self.stop_model(model);
        Ok(())
    }
}
