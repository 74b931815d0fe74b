//! Registering a model for model-less serving ("INFaaS: Automated Model-less Inference
//! Serving", §3.3): the model is checked against its task, its variants are generated (precision
//! × graph level × threads × fixed batch × hardware type), each is profiled and scored on the
//! validation set, and the model is added to the repository — all or nothing.
//!
//! The files are made in a hidden staging folder of the repository and renamed into place only
//! when every variant is profiled; the model then appears when its metadata is written
//! (atomically), so a reader never sees a half-registered model and a failed registration
//! leaves nothing behind. Progress is reported through [`Progress`], so the command line can
//! draw a bar and a library caller can stay silent.

mod files;
pub mod hardware;
mod profiler;

use std::path::{Path, PathBuf};

use weir_engine::spec::Device;
use weir_infaas::repository::generate::{variant_name, Build, Grid};
use weir_infaas::repository::layout::{
    check_name, model_file, sha256_file, REGISTERED_FILE, VERSION_DIR,
};
use weir_infaas::repository::profile::measure;
use weir_infaas::repository::validation::{ValidationError, ValidationSet};
use weir_infaas::repository::{ModelEntry, RepoError, Repository, Signature};
use weir_infaas::variant::{GraphLevel, Precision, Variant};

pub use hardware::HardwareType;
pub use profiler::cuda_available;

/// Why a model could not be registered. Nothing of it is left in the repository.
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    /// A setting of the registration is out of its range.
    #[error("{setting}: {message}")]
    Setting {
        /// The setting (`threads`, `levels`, `batches`, `int8`).
        setting: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// An ONNX file cannot be registered as it is.
    #[error("{file}: {message}")]
    Model {
        /// The file.
        file: String,
        /// Why.
        message: String,
    },
    /// The hardware file is refused.
    #[error("{file}: {message}")]
    Hardware {
        /// The file.
        file: String,
        /// Why, naming the field.
        message: String,
    },
    /// No hardware type is left to profile on.
    #[error("no hardware type left to profile on")]
    NoHardware,
    /// A model of that name is registered already.
    #[error("model `{0}` is already registered; `weir model remove {0}` first")]
    AlreadyRegistered(String),
    /// The int8 build could not be made.
    #[error("int8: {0}")]
    Quantize(String),
    /// A variant could not be profiled.
    #[error("profiling {variant}: {message}")]
    Profile {
        /// The variant.
        variant: String,
        /// Why.
        message: String,
    },
    /// A variant's name would be too long.
    #[error(
        "variant names of `{0}` would exceed 64 characters; use a shorter model or hardware name"
    )]
    NameTooLong(String),
    /// The validation set cannot be used.
    #[error(transparent)]
    Validation(#[from] ValidationError),
    /// The repository refused (its names, its task's signature, its files).
    #[error(transparent)]
    Repository(#[from] RepoError),
    /// The staging folder could not be made or moved.
    #[error("{path}: {source}")]
    Io {
        /// The folder.
        path: String,
        /// The operating system's reason.
        source: std::io::Error,
    },
}

/// Where a registration's int8 build comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Int8 {
    /// A file made elsewhere (its signature must be the model's).
    Given(PathBuf),
    /// Made here by ONNX Runtime's `quantize_dynamic` (`scripts/quantize.py`).
    Quantize,
    /// No int8 variants.
    None,
}

/// One model to register.
#[derive(Debug, Clone)]
pub struct Registration {
    /// The model's name (its folder in the repository).
    pub name: String,
    /// The task it serves; every model of a task has the same inputs and outputs.
    pub task: String,
    /// The ONNX file (a dynamic batch dimension first on every tensor).
    pub onnx: PathBuf,
    /// The validation set (JSON lines: `{"inputs": {"x": [..]}, "label": 3}`).
    pub validation: PathBuf,
    /// The repository folder.
    pub repository: PathBuf,
    /// The executor types ([`hardware`]); `None`: one `local` type at 1.0/s.
    pub hardware: Option<PathBuf>,
    /// Where the int8 build comes from.
    pub int8: Int8,
    /// Intra-op thread counts.
    pub threads: Vec<u32>,
    /// Graph-optimisation level names (disabled, basic, extended, all).
    pub levels: Vec<String>,
    /// Fixed batch sizes (the dynamic-batch build is always made).
    pub batches: Vec<u32>,
    /// Timed calls per batch size (the median is kept).
    pub runs: usize,
}

