//! `weir-bench faults`: network faults under steady load, with the table and the plot of answers
//! per second through one partition and heal.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;

use crate::faults::{run_all, table, timeline, FaultRow, FaultsConfig, PLOTTED};
use crate::plot::{line_plot, PALETTE};

#[derive(Debug, Args)]
pub(super) struct FaultsArgs {
    /// Closed-loop clients.
    #[arg(long, default_value_t = 6)]
    clients: u64,
    /// Seconds of load before each fault.
    #[arg(long, default_value_t = 5)]
    before_secs: u64,
    /// Seconds each fault lasts (a flapping link flaps this long).
    #[arg(long, default_value_t = 6)]
    fault_secs: u64,
    /// Seconds of load after recovery.
    #[arg(long, default_value_t = 4)]
    after_secs: u64,
    /// Runs only the scenarios whose name contains this text (e.g. `HAMS`, `flapping`).
    #[arg(long)]
    only: Option<String>,
    /// Where the plot goes (drawn when the executor partition scenario ran).
    #[arg(long, default_value = "benchmarks/faults/partition.png")]
    plot: PathBuf,
}

/// Fails when a request was answered twice or wrong, or a HAMS output was contradicted: what the
/// faults must never cause.
pub(super) fn run(args: FaultsArgs) -> Result<()> {
    let config = FaultsConfig {
        clients: args.clients.max(1),
        before: Duration::from_secs(args.before_secs),
        fault: Duration::from_secs(args.fault_secs),
        after: Duration::from_secs(args.after_secs),
        dir: std::env::temp_dir().join(format!("weir-bench-faults-{}", std::process::id())),
        only: args.only,
    };
    let rows = run_all(&config)?;
    super::print_machine(Some(format!("load average {}", super::load_average())))?;
    print!("{}", table(&rows, &config));
    if let Some(row) = rows.iter().find(|r| r.scenario == PLOTTED) {
        super::write_plot(&args.plot, |path| plot_partition(row, path));
    }
    let _ = std::fs::remove_dir_all(&config.dir);
    let broken: Vec<&str> = rows
        .iter()
        .filter(|r| r.wrong > 0 || r.twice > 0 || r.contradicted.unwrap_or(0) > 0)
        .map(|r| r.scenario)
        .collect();
    if !broken.is_empty() {
        bail!(
            "wrong, twice or contradicted answers in: {}",
            broken.join("; ")
        );
    }
    Ok(())
}

/// Right answers and failures per second through `row`'s partition, and its cut and heal.
fn plot_partition(row: &FaultRow, path: &std::path::Path) -> Result<()> {
    let (right, failed) = timeline(row);
    let top = right.iter().map(|p| p.1).fold(1.0, f64::max);
    let edge = |t: Duration| vec![(t.as_secs_f64(), 0.0), (t.as_secs_f64(), top)];
    line_plot(
        path,
        &format!("{}: answers through the fault", row.scenario),
        ("seconds since the load started", "per second"),
        vec![
            ("right answers", PALETTE[0], right),
            ("failed", PALETTE[1], failed),
            ("link cut", PALETTE[3], edge(row.fault_window.0)),
            ("link healed", PALETTE[2], edge(row.fault_window.1)),
        ],
    )
}
