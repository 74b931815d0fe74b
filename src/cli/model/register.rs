//! `weir model register`: checks a model against its task, generates its variants, profiles and
//! scores each, and adds it to the repository — all or nothing.
//!
//! The files are made in a hidden staging folder of the repository and renamed into place only
//! when every variant is profiled; the model then appears when its metadata is written
//! (atomically), so a reader never sees a half-registered model and a failed registration
//! leaves nothing behind.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use weir_engine::onnx::{read_metadata, ElementType, ModelMetadata, TensorInfo};
use weir_engine::paths::{read_capped, FileRules};
use weir_engine::spec::Device;
use weir_engine::tensor::Dim;
#[cfg(feature = "variant-rewrite")]
use weir_infaas::repository::generate::fix_batch;
use weir_infaas::repository::generate::{variant_name, Build, Grid};
use weir_infaas::repository::layout::{
    check_name, model_file, sha256_file, write_atomic, REGISTERED_FILE, VERSION_DIR,
};
use weir_infaas::repository::profile::measure;
use weir_infaas::repository::validation::ValidationSet;
use weir_infaas::repository::{ModelEntry, Repository, Signature, TensorSignature};
use weir_infaas::variant::{Precision, Variant};

use super::hardware::{self, HardwareType};
use super::runtime::{cuda_available, OrtLoader};
use super::RepositoryArg;

/// `weir model register` flags.
#[derive(Debug, Clone, Args)]
pub struct RegisterArgs {
    /// The model's name (its folder in the repository).
    pub name: String,
    /// The task it serves; every model of a task has the same inputs and outputs.
    #[arg(long)]
    pub task: String,
    /// The ONNX file (float32 inputs, a dynamic batch dimension first).
    #[arg(long)]
    pub onnx: PathBuf,
    /// The validation set (JSON lines: `{"inputs": {"x": [..]}, "label": 3}`).
    #[arg(long)]
    pub validation: PathBuf,
    /// The repository to add it to.
    #[command(flatten)]
    pub repository: RepositoryArg,
    /// Executor types (YAML, see docs/model-repository.md); default: one `local` type at 1.0/s.
    #[arg(long)]
    pub hardware: Option<PathBuf>,
    /// The int8 build, made elsewhere; default: made by `scripts/quantize.py` (ONNX Runtime's
    /// `quantize_dynamic`) with `$WEIR_PYTHON` or `.weir/venv/bin/python`.
    #[arg(long, conflicts_with = "no_int8")]
    pub int8: Option<PathBuf>,
    /// Make no int8 variants.
    #[arg(long)]
    pub no_int8: bool,
    /// Intra-op thread counts.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub threads: Vec<u32>,
    /// Graph-optimisation levels (disabled, basic, extended, all).
    #[arg(long, value_delimiter = ',', default_value = "basic,all")]
    pub levels: Vec<String>,
    /// Fixed batch sizes to build (the dynamic-batch build is always made).
    #[cfg_attr(
        feature = "variant-rewrite",
        arg(long, value_delimiter = ',', default_value = "1,8,32")
    )]
    #[cfg_attr(not(feature = "variant-rewrite"), arg(long, value_delimiter = ','))]
    pub batches: Vec<u32>,
    /// Timed calls per batch size (the median is kept).
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
}

fn signature_of(path: &Path) -> Result<Signature> {
    let meta: ModelMetadata = read_metadata(path)?;
    let tensor = |t: &TensorInfo| -> Result<TensorSignature> {
        let dtype = match t.element {
            ElementType::Supported(d) => d,
            other => bail!(
                "{}: `{}` has element type {other:?}",
                path.display(),
                t.name
            ),
        };
        Ok(TensorSignature {
            name: t.name.clone(),
            dtype,
            dims: t
                .dims
                .iter()
                .map(|d| match d {
                    Dim::Fixed(n) => Some(*n as u64),
                    Dim::Dynamic => None,
                })
                .collect(),
        })
    };
    let sig = Signature {
        inputs: meta.inputs.iter().map(tensor).collect::<Result<_>>()?,
        outputs: meta.outputs.iter().map(tensor).collect::<Result<_>>()?,
    };
    if let Some(t) = sig
        .inputs
        .iter()
        .chain(&sig.outputs)
        .find(|t| t.dims.first() != Some(&None))
    {
        bail!(
            "{}: `{}` has no dynamic batch dimension first (shape {:?})",
            path.display(),
            t.name,
            t.dims
        );
    }
    Ok(sig)
}

