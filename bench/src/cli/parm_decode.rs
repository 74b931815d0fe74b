//! `weir-bench parm-decode`: ParM's decode rules with and without a straggler.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::parm_decode::{parm_decode, parm_decode_table, DecodeBenchConfig};
use crate::plot::plot_parm;

#[derive(Debug, Args)]
pub(super) struct DecodeArgs {
    /// The deployed model.
    #[arg(long, default_value = ".weir/models/digits_mlp.onnx")]
    model: PathBuf,
    /// Its k = 2 parity model.
    #[arg(long, default_value = ".weir/models/digits_mlp_parity_k2.onnx")]
    parity_model: PathBuf,
    /// The labelled data set.
    #[arg(long, default_value = ".weir/models/digits_test.csv")]
    dataset: PathBuf,
    /// Poisson arrivals per second.
    #[arg(long, default_value_t = 100.0)]
    rate: f64,
    /// Requests per set-up.
    #[arg(long, default_value_t = 2000)]
    requests: usize,
    /// How long each hiccup freezes the remote replica's host, ms.
    #[arg(long, default_value_t = 100)]
    freeze_ms: u64,
    /// Time between hiccups, ms.
    #[arg(long, default_value_t = 1000)]
    period_ms: u64,
    /// Where the PNG plot goes.
    #[arg(long, default_value = "benchmarks/parm_decode/parm_decode.png")]
    plot: PathBuf,
}

pub(super) fn run(args: DecodeArgs) -> Result<()> {
    let config = DecodeBenchConfig {
        model: args.model,
        parity_model: args.parity_model,
        dataset: args.dataset,
        rate: args.rate,
        requests: args.requests,
        freeze_ms: args.freeze_ms,
        period_ms: args.period_ms.max(args.freeze_ms + 1),
    };
    let rows = parm_decode(&config)?;
    super::print_machine(None)?;
    print!("{}", parm_decode_table(&rows, &config));
    let latency: Vec<_> = rows.iter().map(|r| r.latency.clone()).collect();
    super::write_plot(&args.plot, |p| plot_parm(&latency, p));
    Ok(())
}
