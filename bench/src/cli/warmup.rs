//! `weir-bench warmup`: the first request's latency after a repository model is ready, with and
//! without its `model_warmup`.

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
    /// Warm-up runs of the warmed model (`model_warmup`'s `count`).
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
        "{} from a model repository, 1 session × 1 intra-op thread, HTTP binary bodies; `model_warmup` of {} zero-filled run(s); {} later requests as the reference; {} repeats (median [min–max]); load average {}",
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
