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
    #[command(flatten)]
    split: SplitArgs,
}

/// How `--data` is split into training rows and held-out rows (accuracy is scored on the latter).
#[derive(Debug, Args)]
struct SplitArgs {
    /// Fraction of `--data` held out for scoring, never trained on.
    #[arg(long, default_value_t = 0.2)]
    holdout: f64,
    /// Seed of the shuffle that picks the held-out rows.
    #[arg(long, default_value_t = 0)]
    split_seed: u64,
}

impl SplitArgs {
    /// The data options for `data`, announcing the split on stderr.
    fn options(&self, data: &std::path::Path) -> Result<weir_training::DataOptions> {
        if !(0.0..1.0).contains(&self.holdout) || self.holdout.is_nan() {
            bail!("--holdout {} is not a fraction in [0, 1)", self.holdout);
        }
        eprintln!(
            "data {}: holding out {:.1} % of the rows for scoring (--holdout {}, --split-seed {})",
            data.display(),
            100.0 * self.holdout,
            self.holdout,
            self.split_seed
        );
        Ok(weir_training::DataOptions {
            test_fraction: self.holdout,
            split_seed: self.split_seed,
            ..weir_training::DataOptions::digits(data)
        })
    }
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
    /// Seed of the parity model's initialisation and minibatches.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[command(flatten)]
    split: SplitArgs,
    /// Random groupings of the held-out rows the degraded-mode accuracy is scored over (mean ±
    /// standard deviation).
    #[arg(long, default_value_t = 100)]
    groupings: usize,
    /// Which parity model of r to train (ParM §7): parity model t answers queries coded with
    /// coefficients (i + 1)^t and is listed t-th under `resilience.parity.parity_models`; 0 is
    /// the r = 1 parity model.
    #[arg(long, default_value_t = 0)]
    index: usize,
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
    options.data = args.split.options(&args.data)?;
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
    options.data = args.split.options(&args.data)?;
    options.groupings = args.groupings;
    options.index = args.index;
    let report = weir_training::train_parity(&options, |p| print_progress(p, "degraded accuracy"))
        .context("training the parity model")?;
    let d = report.degraded;
    println!(
        "wrote {} (k = {}, parity model {}), scored on {} held-out rows: deployed accuracy A_a {:.4}; degraded-mode accuracy A_d {:.4} ± {:.4} (mean ± standard deviation over {} random groupings seeded {:#x} + g, min {:.4}, max {:.4})",
        report.out.display(),
        report.k,
        args.index,
        report.held_out,
        report.deployed_accuracy,
        d.mean,
        d.std,
        d.groupings,
        d.seed,
        d.min,
        d.max
    );
    for f in [0.01f32, 0.05, 0.1] {
        println!(
            "overall accuracy A_o = (1 − f)·A_a + f·A_d at a reconstructed fraction f = {f}: {:.4}",
            report.overall_accuracy(f)
        );
    }
    Ok(())
}
