//! `weir model`: the model repository of model-less serving ("INFaaS: Automated Model-less
//! Inference Serving", §3.3, §3.6) — register a model (its variants generated, profiled and
//! scored), list, show, remove. The repository's layout and API are `weir_infaas::repository`'s;
//! see docs/model-repository.md.

mod register;

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};
use weir_infaas::repository::generate::precision_name;
use weir_infaas::repository::Repository;
use weir_infaas::variant::Variant;

pub use register::{register, RegisterArgs};

/// Where the repository is.
#[derive(Debug, Clone, Args)]
pub struct RepositoryArg {
    /// The model repository folder.
    #[arg(
        long = "repository",
        env = "WEIR_REPOSITORY",
        default_value = ".weir/repository"
    )]
    pub repository: PathBuf,
}

impl RepositoryArg {
    /// The folder.
    pub fn dir(&self) -> PathBuf {
        self.repository.clone()
    }
}

/// `weir model` subcommands.
#[derive(Debug, Subcommand)]
pub(super) enum ModelCommand {
    /// Register an ONNX model for a task: generate its variants, profile them, score them.
    Register(Box<RegisterArgs>),
    /// List registered models (model, task, variants, best accuracy).
    List {
        /// Only models of this task.
        #[arg(long)]
        task: Option<String>,
        #[command(flatten)]
        repository: RepositoryArg,
    },
    /// A model's variants, with every field.
    Show {
        /// The model.
        name: String,
        #[command(flatten)]
        repository: RepositoryArg,
    },
    /// Remove a model and its files.
    Remove {
        /// The model.
        name: String,
        #[command(flatten)]
        repository: RepositoryArg,
    },
}

pub(super) fn run(command: ModelCommand) -> Result<()> {
    match command {
        ModelCommand::Register(a) => {
            let entry = register(&a)?;
            println!(
                "registered {} (task {}): {} variants",
                entry.name,
                entry.task,
                entry.variants.len()
            );
        }
        ModelCommand::List { task, repository } => {
            let repo = Repository::open(&repository.dir())?;
            println!(
                "{:<24} {:<16} {:>8} {:>9}",
                "MODEL", "TASK", "VARIANTS", "ACCURACY"
            );
            for m in repo
                .models()
                .filter(|m| task.as_ref().is_none_or(|t| &m.task == t))
            {
                let best = m.variants.iter().map(|v| v.accuracy).fold(0.0, f64::max);
                println!(
                    "{:<24} {:<16} {:>8} {:>9.4}",
                    m.name,
                    m.task,
                    m.variants.len(),
                    best
                );
            }
        }
        ModelCommand::Show { name, repository } => {
            let repo = Repository::open(&repository.dir())?;
            let m = repo
                .model(&name)
                .ok_or_else(|| anyhow::anyhow!("no model `{name}` in {}", repo.root().display()))?;
            println!("model {}  task {}  file {}", m.name, m.task, m.registered);
            for t in &m.signature.inputs {
                println!("  input  {} {} {:?}", t.name, t.dtype, t.dims);
            }
            for t in &m.signature.outputs {
                println!("  output {} {} {:?}", t.name, t.dtype, t.dims);
            }
            print!("{}", table(&m.variants));
        }
        ModelCommand::Remove { name, repository } => {
            let mut repo = Repository::open(&repository.dir())?;
            let m = repo.remove(&name)?;
            println!("removed {} ({} variants)", m.name, m.variants.len());
        }
    }
    Ok(())
}

/// A table of `variants`, one line each with every field.
fn table(variants: &[Variant]) -> String {
    let mut out = format!(
        "{:<44} {:<5} {:<8} {:>3} {:>5} {:<8} {:<22} {:>8} {:>5} {:>8} {:>9} {:>10} {:>9} {:<12}  {}\n",
        "VARIANT", "PREC", "LEVEL", "THR", "FIXED", "HARDWARE", "FILE", "ACCURACY", "MAXB",
        "LOAD_MS", "MEM_KIB", "SAT_QPS", "PRICE/S", "SHA256", "LATENCY_MS BY BATCH"
    );
    for v in variants {
        let c = &v.config;
        let lat: Vec<String> = v
            .profile
            .latency_ms
            .iter()
            .map(|(b, ms)| format!("{b}:{ms:.3}"))
            .collect();
        let file = v.file.rsplit('/').next().unwrap_or(&v.file);
        out.push_str(&format!(
            "{:<44} {:<5} {:<8} {:>3} {:>5} {:<8} {:<22} {:>8.4} {:>5} {:>8.2} {:>9} {:>10.1} {:>9.3} {:<12}  {}\n",
            v.name,
            precision_name(c.precision),
            c.graph_level.name(),
            c.intra_threads,
            c.fixed_batch.map_or_else(|| "-".into(), |b| b.to_string()),
            c.hardware,
            file,
            v.accuracy,
            v.max_batch,
            v.profile.load_ms,
            v.profile.peak_memory_bytes / 1024,
            v.profile.saturation_qps,
            v.price_per_s,
            &v.sha256[..12.min(v.sha256.len())],
            lat.join(" ")
        ));
    }
    out
}
