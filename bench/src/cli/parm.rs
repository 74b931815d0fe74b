//! `weir-bench parm`: tail latency under a hiccuping replica, with and without ParM parity.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::parm::squeezenet::{coding_costs, parm, parm_table, ParmBenchConfig};
use crate::plot::{plot_coding_cost, plot_parm};

#[derive(Debug, Args)]
pub(super) struct ParmArgs {
    /// The deployed model (also its own parity model here: same cost).
    #[arg(long, default_value = ".weir/models/squeezenet_random.onnx")]
    model: PathBuf,
    /// Coding-group size.
    #[arg(long, default_value_t = 2)]
    k: usize,
    /// Poisson arrivals per second.
    #[arg(long, default_value_t = 40.0)]
    rate: f64,
    /// Requests per set-up.
    #[arg(long, default_value_t = 1500)]
    requests: usize,
    /// How long each hiccup freezes the remote replica's host, ms.
    #[arg(long, default_value_t = 100)]
    freeze_ms: u64,
    /// Time between hiccups, ms.
    #[arg(long, default_value_t = 1000)]
    period_ms: u64,
    /// Where the PNG plot goes.
    #[arg(long, default_value = "benchmarks/parm/parm.png")]
    plot: PathBuf,
}

/// The latency plot goes to `--plot`, the coding cost's beside it as `coding_cost.png`.
pub(super) fn run(args: ParmArgs) -> Result<()> {
    let config = ParmBenchConfig {
        model: args.model,
        k: args.k.max(2),
        rate: args.rate,
        requests: args.requests,
        freeze_ms: args.freeze_ms,
        period_ms: args.period_ms.max(args.freeze_ms + 1),
    };
    let rows = parm(&config)?;
    super::print_machine(None)?;
    let costs = coding_costs(&config)?;
    print!("{}", parm_table(&rows, &costs, &config)?);
    super::write_plot(&args.plot, |p| plot_parm(&rows, p));
    let cost_plot = args.plot.with_file_name("coding_cost.png");
    super::write_plot(&cost_plot, |p| plot_coding_cost(&costs, p));
    Ok(())
}
