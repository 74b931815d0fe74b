//! Loading a repository: the scan, then per model its configuration (parsed, field policy,
//! backend fields, value rules, version policy), then per served version the ONNX file
//! (auto-complete, the check against the file, Triton's defaults, warm-up samples), and last the
//! ensembles, which need the models their steps name.
//!
//! Every failure stays with the model, or the version, it belongs to: the result holds one
//! outcome per model folder and, inside a loaded model, one per served version, as Triton keeps
//! one state per version. Warnings (a folder ignored, a listed version without a folder) are
//! collected, not logged, for the caller to log at WARN.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use weir_engine::onnx::{read_metadata_under, ModelMetadata};
use weir_engine::paths::{read_capped, resolve_input, FileError, FileRules};

use crate::autocomplete::{self, ModelKind, DEFAULT_MAX_BATCH_SIZE, ONNX_FILENAME};
use crate::ensemble;
use crate::error::{EnsembleError, LoadError, ModelError, RepositoryError};
use crate::normalize::{normalize, version_policy_default};
use crate::pbtxt;
use crate::proto::inference::model_config::SchedulingChoice;
use crate::proto::inference::ModelConfig;
use crate::repository::{self, Limits, ModelDir, CONFIG_FILE};
use crate::signature;
use crate::validate;
use crate::version_policy::served_versions;
use crate::warmup::{self, Warmup};

/// How a repository is loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadOptions {
    /// Fill what a configuration leaves out from the ONNX file (Triton's default; off is
    /// Triton's `--disable-auto-complete-config`: every model then needs a complete
    /// `config.pbtxt`).
    pub autocomplete: bool,
    /// The `max_batch_size` auto-complete gives a model that can batch (Triton's
    /// `--backend-config=onnxruntime,default-max-batch-size=N`, 4 by default).
    pub default_max_batch_size: i32,
    /// Bounds on what is read.
    pub limits: Limits,
    /// Configurations given as JSON by model name, used instead of the model's `config.pbtxt`
    /// (Triton's `config` parameter of a load request).
    pub config_overrides: BTreeMap<String, String>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            autocomplete: true,
            default_max_batch_size: DEFAULT_MAX_BATCH_SIZE,
            limits: Limits::default(),
            config_overrides: BTreeMap::new(),
        }
    }
}

/// A loaded repository: every model folder's outcome.
#[derive(Debug)]
pub struct Repository {
    /// The root (canonical).
    pub root: PathBuf,
    /// Each model folder by name.
    pub models: BTreeMap<String, ModelEntry>,
    /// Root entries skipped, to log as warnings.
    pub warnings: Vec<String>,
}

/// One model folder's outcome.
#[derive(Debug)]
pub struct ModelEntry {
    /// The model, or why it cannot be served at all.
    pub outcome: Result<LoadedModel, ModelError>,
    /// Things ignored on the way, to log as warnings.
    pub warnings: Vec<String>,
}

/// A model whose configuration loaded.
#[derive(Debug)]
pub struct LoadedModel {
    /// Its name.
    pub name: String,
    /// Its folder (canonical).
    pub dir: PathBuf,
    /// What serves it.
    pub kind: ModelKind,
    /// Each version the policy serves, or why it cannot be.
    pub versions: BTreeMap<u64, Result<ServedVersion, ModelError>>,
}

/// One served version: its effective configuration and what it runs.
#[derive(Debug, Clone)]
pub struct ServedVersion {
    /// The version.
    pub version: u64,
    /// The effective configuration (auto-completed and normalised as Triton's `/config` shows it).
    pub config: ModelConfig,
    /// The ONNX file (resolved), for an ONNX model.
    pub model_file: Option<PathBuf>,
    /// The ONNX file's signature, for an ONNX model.
    pub signature: Option<ModelMetadata>,
    /// Warm-up samples to run before the version is ready.
    pub warmups: Vec<Warmup>,
    /// An ensemble's steps in the order they run: (step position, model, version).
    pub steps: Vec<(usize, String, u64)>,
}

