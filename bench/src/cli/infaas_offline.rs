//! `weir-bench infaas-offline`: online queries and an offline job on one instance, each alone
//! and together (INFaaS §6.3.2).

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;

use crate::infaas_autoscale::Pattern;
use crate::infaas_offline::{plot, prepare, run, summarise, table, OfflineBenchConfig};

#[derive(Debug, Args)]
pub(super) struct InfaasOfflineArgs {
    /// The architecture served, NAME=PATH.
    #[arg(
        long,
        default_value = "orientation_ppocr=.weir/models/orientation_ppocr.onnx"
    )]
    model: String,
    /// Its validation set (its rows are the queries).
    #[arg(long, default_value = ".weir/data/orientation_validation.jsonl")]
    validation: PathBuf,
    /// Online rate outside the high phases, q/s.
    #[arg(long, default_value_t = 25.0)]
    low_qps: f64,
    /// Online rate in the two high phases, q/s.
    #[arg(long, default_value_t = 250.0)]
    high_qps: f64,
    /// Seconds of each run (high phases at a quarter and two thirds of it, each a sixth long).
    #[arg(long, default_value_t = 100.0)]
    seconds: f64,
    /// Online SLO, ms.
    #[arg(long, default_value_t = 50.0)]
    slo_ms: f64,
    /// Requests in the offline job (one image each; about 0.4 MB of JSON a line, the numbers
    /// written as f64).
    #[arg(long, default_value_t = 3_000)]
    offline_requests: usize,
    /// When the job is submitted, seconds into each run (default: 5 s before the first high
    /// phase, so that the job meets one).
    #[arg(long)]
    offline_at_s: Option<f64>,
    /// Connections sending the online load.
    #[arg(long, default_value_t = 128)]
    clients: usize,
    /// Folder the plot is written to.
    #[arg(long, default_value = "benchmarks/infaas_offline")]
    out: PathBuf,
}

pub(super) fn run_cli(args: InfaasOfflineArgs) -> Result<()> {
    let Some((name, path)) = args.model.split_once('=') else {
        bail!("--model: expected NAME=PATH");
    };
    let pattern = Pattern::Fluctuating {
        low: args.low_qps,
        spike: args.high_qps,
        seconds: args.seconds,
    };
    let config = OfflineBenchConfig {
        model: (name.to_string(), PathBuf::from(path)),
        validation: args.validation,
        pattern,
        slo_ms: args.slo_ms,
        offline_requests: args.offline_requests.max(1),
        offline_at_s: args.offline_at_s.unwrap_or_else(|| {
            pattern
                .spikes()
                .first()
                .map_or(0.0, |s| (s.0 - 5.0).max(0.0))
        }),
        clients: args.clients.max(1),
    };
    let dir = std::env::temp_dir().join(format!("weir-infaas-offline-{}", std::process::id()));
    let (variant, row) = prepare(&config, &dir)?;
    super::print_machine(Some(format!(
        "online {}–{} q/s, SLO {} ms, offline job of {} requests; load average {}",
        args.low_qps,
        args.high_qps,
        args.slo_ms,
        config.offline_requests,
        super::load_average()
    )))?;
    let alone = run(&config, &dir, &variant, &row, true, false)?;
    let offline = run(&config, &dir, &variant, &row, false, true)?;
    let together = run(&config, &dir, &variant, &row, true, true)?;
    let rows = [
        summarise("online alone", &alone, &pattern, args.slo_ms, true, false),
        summarise(
            "offline alone",
            &offline,
            &pattern,
            args.slo_ms,
            false,
            true,
        ),
        summarise("together", &together, &pattern, args.slo_ms, true, true),
    ];
    print!("{}", table(&rows));
    std::fs::create_dir_all(&args.out)?;
    let png = args.out.join("co-location.png");
    let runs = [
        ("online alone", &alone),
        ("offline alone", &offline),
        ("together", &together),
    ];
    super::write_plot(&png, |p| plot(&runs, &pattern, p));
    eprintln!("logs: {}", dir.display());
    Ok(())
}
