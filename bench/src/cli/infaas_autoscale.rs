//! `weir-bench infaas-autoscale`: INFaaS against Clipper⁺ and SM⁺ under three load shapes (the
//! paper's §6.2), and INFaaS under sweeps of its autoscaler's settings.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;

use crate::infaas_autoscale::{
    pattern_table, plot_pattern, plot_sweep, prepare, run, summarise, sweep_table,
    AutoscaleBenchConfig, ExecutorType, Knobs, Pattern, System,
};

#[derive(Debug, Args)]
pub(super) struct InfaasAutoscaleArgs {
    /// The architecture served, NAME=PATH.
    #[arg(long, default_value = "digits_mlp=.weir/models/digits_mlp.onnx")]
    model: String,
    /// Its validation set.
    #[arg(long, default_value = ".weir/data/digits_validation.jsonl")]
    validation: PathBuf,
    /// Load patterns to run: flat-low, steady-high, fluctuating.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "flat-low,steady-high,fluctuating"
    )]
    patterns: Vec<String>,
    /// Systems: infaas, clipper-cpu, clipper-gpu, sm-cpu, sm-gpu (default: all).
    #[arg(long, value_delimiter = ',')]
    systems: Vec<String>,
    /// The queries' latency SLO, ms.
    #[arg(long, default_value_t = 60.0)]
    slo_ms: f64,
    /// Flat-low rate, q/s.
    #[arg(long, default_value_t = 8.0)]
    low_qps: f64,
    /// Steady-high rate at the start and end, q/s.
    #[arg(long, value_delimiter = ',', default_value = "180,200")]
    high_qps: Vec<f64>,
    /// Fluctuating: the spikes' rate, q/s (between spikes: --low-qps).
    #[arg(long, default_value_t = 150.0)]
    spike_qps: f64,
    /// Seconds of the flat and steady patterns.
    #[arg(long, default_value_t = 40.0)]
    seconds: f64,
    /// Seconds of the fluctuating pattern.
    #[arg(long, default_value_t = 120.0)]
    fluctuating_seconds: f64,
    /// HTTP connections sending the load: enough for the top rate times the 2 s a request may
    /// take, so the load stays open-loop when the server falls behind.
    #[arg(long, default_value_t = 512)]
    clients: usize,
    /// Unmeasured seconds at the first rate before each run.
    #[arg(long, default_value_t = 5.0)]
    warmup_s: f64,
    /// Executors per type the autoscaler may hold.
    #[arg(long, default_value_t = 2)]
    max_executors: u32,
    /// A sweep instead of the systems compared: INFaaS on the fluctuating pattern under each value
    /// of one knob, as KNOB=V1,V2,… (threshold, tick_s, lambda_per_s or slack_qps).
    #[arg(long)]
    sweep: Option<String>,
    /// Folder the plots are written to.
    #[arg(long, default_value = "benchmarks/infaas_autoscale")]
    out: PathBuf,
    /// Seed of the arrivals (the same for every system).
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

/// The emulated types, priced in the paper's CPU : Inferentia : GPU ratio per GB·s.
fn types() -> Vec<ExecutorType> {
    let t = |name: &str, price_per_s, base_ms, per_row_ms, load_ms| ExecutorType {
        name: name.into(),
        price_per_s,
        base_ms,
        per_row_ms,
        load_ms,
    };
    vec![
        t("cpu", 1.0, 2.0, 23.0, 500.0),
        t("inf", 6.0, 3.0, 1.0, 1500.0),
        t("gpu", 16.0, 4.0, 0.1, 2500.0),
    ]
}

fn system(name: &str) -> Result<System> {
    Ok(match name {
        "infaas" => System::Infaas,
        "clipper-cpu" => System::ClipperCpu,
        "clipper-gpu" => System::ClipperGpu,
        "sm-cpu" => System::SmCpu,
        "sm-gpu" => System::SmGpu,
        other => bail!("--systems: unknown system `{other}`"),
    })
}