/// The first `rel` found under the current folder, the executable's folder, or their parents.
fn find_up(rel: &str) -> Option<PathBuf> {
    let roots = [
        std::env::current_dir().ok(),
        std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(Path::to_path_buf)),
    ];
    roots
        .into_iter()
        .flatten()
        .flat_map(|r| r.ancestors().map(|a| a.join(rel)).collect::<Vec<_>>())
        .find(|p| p.exists())
}

/// Makes `out` from `onnx` with `scripts/quantize.py`.
fn quantize(onnx: &Path, out: &Path) -> Result<()> {
    let script = find_up("scripts/quantize.py")
        .ok_or_else(|| anyhow!("scripts/quantize.py not found; pass --int8 FILE or --no-int8"))?;
    let python = match std::env::var_os("WEIR_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => std::env::var_os("WEIR_HOME")
            .map(|h| PathBuf::from(h).join("venv/bin/python"))
            .filter(|p| p.exists())
            .or_else(|| find_up(".weir/venv/bin/python"))
            .ok_or_else(|| {
                anyhow!("no python with onnxruntime (run scripts/setup.sh, or set WEIR_PYTHON); or pass --int8 FILE or --no-int8")
            })?,
    };
    let result = Command::new(&python)
        .arg(&script)
        .arg(onnx)
        .arg(out)
        .output()
        .with_context(|| format!("running {}", python.display()))?;
    if !result.status.success() {
        let err = String::from_utf8_lossy(&result.stderr);
        let tail: String = err
            .chars()
            .rev()
            .take(2000)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        bail!("{} {} failed: {tail}", python.display(), script.display());
    }
    Ok(())
}

/// A fresh staging folder for `name` in the repository.
fn staging(repo: &Repository, name: &str) -> Result<PathBuf> {
    let dir = repo
        .root()
        .join(format!(".staging-{name}-{}", std::process::id()));
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(dir.join(VERSION_DIR))?;
    Ok(dir)
}

/// Writes every build's file into `version` (the staging version folder).
fn write_builds(
    args: &RegisterArgs,
    sig: &Signature,
    builds: &[Build],
    version: &Path,
) -> Result<()> {
    let rules = FileRules::default();
    let fp32 = read_capped(&args.onnx, rules.max_model_bytes, &rules)?;
    write_atomic(&version.join(REGISTERED_FILE), &fp32)?;
    let int8_dyn = version.join(
        Build {
            precision: Precision::Int8,
            fixed_batch: None,
        }
        .file_name(),
    );
    if builds.iter().any(|b| b.precision == Precision::Int8) {
        match &args.int8 {
            Some(f) => {
                let other = signature_of(f)?;
                if other != *sig {
                    bail!(
                        "--int8 {}: its signature differs from --onnx's",
                        f.display()
                    );
                }
                write_atomic(&int8_dyn, &read_capped(f, rules.max_model_bytes, &rules)?)?;
            }
            None => quantize(&version.join(REGISTERED_FILE), &int8_dyn)?,
        }
    }
    #[cfg(feature = "variant-rewrite")]
    for b in builds {
        let Some(batch) = b.fixed_batch else { continue };
        let base = match b.precision {
            Precision::Fp32 => fp32.clone(),
            Precision::Int8 => read_capped(&int8_dyn, rules.max_model_bytes, &rules)?,
        };
        let fixed = fix_batch(&base, batch).with_context(|| args.onnx.display().to_string())?;
        write_atomic(&version.join(b.file_name()), &fixed)?;
    }
    Ok(())
}

fn grid(args: &RegisterArgs) -> Result<Grid> {
    let levels = args
        .levels
        .iter()
        .map(|l| {
            weir_infaas::variant::GraphLevel::parse(l)
                .ok_or_else(|| anyhow!("--levels: `{l}` is not disabled, basic, extended or all"))
        })
        .collect::<Result<Vec<_>>>()?;
    if args.threads.is_empty() || args.threads.iter().any(|t| *t == 0 || *t > 256) {
        bail!("--threads: each count must be in 1..=256");
    }
    if args.batches.iter().any(|b| *b == 0 || *b > 4096) {
        bail!("--batches: each size must be in 1..=4096");
    }
    if cfg!(not(feature = "variant-rewrite")) && !args.batches.is_empty() {
        bail!("--batches: fixed-batch files need weir built with the `variant-rewrite` feature (this is a serve-only build); omit --batches for the dynamic-batch file alone");
    }
    if levels.is_empty() {
        bail!("--levels: give at least one");
    }
    let unique = |mut v: Vec<u32>| {
        v.sort_unstable();
        v.dedup();
        v
    };
    let mut levels = levels;
    levels.sort();
    levels.dedup();
    let mut precisions = vec![Precision::Fp32];
    if !args.no_int8 {
        precisions.push(Precision::Int8);
    }
    Ok(Grid {
        threads: unique(args.threads.clone()),
        levels,
        batches: unique(args.batches.clone()),
        precisions,
    })
}

