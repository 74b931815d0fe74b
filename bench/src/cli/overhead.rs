//! `weir-bench overhead`: weir's in-process path against bare ONNX Runtime, in one process.

use anyhow::Result;
use clap::Args;

use crate::overhead::{overhead, overhead_table, Layout, OverheadConfig};

#[derive(Debug, Args)]
pub(super) struct OverheadArgs {
    #[command(flatten)]
    models: super::ModelsArg,
    /// Requests per throughput chunk (bare and weir take turns, chunk by chunk).
    #[arg(long, default_value_t = 400)]
    requests: usize,
    /// Latency call pairs per repeat (bare and weir alternate call by call, concurrency 1).
    #[arg(long, default_value_t = 200)]
    latency_requests: usize,
    /// Throughput chunks per side, and latency repeats; medians are reported.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
}

/// Throughput with two one-thread sessions (the cores filled by requests), latency with one
/// two-thread session (one request at a time, as fast as it goes).
pub(super) fn run(args: OverheadArgs) -> Result<()> {
    let config = OverheadConfig {
        models: args.models.parse()?,
        requests: args.requests,
        latency_requests: args.latency_requests,
        repeats: args.repeats.max(1),
        throughput_layout: Layout {
            instances: 2,
            threads: 1,
        },
        latency_layout: Layout {
            instances: 1,
            threads: 2,
        },
    };
    let rows = overhead(&config)?;
    super::print_machine(Some(format!(
        "{} requests per throughput run, {} per latency run, median of {} chunks; {} alternating latency pairs",
        config.requests,
        config.latency_requests,
        config.repeats,
        config.latency_requests * config.repeats
    )))?;
    print!("{}", overhead_table(&rows, &config));
    Ok(())
}
