//! `weir-bench infaas-profiles`: the variants' latency and accuracy, for the digits task,
//! the `text_orientation` image task, or both.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};

use crate::infaas_profiles::{
    infaas_profiles, infaas_profiles_table, plot_infaas_profiles, ArchRow, InfaasProfilesConfig,
};

/// A task the set-up writes architectures and a validation set for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Task {
    /// `digits_tiny`, `digits_mlp`, `digits_wide` (MLPs on 8×8 digits).
    Digits,
    /// `orientation_tiny`, `orientation_conv`, `orientation_ppocr` (`x[3,48,192]` text lines).
    #[value(name = "text_orientation")]
    TextOrientation,
}

impl Task {
    const ALL: [Task; 2] = [Task::Digits, Task::TextOrientation];

    /// The task name the architectures are registered under.
    fn name(self) -> &'static str {
        match self {
            Task::Digits => "digits",
            Task::TextOrientation => "text_orientation",
        }
    }

    /// The set-up's architectures of the task.
    fn models(self) -> Vec<(String, PathBuf)> {
        let names = match self {
            Task::Digits => ["digits_tiny", "digits_mlp", "digits_wide"],
            Task::TextOrientation => ["orientation_tiny", "orientation_conv", "orientation_ppocr"],
        };
        names
            .iter()
            .map(|m| {
                (
                    m.to_string(),
                    PathBuf::from(format!(".weir/models/{m}.onnx")),
                )
            })
            .collect()
    }

    fn validation(self) -> PathBuf {
        PathBuf::from(match self {
            Task::Digits => ".weir/data/digits_validation.jsonl",
            Task::TextOrientation => ".weir/data/orientation_validation.jsonl",
        })
    }

    /// The plot's file name in `--plot-dir` (digits keeps the name it had before the image task).
    fn plot_file(self) -> &'static str {
        match self {
            Task::Digits => "latency_by_batch.png",
            Task::TextOrientation => "latency_by_batch_text_orientation.png",
        }
    }
}

#[derive(Debug, Args)]
pub(super) struct InfaasProfilesArgs {
    /// The task to profile (default: both, one table and one plot each).
    #[arg(long, value_enum)]
    task: Option<Task>,
    /// An architecture, as NAME=PATH, repeated, with `--task` (default: the set-up's three of
    /// the task).
    #[arg(long = "model")]
    models: Vec<String>,
    /// The validation set, with `--task` (default: the set-up's for the task).
    #[arg(long)]
    validation: Option<PathBuf>,
    /// Timed calls per batch size, the median kept (both tasks together take under a minute on
    /// 2 cores at the default).
    #[arg(long, default_value_t = 50)]
    runs: usize,
    /// Where the PNG plots go (latency_by_batch.png for digits,
    /// latency_by_batch_text_orientation.png for text_orientation).
    #[arg(long, default_value = "benchmarks/infaas_profiles")]
    plot_dir: PathBuf,
}

pub(super) fn digits_models() -> Vec<(String, PathBuf)> {
    Task::Digits.models()
}

/// Registers `config`'s architectures into a temporary repository and reads the rows back.
fn profile(config: &InfaasProfilesConfig) -> Result<Vec<ArchRow>> {
    let dir = std::env::temp_dir().join(format!(
        "weir-infaas-profiles-{}-{}",
        config.task,
        std::process::id()
    ));
    let rows = infaas_profiles(config, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    rows
}

pub(super) fn run(args: InfaasProfilesArgs) -> Result<()> {
    let tasks: Vec<Task> = match args.task {
        Some(t) => vec![t],
        None => {
            if !args.models.is_empty() || args.validation.is_some() {
                bail!("--model and --validation name one task's files: give --task too");
            }
            Task::ALL.to_vec()
        }
    };
    let mut configs = Vec::with_capacity(tasks.len());
    for task in &tasks {
        configs.push(InfaasProfilesConfig {
            task: task.name().to_string(),
            models: if args.models.is_empty() {
                task.models()
            } else {
                super::ModelsArg {
                    models: args.models.clone(),
                }
                .parse_or(Vec::new)?
            },
            validation: args.validation.clone().unwrap_or_else(|| task.validation()),
            runs: args.runs.max(1),
        });
    }
    let mut results = Vec::with_capacity(configs.len());
    for config in &configs {
        results.push(profile(config).with_context(|| format!("task {}", config.task))?);
    }
    super::print_machine(Some(format!(
        "median of {} calls per batch size, one intra-op thread, graph level all, load average {}",
        args.runs.max(1),
        super::load_average()
    )))?;
    for ((task, config), rows) in tasks.iter().zip(&configs).zip(&results) {
        println!("{}: {}\n", config.task, config.validation.display());
        println!("{}", infaas_profiles_table(rows));
        let plot = args.plot_dir.join(task.plot_file());
        super::write_plot(&plot, |p| plot_infaas_profiles(&config.task, rows, p));
        println!();
    }
    Ok(())
}
