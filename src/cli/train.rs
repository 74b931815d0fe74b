//! `weir train` and `weir parity train`: digits classifiers and ParM parity models, trained with
//! candle and written as ONNX.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};

#[derive(Debug, Args)]
pub(super) struct TrainArgs {
    /// Architecture: `mlp` (64-128-64-10) or `lenet`.
    #[arg(long, default_value = "mlp")]
    arch: String,
    /// The digits data (scikit-learn's digits.csv.gz).
    #[arg(long, default_value = ".weir/data/digits.csv.gz")]
    data: PathBuf,
    /// Where the ONNX model goes.
    #[arg(long)]
    out: PathBuf,
    /// Epochs.
    #[arg(long, default_value_t = 60)]
    epochs: usize,
    /// Seed (same seed, same data: bit-identical weights).
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

#[derive(Debug, Subcommand)]
pub(super) enum ParityCommand {
    /// Train a parity model with the deployed model's architecture: F_P(Σ X_i) ≈ Σ F(X_i).
    Train(ParityTrainArgs),
}

#[derive(Debug, Args)]
pub(super) struct ParityTrainArgs {
    /// The deployed model (ONNX, one input [N, features], one output).
    #[arg(long)]
    deployed: PathBuf,
    /// Coding-group size.
    #[arg(long, default_value_t = 2)]
    k: usize,
    /// Encoder: `sum` or `concat`.
    #[arg(long, default_value = "sum")]
    encoder: String,
    /// The deployed model's training data (digits.csv.gz).
    #[arg(long, default_value = ".weir/data/digits.csv.gz")]
    data: PathBuf,
    /// Where the parity model goes.
    #[arg(long)]
    out: PathBuf,
    /// Epochs (default: the paper's 500).
    #[arg(long)]
    epochs: Option<usize>,
    /// Seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

fn print_progress(p: &weir_training::Progress, what: &str) {
    eprintln!(
        "epoch {:>4}/{}  loss {:.5}  {what} {:.4}",
        p.epoch, p.epochs, p.loss, p.accuracy
    );
}

pub(super) fn train(args: TrainArgs) -> Result<()> {
    let architecture = match args.arch.as_str() {
        "mlp" => weir_training::Architecture::digits_mlp(),
        "lenet" => weir_training::Architecture::LeNet,
        other => bail!("unknown architecture `{other}` (mlp or lenet)"),
    };
    let mut options = weir_training::TrainOptions::new(architecture, &args.data, &args.out);
    options.schedule.epochs = args.epochs;
    options.schedule.seed = args.seed;
    let report = weir_training::train_classifier(&options, |p| print_progress(p, "test accuracy"))
        .context("training")?;
    println!(
        "wrote {} ({} parameters): train accuracy {:.4}, test accuracy {:.4}",
        report.out.display(),
        report.parameters,
        report.train_accuracy,
        report.test_accuracy
    );
    Ok(())
}

pub(super) fn parity_train(args: ParityTrainArgs) -> Result<()> {
    let mut options =
        weir_training::ParityOptions::new(&args.deployed, args.k, &args.data, &args.out);
    options.encoder = match args.encoder.as_str() {
        "sum" => weir_training::Encoder::Sum,
        "concat" => weir_training::Encoder::Concat,
        other => bail!("unknown encoder `{other}` (sum or concat)"),
    };
    if let Some(e) = args.epochs {
        options.schedule.epochs = e;
    }
    options.schedule.seed = args.seed;
    let report = weir_training::train_parity(&options, |p| print_progress(p, "degraded accuracy"))
        .context("training the parity model")?;
    println!(
        "wrote {} (k = {}): deployed accuracy {:.4}, degraded-mode accuracy {:.4}",
        report.out.display(),
        report.k,
        report.deployed_accuracy,
        report.degraded_accuracy
    );
    Ok(())
}