/// How long a request may wait in the queue of a version with dynamic batching
/// (`dynamic_batching.default_queue_policy`): weir's graph spec has no per-model request
/// deadline, so the protocol layer applies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueTimeout {
    /// `default_timeout_microseconds`: a request still queued after this long is refused.
    pub default_us: u64,
    /// `allow_timeout_override`: a request's own `timeout` parameter may replace it.
    pub allow_override: bool,
}

impl ServedVersion {
    /// The queue timeout the configuration sets, if any (0 means none, as in Triton).
    pub fn queue_timeout(&self) -> Option<QueueTimeout> {
        match &self.config.scheduling_choice {
            Some(SchedulingChoice::DynamicBatching(db)) => db
                .default_queue_policy
                .as_ref()
                .filter(|p| p.default_timeout_microseconds > 0)
                .map(|p| QueueTimeout {
                    default_us: p.default_timeout_microseconds,
                    allow_override: p.allow_timeout_override,
                }),
            _ => None,
        }
    }
}

impl LoadedModel {
    /// The highest version that loaded.
    pub fn latest(&self) -> Option<&ServedVersion> {
        self.versions.values().rev().find_map(|v| v.as_ref().ok())
    }
}

impl Repository {
    /// A loaded model by name.
    pub fn model(&self, name: &str) -> Option<&LoadedModel> {
        self.models.get(name).and_then(|e| e.outcome.as_ref().ok())
    }

    /// Every (model, version) that can be served.
    pub fn served(&self) -> impl Iterator<Item = (&str, &ServedVersion)> {
        self.models.iter().flat_map(|(name, entry)| {
            entry
                .outcome
                .iter()
                .flat_map(|m| m.versions.values().filter_map(|v| v.as_ref().ok()))
                .map(move |v| (name.as_str(), v))
        })
    }
}

/// Loads the repository at `root`.
///
/// # Errors
/// [`RepositoryError`] only when the root itself cannot be read; every model's own failure is in
/// its [`ModelEntry`].
pub fn load(root: &Path, options: &LoadOptions) -> Result<Repository, RepositoryError> {
    let scan = repository::scan(root, &options.limits)?;
    let rules = FileRules {
        root: Some(scan.root.clone()),
        max_model_bytes: options.limits.max_model_bytes,
    };
    let mut models = BTreeMap::new();
    let mut ensembles = Vec::new();
    for scanned in scan.models {
        let name = scanned.name;
        let mut warnings = scanned.warnings;
        let prepared = scanned.outcome.and_then(|dir| {
            prepare(&scan.root, &name, dir, options, &mut warnings)
                .map_err(|kind| ModelError::model(&name, kind))
        });
        match prepared {
            Err(e) => {
                models.insert(
                    name,
                    ModelEntry {
                        outcome: Err(e),
                        warnings,
                    },
                );
            }
            Ok(p) if p.kind == ModelKind::Ensemble => ensembles.push((name, p, warnings)),
            Ok(p) => {
                let outcome = Ok(load_onnx(&scan.root, &name, p, options, &rules));
                models.insert(name, ModelEntry { outcome, warnings });
            }
        }
    }
    let pending: BTreeSet<String> = ensembles.iter().map(|(n, _, _)| n.clone()).collect();
    let mut loaded = Vec::new();
    for (name, p, warnings) in ensembles {
        let model = load_ensemble(&name, p, &models, &pending);
        loaded.push((
            name,
            ModelEntry {
                outcome: Ok(model),
                warnings,
            },
        ));
    }
    models.extend(loaded);
    Ok(Repository {
        root: scan.root,
        models,
        warnings: scan.warnings,
    })
}

/// A model's configuration, checked, with the versions to serve.
struct Prepared {
    dir: PathBuf,
    kind: ModelKind,
    config: ModelConfig,
    versions: BTreeMap<u64, Result<PathBuf, String>>,
}

