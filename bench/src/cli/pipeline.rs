//! `weir-bench pipeline`: the OCR service graph through `weir serve` against the same pipeline in
//! Python.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;

use crate::pipeline::{pipeline, pipeline_table, PipelineConfig};

#[derive(Debug, Args)]
pub(super) struct PipelineArgs {
    /// The `weir` binary (default: the one beside this executable, as `cargo build --release`
    /// leaves it).
    #[arg(long)]
    weir: Option<PathBuf>,
    /// The service graph.
    #[arg(long, default_value = "graphs/ocr.yaml")]
    graph: PathBuf,
    /// The pages: every PNG in this folder is a request.
    #[arg(long, default_value = ".weir/data/text_images")]
    images: PathBuf,
    /// Python with Pillow, numpy and onnxruntime (the set-up's venv).
    #[arg(long, default_value = ".weir/venv/bin/python")]
    python: PathBuf,
    /// The Python pipeline.
    #[arg(long, default_value = "bench/python/ocr_pipeline.py")]
    script: PathBuf,
    /// Concurrent clients.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    clients: Vec<usize>,
    /// Seconds per measurement.
    #[arg(long, default_value_t = 20.0)]
    seconds: f64,
    /// Measurements of each side at each client count; medians are reported.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Dataflow workers of `weir serve` (the threads that run the inline image and text nodes;
    /// default: one per core, as a deployment would run it).
    #[arg(long)]
    workers: Option<usize>,
    /// Where to save a PNG plot.
    #[arg(long, default_value = "benchmarks/pipeline/pipeline.png")]
    plot: PathBuf,
}

pub(super) fn run(args: PipelineArgs) -> Result<()> {
    let weir = match args.weir {
        Some(w) => w,
        None => std::env::current_exe()
            .context("locating this executable")?
            .with_file_name("weir"),
    };
    let config = PipelineConfig {
        weir,
        graph: args.graph,
        images: args.images,
        python: args.python,
        script: args.script,
        clients: args.clients,
        seconds: args.seconds,
        repeats: args.repeats.max(1),
        workers: args.workers.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        }),
    };
    let rows = pipeline(&config)?;
    super::print_machine(Some(format!(
        "{} s per measurement, weir ({} dataflow workers) and Python alternating, median of {} repeats; load average {}",
        config.seconds,
        config.workers,
        config.repeats,
        super::load_average()
    )))?;
    print!("{}", pipeline_table(&rows));
    super::write_plot(&args.plot, |p| crate::plot::plot_pipeline(&rows, p));
    Ok(())
}
