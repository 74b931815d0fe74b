//! `weir run`: serve a graph in-process over a generated workload and print throughput, latency
//! and accuracy.

use std::path::PathBuf;

use crate::loadgen::{run_load, Arrival, LoadSpec};
use crate::workload::Workload;
use crate::{OrtRuntime, RuntimeOptions};
use anyhow::{bail, Context, Result};
use clap::Args;

use super::cluster::ClusterArgs;
use super::files::{load, FileArgs};

#[derive(Debug, Args)]
pub(super) struct RunArgs {
    /// Graph YAML file.
    graph: PathBuf,
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Requests to send (after warm-up).
    #[arg(long, default_value_t = 1000)]
    requests: usize,
    /// Open loop: Poisson arrivals at this many requests per second.
    #[arg(long, conflicts_with = "concurrency")]
    rate: Option<f64>,
    /// Closed loop: this many clients, each waiting for its answer (the default, with 4).
    #[arg(long)]
    concurrency: Option<usize>,
    /// Requests sent first and not counted.
    #[arg(long, default_value_t = 20)]
    warmup: usize,
    /// Timely worker threads.
    #[arg(long, default_value_t = 1, env = "WEIR_WORKERS")]
    workers: usize,
    /// Labelled CSV (features then label per row, .csv or .csv.gz) to send instead of random tensors.
    #[arg(long)]
    dataset: Option<PathBuf>,
    /// Graph output compared with the label (default: the first i64 output of one element).
    #[arg(long)]
    label_output: Option<String>,
    /// Seed for random inputs and arrival times.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Requests admitted at once, at most; more are refused as overloaded.
    #[arg(long, default_value_t = 4096)]
    max_in_flight: usize,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
    #[command(flatten)]
    files: FileArgs,
}

pub(super) fn run(args: RunArgs) -> Result<()> {
    let graph = load(&args.graph, &args.files)?;
    if graph.warnings.warnings().count() > 0 {
        eprintln!("{}", graph.warnings);
    }
    let workload = match &args.dataset {
        Some(path) => Workload::labelled_csv(&graph.plan, path)?,
        None => Workload::random(&graph.plan, 16, args.seed),
    };
    let arrival = match (args.rate, args.concurrency) {
        (Some(rate), _) => Arrival::Poisson { rate },
        (None, c) => Arrival::Closed {
            concurrency: c.unwrap_or(4),
        },
    };
    let name = graph.plan.name.clone();
    let options = RuntimeOptions {
        workers: args.workers,
        max_in_flight: args.max_in_flight,
        ..RuntimeOptions::default()
    };
    let distributed = crate::DistributedOptions {
        cluster: args.cluster.options()?,
        ..Default::default()
    };
    let running = crate::start_distributed(graph.plan, options, &distributed)
        .with_context(|| format!("starting graph `{name}`"))?;
    if let Ok(rt) = OrtRuntime::get() {
        eprintln!("ONNX Runtime: {}", rt.library().display());
    }
    eprintln!(
        "running `{name}`: {} requests ({arrival:?}), {} worker(s), workload: {}",
        args.requests,
        args.workers,
        match &args.dataset {
            Some(p) => p.display().to_string(),
            None => "random tensors".into(),
        }
    );
    let spec = LoadSpec {
        requests: args.requests,
        warmup: args.warmup,
        arrival,
        seed: args.seed,
        label_output: args.label_output.clone(),
        progress: !args.no_progress,
    };
    let report = run_load(running.runtime(), &workload, &spec);
    let stats = running.executor_stats();
    let duplicates = running.runtime().duplicate_answers();
    let parity: Vec<_> = running
        .parity_services()
        .into_iter()
        .map(|(node, s)| (node, s.decode_rule(), s.stats()))
        .collect();
    running.shutdown();
    print!("{}", report.summary(&name));
    for (node, rule, p) in parity {
        println!(
            "node `{node}` (ParM, decode after {rule}): {} coding groups, {} answers reconstructed ({} late, {} failed; {:.2} % of answers), {} failures not reconstructed, {} late real predictions dropped",
            p.groups,
            p.reconstructed,
            p.reconstructed_late,
            p.reconstructed_failed,
            100.0 * p.reconstructed_fraction(),
            p.unrecovered,
            p.late_real
        );
    }
    for (node, s) in stats {
        println!(
            "node `{node}`: {} rows in {} calls (mean batch {:.2}), busy {:.2} s, queue depth {}, errors {}",
            s.rows,
            s.runs,
            s.mean_batch_size(),
            s.busy.as_secs_f64(),
            s.queue_depth(),
            s.errors
        );
    }
    if duplicates > 0 {
        println!("second answers suppressed: {duplicates}");
    }
    if report.ok + report.error_count() != report.sent {
        bail!(
            "{} requests sent but {} answered",
            report.sent,
            report.ok + report.error_count()
        );
    }
    Ok(())
}