pub(super) fn run_cli(args: InfaasAutoscaleArgs) -> Result<()> {
    let Some((name, path)) = args.model.split_once('=') else {
        bail!("--model: expected NAME=PATH");
    };
    let &[high_from, high_to] = args.high_qps.as_slice() else {
        bail!("--high-qps: expected FROM,TO");
    };
    let pattern = |p: &str| -> Result<Pattern> {
        Ok(match p {
            "flat-low" => Pattern::FlatLow {
                qps: args.low_qps,
                seconds: args.seconds,
            },
            "steady-high" => Pattern::SteadyHigh {
                from: high_from,
                to: high_to,
                seconds: args.seconds,
            },
            "fluctuating" => Pattern::Fluctuating {
                low: args.low_qps,
                spike: args.spike_qps,
                seconds: args.fluctuating_seconds,
            },
            other => bail!("--patterns: unknown pattern `{other}`"),
        })
    };
    let config = AutoscaleBenchConfig {
        model: (name.to_string(), PathBuf::from(path)),
        validation: args.validation.clone(),
        types: types(),
        slo_ms: args.slo_ms,
        clients: args.clients.max(1),
        warmup_s: args.warmup_s.max(0.5),
        max_executors: args.max_executors.max(1),
    };
    let dir = std::env::temp_dir().join(format!("weir-infaas-autoscale-{}", std::process::id()));
    let prepared = prepare(&config, &dir)?;
    std::fs::create_dir_all(&args.out)?;
    let types_text = config
        .types
        .iter()
        .map(|t| {
            format!(
                "{} ({} + {} ms/row, load {} ms, price {}/s)",
                t.name, t.base_ms, t.per_row_ms, t.load_ms, t.price_per_s
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    super::print_machine(Some(format!(
        "SLO {} ms; types {types_text}; load average {}",
        config.slo_ms,
        super::load_average()
    )))?;
    if let Some(sweep) = &args.sweep {
        let Some((knob, values)) = sweep.split_once('=') else {
            bail!("--sweep: expected KNOB=V1,V2,…");
        };
        let fluctuating = pattern("fluctuating")?;
        let mut rows = Vec::new();
        for v in values.split(',') {
            let v: f64 = v.trim().parse()?;
            let knobs = match knob {
                "threshold" => Knobs {
                    threshold: Some(v),
                    ..Knobs::default()
                },
                "tick_s" => Knobs {
                    tick_s: Some(v),
                    ..Knobs::default()
                },
                "lambda_per_s" => Knobs {
                    lambda_per_s: Some(v),
                    ..Knobs::default()
                },
                "slack_qps" => Knobs {
                    slack_qps: Some(v),
                    ..Knobs::default()
                },
                other => bail!("--sweep: unknown knob `{other}`"),
            };
            let r = run(
                &config,
                &prepared,
                System::Infaas,
                fluctuating,
                knobs,
                args.seed,
            )?;
            rows.push((v, summarise(&r, config.slo_ms)));
        }
        print!("{}", sweep_table(knob, &rows));
        let png = args.out.join(format!("sweep-{knob}.png"));
        super::write_plot(&png, |p| plot_sweep(knob, &rows, p));
    } else {
        let systems: Vec<System> = match args.systems.is_empty() {
            true => System::ALL.to_vec(),
            false => args
                .systems
                .iter()
                .map(|s| system(s))
                .collect::<Result<_>>()?,
        };
        for p in &args.patterns {
            let pattern = pattern(p)?;
            let mut runs = Vec::new();
            for s in &systems {
                runs.push(run(
                    &config,
                    &prepared,
                    *s,
                    pattern,
                    Knobs::default(),
                    args.seed,
                )?);
            }
            let rows: Vec<_> = runs.iter().map(|r| summarise(r, config.slo_ms)).collect();
            println!("{}", pattern_table(pattern.name(), &rows));
            let png = args.out.join(format!("{}.png", pattern.name()));
            let rate = |t: f64| crate::infaas_autoscale::rate_at(&pattern, t);
            super::write_plot(&png, |p| plot_pattern(&runs, &rate, config.slo_ms, p));
        }
    }
    // The repository and every run's front-end log (the autoscaler's decisions) stay for reading.
    eprintln!("logs: {}", dir.display());
    Ok(())
}
