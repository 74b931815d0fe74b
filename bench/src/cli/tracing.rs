//! `weir-bench tracing`: `weir serve`'s HTTP path with tracing off against OTLP export at
//! sampling 0, 1 % and 100 %, binary bodies, keep-alive.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::trace_cost::{plot_tracing, tracing, tracing_table, TracingBenchConfig};

#[derive(Debug, Args)]
pub(super) struct TracingArgs {
    /// The model, as NAME=PATH (default: the zoo's squeezenet).
    #[arg(long)]
    model: Option<String>,
    /// Client concurrencies.
    #[arg(long, value_delimiter = ',', default_value = "1,4")]
    concurrency: Vec<usize>,
    /// Requests per measurement.
    #[arg(long, default_value_t = 600)]
    requests: usize,
    /// Repetitions; medians and spreads are reported.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Where to save a PNG plot of the ratios.
    #[arg(long, default_value = "benchmarks/tracing/tracing.png")]
    plot: PathBuf,
}

pub(super) fn run(args: TracingArgs) -> Result<()> {
    let model = super::model_or(args.model.as_deref(), super::squeezenet)?;
    let config = TracingBenchConfig {
        model,
        concurrency: args.concurrency,
        requests: args.requests.max(1),
        repeats: args.repeats.max(1),
    };
    let rows = tracing(&config)?;
    super::print_machine(Some(format!(
        "{}, HTTP binary bodies, keep-alive, spans over OTLP/gRPC to a collector in the process; {} requests per measurement, {} repeats (median [min–max]); load average {}",
        config.model.0,
        config.requests,
        config.repeats,
        super::load_average()
    )))?;
    print!("{}", tracing_table(&rows));
    super::write_plot(&args.plot, |p| plot_tracing(&rows, p));
    Ok(())
}