/// The hardware types to profile on: those of `--hardware` (or `local`), CUDA ones dropped
/// where the library has no CUDA provider.
fn hardware_types(args: &RegisterArgs) -> Result<Vec<HardwareType>> {
    let types = match &args.hardware {
        Some(f) => hardware::read(f)?,
        None => hardware::local(),
    };
    let cuda = cuda_available();
    let (kept, dropped): (Vec<_>, Vec<_>) = types
        .into_iter()
        .partition(|t| t.device == Device::Cpu || cuda);
    for t in &dropped {
        eprintln!(
            "skipping hardware type `{}`: this ONNX Runtime library has no CUDA execution provider",
            t.name
        );
    }
    if kept.is_empty() {
        bail!("no hardware type left to profile on");
    }
    Ok(kept)
}

/// Registers the model `args` describe, returning its entry.
pub fn register(args: &RegisterArgs) -> Result<ModelEntry> {
    check_name("model", &args.name)?;
    check_name("--task", &args.task)?;
    let grid = grid(args)?;
    let hardware = hardware_types(args)?;
    let mut repo = Repository::open_or_create(&args.repository.dir())?;
    if repo.model(&args.name).is_some() {
        bail!(
            "model `{}` is already registered; `weir model remove {}` first",
            args.name,
            args.name
        );
    }
    let signature = signature_of(&args.onnx)?;
    repo.check_task(&args.name, &args.task, &signature)?;
    let set = ValidationSet::read(&args.validation, &signature)?;
    let builds = grid.builds();
    let stage = staging(&repo, &args.name)?;
    let result = build_and_profile(args, &grid, &hardware, &signature, &set, &builds, &stage);
    let variants = match result {
        Ok(v) => v,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&stage);
            return Err(e);
        }
    };
    let entry = ModelEntry {
        name: args.name.clone(),
        task: args.task.clone(),
        registered: model_file(&args.name, REGISTERED_FILE),
        signature,
        validation_examples: set.len() as u64,
        variants,
    };
    let dir = repo.model_dir(&args.name)?;
    let placed = entry
        .check(&args.name, &args.name)
        .map_err(anyhow::Error::from)
        .and_then(|()| {
            if dir.exists() {
                std::fs::remove_dir_all(&dir)?;
            }
            std::fs::rename(&stage, &dir)?;
            repo.insert(entry.clone())?;
            Ok(())
        });
    if let Err(e) = placed {
        let _ = std::fs::remove_dir_all(&stage);
        if repo.model(&args.name).is_none() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        return Err(e);
    }
    Ok(entry)
}

fn build_and_profile(
    args: &RegisterArgs,
    grid: &Grid,
    hardware: &[HardwareType],
    signature: &Signature,
    set: &ValidationSet,
    builds: &[Build],
    stage: &Path,
) -> Result<Vec<Variant>> {
    let version = stage.join(VERSION_DIR);
    write_builds(args, signature, builds, &version)?;
    let names: Vec<String> = hardware.iter().map(|h| h.name.clone()).collect();
    let total = builds.len() * grid.configs(builds[0], &names).len();
    let bar = ProgressBar::new(total as u64).with_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_prefix(format!("profiling {}", args.name));
    let mut variants = Vec::with_capacity(total);
    for build in builds {
        let path = version.join(build.file_name());
        let sha256 = sha256_file(&path)?;
        for hw in hardware {
            let loader = OrtLoader::new(signature, hw.device)?;
            for config in grid.configs(*build, std::slice::from_ref(&hw.name)) {
                let name = variant_name(&args.name, &config)
                    .ok_or_else(|| anyhow!("variant names of `{}` would exceed 64 characters; use a shorter model or hardware name", args.name))?;
                bar.set_message(name.clone());
                let m = measure(
                    &loader,
                    &path,
                    &config,
                    build.max_batch(),
                    set,
                    hw.emulation,
                    args.runs,
                )
                .map_err(|e| anyhow!("profiling {name}: {e}"))?;
                variants.push(Variant {
                    name,
                    task: args.task.clone(),
                    model: args.name.clone(),
                    config,
                    file: model_file(&args.name, &build.file_name()),
                    sha256: sha256.clone(),
                    accuracy: m.accuracy,
                    max_batch: build.max_batch(),
                    profile: m.profile,
                    price_per_s: hw.price_per_s,
                });
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    Ok(variants)
}