fn prepare(
    root: &Path,
    name: &str,
    dir: ModelDir,
    options: &LoadOptions,
    warnings: &mut Vec<String>,
) -> Result<Prepared, LoadError> {
    let shown = format!("{name}/{CONFIG_FILE}");
    let mut config = match (options.config_overrides.get(name), &dir.config) {
        (Some(json), _) => {
            let what = format!("{name}: the `config` parameter");
            if json.len() as u64 > options.limits.max_config_bytes {
                return Err(LoadError::invalid(
                    what,
                    format!(
                        "{} bytes, more than the {} a configuration may have",
                        json.len(),
                        options.limits.max_config_bytes
                    ),
                ));
            }
            pbtxt::parse_json(json, &what)?.config
        }
        (None, Some(path)) => {
            let bytes = read_capped(
                path,
                options.limits.max_config_bytes,
                &FileRules::under(root)?,
            )?;
            let text = String::from_utf8(bytes).map_err(|_| FileError::NotText {
                path: shown.clone(),
            })?;
            pbtxt::parse(&text, &shown)?.config
        }
        (None, None) if options.autocomplete => ModelConfig::default(),
        (None, None) => {
            return Err(LoadError::invalid(
                CONFIG_FILE,
                "missing, and auto-complete is off: every model needs a complete configuration",
            ))
        }
    };
    // Triton looks for `model.onnx` in the first version folder; one that cannot be used is the
    // reason when nothing else names the backend.
    let first = dir.versions.iter().next();
    let first_ok = first
        .and_then(|(_, f)| f.as_ref().ok())
        .map(PathBuf::as_path);
    let kind = autocomplete::backend_fields(&mut config, name, first_ok).map_err(|e| match first {
        Some((v, Err(reason))) if matches!(&e, LoadError::Invalid { field, .. } if field == "platform") => {
            LoadError::invalid(format!("version folder {v}"), reason.clone())
        }
        _ => e,
    })?;
    validate::check_model(&config, kind)?;
    version_policy_default(&mut config);
    let present: BTreeSet<u64> = dir.versions.keys().copied().collect();
    let policy = config.version_policy.clone().unwrap_or_default();
    let (served, notes) = served_versions(&policy, &present)?;
    warnings.extend(notes);
    let versions = dir
        .versions
        .into_iter()
        .filter(|(v, _)| served.contains(v))
        .collect();
    Ok(Prepared {
        dir: dir.dir,
        kind,
        config,
        versions,
    })
}

fn load_onnx(
    root: &Path,
    name: &str,
    p: Prepared,
    options: &LoadOptions,
    rules: &FileRules,
) -> LoadedModel {
    let versions = p
        .versions
        .iter()
        .map(|(&v, folder)| {
            let served = folder
                .as_ref()
                .map_err(|reason| LoadError::invalid(format!("version folder {v}"), reason.clone()))
                .and_then(|folder| onnx_version(root, v, folder, &p, options, rules))
                .map_err(|kind| ModelError::version(name, v, kind));
            (v, served)
        })
        .collect();
    LoadedModel {
        name: name.to_string(),
        dir: p.dir,
        kind: ModelKind::Onnx,
        versions,
    }
}

fn onnx_version(
    root: &Path,
    version: u64,
    folder: &Path,
    p: &Prepared,
    options: &LoadOptions,
    rules: &FileRules,
) -> Result<ServedVersion, LoadError> {
    let mut config = p.config.clone();
    let mut path = folder.join(&config.default_model_filename);
    if path.is_dir() {
        // Triton's ONNX Runtime backend reads a folder named like the file as the model's
        // folder (a model with external data): its `model.onnx` is the model.
        path = path.join(ONNX_FILENAME);
    }
    let shown = path
        .strip_prefix(root)
        .unwrap_or(&path)
        .display()
        .to_string();
    let resolved = resolve_input(&path, rules)?;
    let meta = read_metadata_under(&resolved, rules)?;
    if options.autocomplete {
        autocomplete::complete_io(&mut config, &meta, options.default_max_batch_size, &shown)?;
    }
    validate::check_io(&config)?;
    signature::check(&config, &meta, &shown)?;
    normalize(&mut config, ModelKind::Onnx);
    let warmups = warmup::warmups(&config, &p.dir)?;
    Ok(ServedVersion {
        version,
        config,
        model_file: Some(resolved),
        signature: Some(meta),
        warmups,
        steps: Vec::new(),
    })
}

