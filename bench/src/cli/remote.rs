//! `weir-bench remote`: a model node on a `weir executor` process against in-process, and failover.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;

use crate::remote::{failover, remote_overhead, remote_table, RemoteBenchConfig};

#[derive(Debug, Args)]
pub(super) struct RemoteArgs {
    /// The model (default: the zoo's squeezenet).
    #[arg(long, default_value = ".weir/zoo/squeezenet.onnx")]
    model: PathBuf,
    /// Sessions per executor.
    #[arg(long, default_value_t = 2)]
    instances: usize,
    /// Closed-loop client counts.
    #[arg(long, value_delimiter = ',', default_value = "1,4")]
    concurrency: Vec<usize>,
    /// Requests per measurement.
    #[arg(long, default_value_t = 400)]
    requests: usize,
    /// Repeats per side; medians are reported.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// SIGKILLs in the failover part; 0 leaves the failover part out (the overhead alone).
    #[arg(long, default_value_t = 5)]
    kills: usize,
    /// Where to save a PNG plot of the in-process and remote figures by client count.
    #[arg(long, default_value = "benchmarks/remote/remote.png")]
    plot: PathBuf,
}

/// Fails when a request failed during the kills: failover must lose nothing.
pub(super) fn run(args: RemoteArgs) -> Result<()> {
    let config = RemoteBenchConfig {
        model: args.model,
        instances: args.instances.max(1),
        concurrency: args.concurrency,
        requests: args.requests,
        repeats: args.repeats.max(1),
        kills: args.kills,
    };
    let rows = remote_overhead(&config)?;
    // `--kills 0` measures the overhead alone: no executors are started for a failover part.
    let failover = (config.kills > 0).then(|| failover(&config)).transpose()?;
    super::print_machine(None)?;
    print!("{}", remote_table(&rows, failover.as_ref(), &config));
    let model = config
        .model
        .file_stem()
        .map_or_else(|| "model".into(), |s| s.to_string_lossy());
    super::write_plot(&args.plot, |p| crate::plot::plot_remote(&model, &rows, p));
    if let Some(f) = failover.filter(|f| f.errors > 0) {
        bail!("{} requests failed during failover", f.errors);
    }
    Ok(())
}
