//! `weir-bench batch-growth`: a CPU node whose batches grow only while larger calls measured
//! cheaper per line, against one whose batches always grow to `max_size`, beside bare ONNX
//! Runtime at each batch size.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::batch_growth::{batch_growth, batch_growth_tables, BatchGrowthConfig};

#[derive(Debug, Args)]
pub(super) struct BatchGrowthArgs {
    /// The recogniser: PP-OCRv4's text recognition model (48×320 lines).
    #[arg(
        long,
        default_value = ".weir/models/pretrained/ch_PP-OCRv4_rec_infer.onnx"
    )]
    model: PathBuf,
    /// Closed-loop client counts (each client sends one line at a time).
    #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
    clients: Vec<usize>,
    /// Measured lines per measurement (warm-up lines come first).
    #[arg(long, default_value_t = 160)]
    requests: usize,
    /// Most lines per call.
    #[arg(long, default_value_t = 16)]
    max_size: usize,
    /// Measurements of each set-up; medians are reported.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Seconds bare ONNX Runtime is timed at each batch size, per repeat.
    #[arg(long, default_value_t = 2.0)]
    bare_seconds: f64,
    /// Where to save a PNG plot.
    #[arg(long, default_value = "benchmarks/batch_growth/batch_growth.png")]
    plot: PathBuf,
}

pub(super) fn run(args: BatchGrowthArgs) -> Result<()> {
    let config = BatchGrowthConfig {
        model: args.model,
        clients: args.clients,
        requests: args.requests.max(1),
        max_size: args.max_size.max(1),
        repeats: args.repeats.max(1),
        bare_seconds: args.bare_seconds.max(0.1),
    };
    let results = batch_growth(&config)?;
    super::print_machine(Some(format!(
        "one session × 1 intra-op thread, batching ≤ {} within 2000 µs, {} lines per measurement, median of {} repeats; load average {}",
        config.max_size,
        config.requests,
        config.repeats,
        super::load_average()
    )))?;
    print!("{}", batch_growth_tables(&results));
    super::write_plot(&args.plot, |p| crate::plot::plot_batch_growth(&results, p));
    Ok(())
}
