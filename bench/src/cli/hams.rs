//! `weir-bench hams`: HAMS's normal-case cost and failover time, or, instead, one of its side
//! experiments (the batch-size sweep, the lineage's cost, divergence under checkpoint replay).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::hams::{
    batch_sweep, failover, lineage_cost, overhead, sweep_table, tables, HamsBenchConfig, Service,
};
use crate::hams_divergence::{divergence, divergence_points, divergence_table};
use crate::plot::{plot_hams_batch_sweep, plot_hams_divergence, plot_lineage_cost};

#[derive(Debug, Args)]
pub(super) struct HamsBenchArgs {
    /// Requests per measurement.
    #[arg(long, default_value_t = 2000)]
    requests: usize,
    /// Closed-loop client concurrency.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Measurements per (graph, mode); medians are reported.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Failover trials per mode.
    #[arg(long, default_value_t = 10)]
    trials: usize,
    /// Most rows per batch at the stateful nodes.
    #[arg(long, default_value_t = 8)]
    batch: usize,
    /// Emulated extra compute per batch at every stateful node, ms (`weir executor --compute-ms`).
    #[arg(long, default_value_t = 0.0)]
    compute_ms: f64,
    /// Batches between two state copies under the `checkpoint` baseline.
    #[arg(long, default_value_t = 100)]
    checkpoint_every: u64,
    /// Instead of the overhead and failover tables: the online learner's overhead per batch size
    /// (comma-separated sizes), with a plot (`--plot`).
    #[arg(long, value_delimiter = ',')]
    sweep_batch: Vec<usize>,
    /// Instead: the lineage's cost per batch of 64 rows against the path length.
    #[arg(long)]
    lineage: bool,
    /// Instead: released outputs a checkpoint replay contradicts under non-determinism, for
    /// each of these checkpoint intervals (comma-separated batches), against NSPB; `--trials`
    /// failovers each, plot beside `--plot` as `divergence.png`.
    #[arg(long, value_delimiter = ',')]
    divergence: Vec<u64>,
    /// Where the batch sweep's plot goes.
    #[arg(long, default_value = "benchmarks/hams/batch_sweep.png")]
    plot: PathBuf,
    /// Only these service graphs (autopilot, tracker, online; comma-separated).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "autopilot,tracker,online"
    )]
    services: Vec<String>,
}

/// Fails when a failover trial lost or duplicated a request: HAMS must answer each exactly once.
pub(super) fn run(args: HamsBenchArgs) -> Result<()> {
    let home = crate::weir_home();
    let config = HamsBenchConfig {
        models: std::fs::canonicalize(home.join("models"))
            .context("the models folder (run scripts/setup.sh first)")?,
        requests: args.requests,
        concurrency: args.concurrency.max(1),
        repeats: args.repeats.max(1),
        trials: args.trials,
        batch: args.batch.max(1),
        compute_ms: args.compute_ms.max(0.0),
        checkpoint_every: args.checkpoint_every.max(1),
        services: args
            .services
            .iter()
            .map(|s| Service::parse(s))
            .collect::<Result<_>>()?,
    };
    super::print_machine(None)?;
    if args.lineage {
        lineage(&args);
        return Ok(());
    }
    if !args.divergence.is_empty() {
        return divergences(&args, &config);
    }
    if !args.sweep_batch.is_empty() {
        let rows = batch_sweep(&config, &args.sweep_batch)?;
        print!("{}", sweep_table(&rows, &config));
        let title = format!(
            "HAMS overhead, 1 MiB online learner, {} ms/batch",
            config.compute_ms
        );
        super::write_plot(&args.plot, |p| plot_hams_batch_sweep(&rows, &title, p));
        return Ok(());
    }
    let rows = overhead(&config)?;
    let failovers = failover(&config)?;
    print!("{}", tables(&rows, &failovers, &config));
    let broken: usize = failovers
        .iter()
        .map(|(_, t)| t.iter().filter(|t| !t.exactly_once).count())
        .sum();
    if broken > 0 {
        bail!("{broken} failover trials lost or duplicated a request");
    }
    Ok(())
}

/// `--lineage`: the table, and its plot beside `--plot` as `lineage_cost.png`.
fn lineage(args: &HamsBenchArgs) {
    let hops = [1, 2, 4, 8, 12];
    let costs = lineage_cost(64, &hops, 2000);
    println!("lineage per batch of 64 rows (append one hop + dependency scan), median of 2000\n");
    println!("| hops on the path | µs per batch | µs per row |\n|---|---|---|");
    for (n, us) in &costs {
        println!("| {n} | {us:.1} | {:.2} |", us / 64.0);
    }
    let path = args.plot.with_file_name("lineage_cost.png");
    let points: Vec<(usize, f64, f64)> = costs.iter().map(|&(n, us)| (n, us, us / 64.0)).collect();
    super::write_plot(&path, |p| plot_lineage_cost(&points, p));
}

/// `--divergence`: the table, and its plot beside `--plot` as `divergence.png`; fails when a
/// trial lost or duplicated a request.
fn divergences(args: &HamsBenchArgs, config: &HamsBenchConfig) -> Result<()> {
    let rows = divergence(config, &args.divergence)?;
    print!("{}", divergence_table(&rows, config));
    let path = args.plot.with_file_name("divergence.png");
    super::write_plot(&path, |p| {
        plot_hams_divergence(&divergence_points(&rows), p)
    });
    let broken: usize = rows
        .iter()
        .map(|r| r.trials.iter().filter(|t| !t.answered_once).count())
        .sum();
    if broken > 0 {
        bail!("{broken} trials lost or duplicated a request");
    }
    Ok(())
}