fn load_ensemble(
    name: &str,
    p: Prepared,
    models: &BTreeMap<String, ModelEntry>,
    ensembles: &BTreeSet<String>,
) -> LoadedModel {
    let versions = p
        .versions
        .iter()
        .map(|(&v, folder)| {
            let served = folder
                .as_ref()
                .map_err(|reason| LoadError::invalid(format!("version folder {v}"), reason.clone()))
                .and_then(|_| ensemble_version(v, &p.config, models, ensembles))
                .map_err(|kind| ModelError::version(name, v, kind));
            (v, served)
        })
        .collect();
    LoadedModel {
        name: name.to_string(),
        dir: p.dir,
        kind: ModelKind::Ensemble,
        versions,
    }
}

fn ensemble_version(
    version: u64,
    config: &ModelConfig,
    models: &BTreeMap<String, ModelEntry>,
    ensembles: &BTreeSet<String>,
) -> Result<ServedVersion, LoadError> {
    let mut config = config.clone();
    validate::check_io(&config)?;
    let order = ensemble::order(&config)?;
    let steps = ensemble::steps(&config);
    let mut resolved = Vec::with_capacity(steps.len());
    for (i, step) in steps.iter().enumerate() {
        let missing = |reason: String| -> LoadError {
            EnsembleError::MissingModel {
                step: i,
                model: step.model_name.clone(),
                reason,
            }
            .into()
        };
        if ensembles.contains(&step.model_name) {
            return Err(LoadError::unsupported(
                format!("ensemble_scheduling.step[{i}].model_name"),
                format!(
                    "`{}` is an ensemble: nested ensembles are not supported yet",
                    step.model_name
                ),
            ));
        }
        let model = match models.get(&step.model_name).map(|e| &e.outcome) {
            None => return Err(missing("is not in the repository".into())),
            Some(Err(e)) => return Err(missing(format!("failed to load ({e})"))),
            Some(Ok(m)) => m,
        };
        let served = if step.model_version == -1 {
            model
                .latest()
                .ok_or_else(|| missing("has no version that loaded".into()))?
        } else {
            let wanted = u64::try_from(step.model_version).map_err(|_| {
                LoadError::invalid(
                    format!("ensemble_scheduling.step[{i}].model_version"),
                    format!(
                        "{} is neither -1 (latest) nor a version",
                        step.model_version
                    ),
                )
            })?;
            match model.versions.get(&wanted) {
                None if wanted == 0 => {
                    return Err(missing(
                        "does not serve version 0 (model_version left out is 0; -1 is the latest version)".into(),
                    ))
                }
                None => return Err(missing(format!("does not serve version {wanted}"))),
                Some(Err(e)) => return Err(missing(format!("failed to load version {wanted} ({e})"))),
                Some(Ok(s)) => s,
            }
        };
        resolved.push((step.model_name.clone(), served));
    }
    let configs: Vec<&ModelConfig> = resolved.iter().map(|(_, s)| &s.config).collect();
    ensemble::check_steps(&config, &configs)?;
    normalize(&mut config, ModelKind::Ensemble);
    Ok(ServedVersion {
        version,
        config,
        model_file: None,
        signature: None,
        warmups: Vec::new(),
        steps: order
            .into_iter()
            .map(|i| (i, resolved[i].0.clone(), resolved[i].1.version))
            .collect(),
    })
}
