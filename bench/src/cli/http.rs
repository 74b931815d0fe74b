//! `weir-bench http`: `weir serve` over HTTP against the in-process path and bare ONNX Runtime.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::http::{http, http_table, interleaved_table, HttpBenchConfig};

#[derive(Debug, Args)]
pub(super) struct HttpArgs {
    #[command(flatten)]
    models: super::ModelsArg,
    /// Client concurrencies.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
    concurrency: Vec<usize>,
    /// Requests per measurement (resnet50 gets a fifth).
    #[arg(long, default_value_t = 300)]
    requests: usize,
    /// Repetitions; medians are reported.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Where to save a PNG plot of the sweep.
    #[arg(long, default_value = "benchmarks/http/http.png")]
    plot: PathBuf,
}

pub(super) fn run(args: HttpArgs) -> Result<()> {
    let config = HttpBenchConfig {
        models: args.models.parse()?,
        concurrency: args.concurrency,
        requests: args.requests,
        repeats: args.repeats.max(1),
    };
    let rows = http(&config)?;
    super::print_machine(Some(format!(
        "{} requests per measurement (resnet50: a fifth), median of {} repeats",
        config.requests, config.repeats
    )))?;
    print!("{}", http_table(&rows));
    let interleaved = interleaved_table(&rows);
    if !interleaved.is_empty() {
        println!("\nOne client, call by call (bare ORT, HTTP binary, loopback floor, HTTP with the tensors in shared memory in turn; medians of the repeats):\n");
        print!("{interleaved}");
    }
    super::write_plot(&args.plot, |p| crate::plot::plot_http(&rows, p));
    Ok(())
}
