//! `weir-bench warmup`: the first request's latency after a model is ready, with and without
//! warm-up: a repository model's `model_warmup` and a graph model node's `warmup:`.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::warmup::{plot_warmup, warmup, warmup_table, WarmupBenchConfig};

#[derive(Debug, Args)]
pub(super) struct WarmupArgs {
    /// The model, as NAME=PATH (default: the zoo's squeezenet); its input dimensions must be
    /// fixed.
    #[arg(long)]
    model: Option<String>,
    /// Repetitions (each starts two servers); medians and spreads are reported.
    #[arg(long, default_value_t = 5)]
    repeats: usize,
    /// Warm-up runs of the warmed model (`model_warmup`'s `count`, the node's `warmup.runs`).
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// Requests after the first, for the warm reference.
    #[arg(long, default_value_t = 20)]
    steady: usize,
    /// Where to save a PNG plot of the repeats.
    #[arg(long, default_value = "benchmarks/warmup/warmup.png")]
    plot: PathBuf,
}

pub(super) fn run(args: WarmupArgs) -> Result<()> {
    let model = super::model_or(args.model.as_deref(), super::squeezenet)?;
    let config = WarmupBenchConfig {
        model,
        repeats: args.repeats.max(1),
        runs: args.runs.max(1),
        steady: args.steady.max(1),
    };
    let repeats = warmup(&config)?;
    super::print_machine(Some(format!(
        "{} from a model repository and as a graph's model node, 1 session × 1 intra-op thread, HTTP binary bodies; `model_warmup` / `warmup:` of {} zero-filled run(s); {} later requests as the reference; {} repeats (median [min–max]); load average {}",
        config.model.0,
        config.runs,
        config.steady,
        config.repeats,
        super::load_average()
    )))?;
    print!("{}", warmup_table(&repeats));
    super::write_plot(&args.plot, |p| plot_warmup(&repeats, p));
    Ok(())
}