/// What a registration reports while it profiles.
pub trait Progress {
    /// Profiling starts: `total` variants for `model`.
    fn begin(&self, model: &str, total: usize);
    /// The variant `name` is being profiled.
    fn profiling(&self, name: &str);
    /// A variant is done.
    fn profiled(&self);
    /// Every variant is done.
    fn end(&self);
}

/// A [`Progress`] that reports nothing.
pub struct Silent;

impl Progress for Silent {
    fn begin(&self, _: &str, _: usize) {}
    fn profiling(&self, _: &str) {}
    fn profiled(&self) {}
    fn end(&self) {}
}

impl Registration {
    /// The variant grid its settings ask for.
    fn grid(&self) -> Result<Grid, RegisterError> {
        let setting = |setting, message: &str| RegisterError::Setting {
            setting,
            message: message.to_string(),
        };
        let mut levels = self
            .levels
            .iter()
            .map(|l| {
                GraphLevel::parse(l).ok_or_else(|| {
                    setting(
                        "levels",
                        &format!("`{l}` is not disabled, basic, extended or all"),
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if self.threads.is_empty() || self.threads.iter().any(|t| *t == 0 || *t > 256) {
            return Err(setting("threads", "each count must be in 1..=256"));
        }
        if self.batches.iter().any(|b| *b == 0 || *b > 4096) {
            return Err(setting("batches", "each size must be in 1..=4096"));
        }
        if cfg!(not(feature = "variant-rewrite")) && !self.batches.is_empty() {
            return Err(setting("batches", "fixed-batch files need weir built with the `variant-rewrite` feature (this is a serve-only build); give none for the dynamic-batch file alone"));
        }
        if levels.is_empty() {
            return Err(setting("levels", "give at least one"));
        }
        let unique = |mut v: Vec<u32>| {
            v.sort_unstable();
            v.dedup();
            v
        };
        levels.sort();
        levels.dedup();
        let mut precisions = vec![Precision::Fp32];
        if self.int8 != Int8::None {
            precisions.push(Precision::Int8);
        }
        Ok(Grid {
            threads: unique(self.threads.clone()),
            levels,
            batches: unique(self.batches.clone()),
            precisions,
        })
    }

    /// The hardware types to profile on: those of the hardware file (or `local`), CUDA ones
    /// dropped where the library has no CUDA provider.
    fn hardware_types(&self) -> Result<Vec<HardwareType>, RegisterError> {
        let types = match &self.hardware {
            Some(f) => hardware::read(f)?,
            None => hardware::local(),
        };
        let cuda = cuda_available();
        let (kept, dropped): (Vec<_>, Vec<_>) = types
            .into_iter()
            .partition(|t| t.device == Device::Cpu || cuda);
        for t in &dropped {
            tracing::warn!(hardware = %t.name, "Hardware type skipped: this ONNX Runtime library has no CUDA execution provider.");
        }
        if kept.is_empty() {
            return Err(RegisterError::NoHardware);
        }
        Ok(kept)
    }
}

/// Registers the model `r` describes, returning its entry.
///
/// # Errors
/// When a setting, the model, its task, the validation set or the hardware file is refused, or
/// a variant cannot be built or profiled; the repository is then as it was.
pub fn register(r: &Registration, progress: &dyn Progress) -> Result<ModelEntry, RegisterError> {
    check_name("model", &r.name)?;
    check_name("task", &r.task)?;
    let grid = r.grid()?;
    let hardware = r.hardware_types()?;
    let mut repo = Repository::open_or_create(&r.repository)?;
    if repo.model(&r.name).is_some() {
        return Err(RegisterError::AlreadyRegistered(r.name.clone()));
    }
    let signature = files::signature_of(&r.onnx)?;
    repo.check_task(&r.name, &r.task, &signature)?;
    let set = ValidationSet::read(&r.validation, &signature)?;
    let builds = grid.builds();
    let stage = files::staging(&repo, &r.name)?;
    let profiled = build_and_profile(
        r, &grid, &hardware, &signature, &set, &builds, &stage, progress,
    );
    let variants = match profiled {
        Ok(v) => v,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&stage);
            return Err(e);
        }
    };
    let entry = ModelEntry {
        name: r.name.clone(),
        task: r.task.clone(),
        registered: model_file(&r.name, REGISTERED_FILE),
        signature,
        validation_examples: set.len() as u64,
        variants,
    };
    let dir = repo.model_dir(&r.name)?;
    if let Err(e) = place(&mut repo, &entry, &stage, &dir) {
        let _ = std::fs::remove_dir_all(&stage);
        if repo.model(&r.name).is_none() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        return Err(e);
    }
    Ok(entry)
}

/// Moves the staged files to the model's folder and writes its metadata.
fn place(
    repo: &mut Repository,
    entry: &ModelEntry,
    stage: &Path,
    dir: &Path,
) -> Result<(), RegisterError> {
    entry.check(&entry.name, &entry.name)?;
    let io = |e: std::io::Error| RegisterError::Io {
        path: dir.display().to_string(),
        source: e,
    };
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(io)?;
    }
    std::fs::rename(stage, dir).map_err(io)?;
    repo.insert(entry.clone())?;
    Ok(())
}

#[allow(clippy::too_many_arguments)] // one registration's parts, each built by a step above
fn build_and_profile(
    r: &Registration,
    grid: &Grid,
    hardware: &[HardwareType],
    signature: &Signature,
    set: &ValidationSet,
    builds: &[Build],
    stage: &Path,
    progress: &dyn Progress,
) -> Result<Vec<Variant>, RegisterError> {
    let version = stage.join(VERSION_DIR);
    files::write_builds(r, signature, builds, &version)?;
    let names: Vec<String> = hardware.iter().map(|h| h.name.clone()).collect();
    let total = builds.len() * builds.first().map_or(0, |b| grid.configs(*b, &names).len());
    progress.begin(&r.name, total);
    let mut variants = Vec::with_capacity(total);
    for build in builds {
        let path = version.join(build.file_name());
        let sha256 = sha256_file(&path)?;
        for hw in hardware {
            let loader = profiler::OrtLoader::new(signature, hw.device).map_err(|e| {
                RegisterError::Profile {
                    variant: r.name.clone(),
                    message: e.to_string(),
                }
            })?;
            for config in grid.configs(*build, std::slice::from_ref(&hw.name)) {
                let name = variant_name(&r.name, &config)
                    .ok_or_else(|| RegisterError::NameTooLong(r.name.clone()))?;
                progress.profiling(&name);
                let m = measure(
                    &loader,
                    &path,
                    &config,
                    build.max_batch(),
                    set,
                    hw.emulation,
                    r.runs,
                )
                .map_err(|message| RegisterError::Profile {
                    variant: name.clone(),
                    message,
                })?;
                variants.push(Variant {
                    name,
                    task: r.task.clone(),
                    model: r.name.clone(),
                    config,
                    file: model_file(&r.name, &build.file_name()),
                    sha256: sha256.clone(),
                    accuracy: m.accuracy,
                    max_batch: build.max_batch(),
                    profile: m.profile,
                    price_per_s: hw.price_per_s,
                });
                progress.profiled();
            }
        }
    }
    progress.end();
    Ok(variants)
}
