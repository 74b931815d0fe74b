//! `weir plan`: Kairos's choice of a heterogeneous executor pool within a budget, from latency
//! profiles.

use std::path::PathBuf;

use anyhow::{anyhow, Context, Result};
use clap::Args;

#[derive(Debug, Args)]
pub(super) struct PlanArgs {
    /// Budget in $ per hour.
    #[arg(long)]
    budget: f64,
    /// Latency target (p99, ms); default: the profile's own.
    #[arg(long)]
    qos_ms: Option<f64>,
    /// Latency profile YAML (see kairos/src/profile), or `paper:<model>` for a built-in one
    /// (ncf, rm2, wnd, mtwnd, dien).
    #[arg(long)]
    profiles: String,
    /// Also write the chosen pool's `executors:` fragment here.
    #[arg(long)]
    out: Option<PathBuf>,
}

pub(super) fn run(args: PlanArgs) -> Result<()> {
    let profile = match args.profiles.strip_prefix("paper:") {
        Some(name) => weir_kairos::profile::paper::PaperModel::from_name(name)
            .ok_or_else(|| anyhow!("no built-in profile `{name}` (ncf, rm2, wnd, mtwnd, dien)"))?
            .profile()
            .to_yaml(),
        None => std::fs::read_to_string(&args.profiles)
            .with_context(|| format!("reading {}", args.profiles))?,
    };
    let report = weir_kairos::planner::plan_report(&profile, args.budget, args.qos_ms, None)
        .context("planning")?;
    eprint!("{}", report.ranking);
    print!("{}", report.executors_yaml);
    if let Some(out) = &args.out {
        std::fs::write(out, &report.executors_yaml)
            .with_context(|| format!("writing {}", out.display()))?;
    }
    Ok(())
}
