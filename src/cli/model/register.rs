//! `weir model register`: its flags, and a progress bar over
//! [`weir_modelless::register`], which checks the model against its task, generates its
//! variants, profiles and scores each, and adds it to the repository — all or nothing.

use std::path::PathBuf;

use anyhow::{anyhow, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use weir_infaas::repository::ModelEntry;
use weir_modelless::register::{Int8, Progress, RegisterError, Registration};

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

impl RegisterArgs {
    /// The registration these flags ask for.
    #[must_use]
    pub fn registration(&self) -> Registration {
        let int8 = match (&self.int8, self.no_int8) {
            (_, true) => Int8::None,
            (Some(f), false) => Int8::Given(f.clone()),
            (None, false) => Int8::Quantize,
        };
        Registration {
            name: self.name.clone(),
            task: self.task.clone(),
            onnx: self.onnx.clone(),
            validation: self.validation.clone(),
            repository: self.repository.dir(),
            hardware: self.hardware.clone(),
            int8,
            threads: self.threads.clone(),
            levels: self.levels.clone(),
            batches: self.batches.clone(),
            runs: self.runs,
        }
    }
}

/// A progress bar on stderr: one step per profiled variant.
struct Bar(ProgressBar);

impl Progress for Bar {
    fn begin(&self, model: &str, total: usize) {
        self.0.set_length(total as u64);
        self.0.set_prefix(format!("profiling {model}"));
    }
    fn profiling(&self, name: &str) {
        self.0.set_message(name.to_string());
    }
    fn profiled(&self) {
        self.0.inc(1);
    }
    fn end(&self) {
        self.0.finish_and_clear();
    }
}

/// Registers the model `args` describe, with a progress bar, returning its entry.
///
/// # Errors
/// As [`weir_modelless::register::register`]; a refused setting is named by its flag.
pub fn register(args: &RegisterArgs) -> Result<ModelEntry> {
    let bar = ProgressBar::new(0).with_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    weir_modelless::register::register(&args.registration(), &Bar(bar)).map_err(|e| match e {
        RegisterError::Setting { setting, message } => anyhow!("--{setting}: {message}"),
        RegisterError::Quantize(message) => anyhow!("--int8: {message}"),
        e => e.into(),
    })
}
