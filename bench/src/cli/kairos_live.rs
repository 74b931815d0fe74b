//! `weir-bench kairos-live`: Kairos routing against the baselines on executors of emulated
//! instance types.

use std::path::PathBuf;

use anyhow::{anyhow, Context, Result};
use clap::Args;
use weir::OrtRuntime;

use crate::kairos_live::{
    default_model, kairos_live, kairos_live_points, kairos_live_table, plot_kairos_live,
    EmulatedType, KairosLatency, KairosLiveConfig, Policy,
};

#[derive(Debug, Args)]
pub(super) struct KairosLiveArgs {
    /// Instance types as NAME:BASE_MS:PER_ROW_MS:PRICE_PER_HOUR (comma-separated): a call of n
    /// rows takes BASE + PER_ROW × n ms (`weir executor --emulate-latency`). Default: the Kairos
    /// paper's DIEN latency fits on g4dn.xlarge and r5n.large ×4, at their prices.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "emu.gpu:26.24:0.0495:0.526,emu.cpu:3.36:0.3271:0.149"
    )]
    types: Vec<String>,
    /// Instances per type of the heterogeneous pool (comma-separated, one per type); default: the
    /// pool `weir plan` picks for the types' profile and the budget.
    #[arg(long, value_delimiter = ',')]
    hetero: Option<Vec<usize>>,
    /// Budget in $/h every pool fits in.
    #[arg(long, default_value_t = 2.5)]
    budget: f64,
    /// p99 latency target of a query, ms.
    #[arg(long, default_value_t = 140.0)]
    qos_ms: f64,
    /// Hidden width of the 64→W→W→10 MLP served.
    #[arg(long, default_value_t = 64)]
    hidden: usize,
    /// Where Kairos's latencies come from, all given as a profile in the graph's YAML but the last:
    /// `measured` (each type's query latency measured through weir before the sweep), `nominal`
    /// (the types' BASE + PER_ROW × rows), or `learned` (online, from the node's own jobs).
    #[arg(long, default_value = "measured")]
    kairos_latency: String,
    /// First offered rate of each sweep, queries/s.
    #[arg(long, default_value_t = 40.0)]
    start_rate: f64,
    /// Factor between consecutive rates of the sweep.
    #[arg(long, default_value_t = 1.2)]
    rate_step: f64,
    /// Highest rate of the sweep, queries/s.
    #[arg(long, default_value_t = 210.0)]
    max_rate: f64,
    /// Seconds of load per trial (at least --min-queries queries).
    #[arg(long, default_value_t = 4.0)]
    seconds: f64,
    /// Fewest queries per trial.
    #[arg(long, default_value_t = 200)]
    min_queries: usize,
    /// Trials per rate; the sweep judges the median p99 over them.
    #[arg(long, default_value_t = 3)]
    trials: usize,
    /// Offered rate of the goodput runs (the same for every set-up), queries/s.
    #[arg(long, default_value_t = 80.0)]
    goodput_rate: f64,
    /// Routing policies, each run on every pool (kairos, kairos_one_per_call, least_outstanding,
    /// round_robin).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "kairos,kairos_one_per_call,least_outstanding,round_robin"
    )]
    policies: Vec<String>,
    /// Where every trial goes (tab-separated).
    #[arg(long, default_value = "benchmarks/kairos/live_points.txt")]
    points: PathBuf,
    /// Where the Markdown table goes.
    #[arg(long, default_value = "benchmarks/kairos/live.md")]
    table: PathBuf,
    /// Where the PNG plot goes.
    #[arg(long, default_value = "benchmarks/kairos/live.png")]
    plot: PathBuf,
}

/// The table (with the machine's line) goes to `--table`, every trial to `--points`, the plot to
/// `--plot`.
pub(super) fn run(args: KairosLiveArgs) -> Result<()> {
    let types = args
        .types
        .iter()
        .map(|t| EmulatedType::parse(t))
        .collect::<Result<Vec<_>>>()?;
    let policies = args
        .policies
        .iter()
        .map(|p| {
            Policy::parse(p).ok_or_else(|| {
                anyhow!("unknown policy `{p}` (kairos, kairos_one_per_call, least_outstanding or round_robin)")
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let kairos_latency = KairosLatency::parse(&args.kairos_latency).ok_or_else(|| {
        anyhow!(
            "--kairos-latency `{}`: give `measured`, `nominal` or `learned`",
            args.kairos_latency
        )
    })?;
    let config = KairosLiveConfig {
        types,
        hetero: args.hetero,
        budget_per_hour: args.budget,
        qos_ms: args.qos_ms,
        hidden: args.hidden,
        kairos_latency,
        start_rate: args.start_rate,
        rate_step: args.rate_step,
        max_rate: args.max_rate,
        seconds_per_trial: args.seconds,
        min_queries: args.min_queries,
        trials: args.trials.max(1),
        goodput_rate: args.goodput_rate,
        policies,
    };
    let home = crate::weir_home();
    let model = default_model(&home, config.hidden);
    let (results, info) = kairos_live(&config, &model)?;
    let table = kairos_live_table(&config, &info, &results);
    println!("{table}");
    let machine = format!(
        "\nMachine: {} CPUs, load average at the end {}; ONNX Runtime: {}.\n",
        super::machine_cores(),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
        OrtRuntime::get()
            .map(|r| r.build_info().to_string())
            .unwrap_or_else(|e| e.to_string())
    );
    println!("{machine}");
    if let Some(dir) = args.table.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&args.table, format!("{table}{machine}"))
        .with_context(|| format!("writing {}", args.table.display()))?;
    std::fs::write(&args.points, kairos_live_points(&results))
        .with_context(|| format!("writing {}", args.points.display()))?;
    match plot_kairos_live(&config, &results, &args.plot) {
        Ok(()) => eprintln!("plot: {}", args.plot.display()),
        Err(e) => eprintln!("no plot ({e})"),
    }
    Ok(())
}
