//! `weir-bench grpc`: `weir serve` over gRPC against HTTP binary and bare ONNX Runtime.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::grpc::{default_models, grpc, grpc_table, in_turn_table, GrpcBenchConfig, RequestPath};

#[derive(Debug, Args)]
pub(super) struct GrpcArgs {
    /// Models, as NAME=PATH (default: the zoo's squeezenet and .weir/models/mlp_a.onnx).
    #[arg(long = "model")]
    models: Vec<String>,
    /// Client concurrencies.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
    concurrency: Vec<usize>,
    /// Requests per measurement for an image model (a small model gets ten times as many).
    #[arg(long, default_value_t = 300)]
    requests: usize,
    /// Repetitions; medians are reported.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Measure one path alone (bare, http or grpc), to profile it; the table's other columns
    /// read "–" and no plot is written.
    #[arg(long)]
    only: Option<RequestPath>,
    /// Where to save a PNG plot of the sweep.
    #[arg(long, default_value = "benchmarks/grpc/grpc.png")]
    plot: PathBuf,
}

pub(super) fn run(args: GrpcArgs) -> Result<()> {
    let models = super::ModelsArg {
        models: args.models,
    }
    .parse_or(default_models)?;
    let config = GrpcBenchConfig {
        models,
        concurrency: args.concurrency,
        requests: args.requests,
        repeats: args.repeats.max(1),
        only: args.only,
    };
    let rows = grpc(&config)?;
    super::print_machine(Some(format!(
        "{} requests per measurement (small models: ten times as many), median of {} repeats",
        config.requests, config.repeats
    )))?;
    print!("{}", grpc_table(&rows));
    let pairs = in_turn_table(&rows);
    if !pairs.is_empty() {
        println!(
            "\nOne client, call by call (HTTP binary and gRPC in turn; medians of the repeats):\n"
        );
        print!("{pairs}");
    }
    if config.only.is_none() {
        super::write_plot(&args.plot, |p| crate::plot::plot_grpc(&rows, p));
    }
    Ok(())
}
