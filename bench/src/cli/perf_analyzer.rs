//! `weir-bench perf-analyzer`: Triton's perf_analyzer against `weir serve --model-repository`
//! over HTTP and gRPC, beside bare ONNX Runtime.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::perf_analyzer::{
    perf_analyzer_bench, perf_analyzer_medians, perf_analyzer_table, PerfAnalyzerConfig,
};

#[derive(Debug, Args)]
pub(super) struct PerfAnalyzerArgs {
    /// The model, as NAME=PATH (default: the zoo's squeezenet).
    #[arg(long)]
    model: Option<String>,
    /// Client concurrencies (perf_analyzer's `--concurrency-range`, one run each).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    concurrency: Vec<usize>,
    /// ONNX Runtime sessions of one intra-op thread, for the server's instance group and for
    /// the bare reference alike.
    #[arg(long, default_value_t = 2)]
    instances: usize,
    /// perf_analyzer's measurement window in ms (three per run).
    #[arg(long, default_value_t = 2000)]
    window_ms: u64,
    /// Repetitions; medians and spreads are reported.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// perf_analyzer hands its tensors over in system shared memory (`--shared-memory system`;
    /// the server is started with it too).
    #[arg(long)]
    shared_memory: bool,
    /// Where to save a PNG plot of the sweep.
    #[arg(long, default_value = "benchmarks/perf_analyzer/perf_analyzer.png")]
    plot: PathBuf,
}

pub(super) fn run(args: PerfAnalyzerArgs) -> Result<()> {
    let model = super::model_or(args.model.as_deref(), super::squeezenet)?;
    let config = PerfAnalyzerConfig {
        model,
        concurrency: args.concurrency,
        instances: args.instances.max(1),
        window_ms: args.window_ms.max(100),
        repeats: args.repeats.max(1),
        shared_memory: args.shared_memory,
    };
    let repeats = perf_analyzer_bench(&config)?;
    super::print_machine(Some(format!(
        "{} from a model repository, {} sessions × 1 intra-op thread (server and bare ORT); perf_analyzer windows of {} ms{}, {} repeats (median [min–max]); load average {}",
        config.model.0,
        config.instances,
        config.window_ms,
        if config.shared_memory {
            ", tensors in system shared memory"
        } else {
            ""
        },
        config.repeats,
        super::load_average()
    )))?;
    print!("{}", perf_analyzer_table(&repeats));
    let medians = perf_analyzer_medians(&repeats);
    super::write_plot(&args.plot, |p| crate::plot::plot_perf_analyzer(&medians, p));
    Ok(())
}
