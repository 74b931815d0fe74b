//! `weir-bench ui`: `weir serve`'s throughput with no dashboard open against N open, same run.

use std::path::PathBuf;

use anyhow::{anyhow, Result};
use clap::Args;

use crate::ui::{plot_ui, ui, ui_table, UiBenchConfig};

#[derive(Debug, Args)]
pub(super) struct UiArgs {
    /// The model, as NAME=PATH (default: the test models' mlp_a, a small MLP, so that the
    /// server's own work is a large share of each request).
    #[arg(long)]
    model: Option<String>,
    /// Client connections posting at once.
    #[arg(long, default_value_t = 4)]
    clients: usize,
    /// Requests per measurement.
    #[arg(long, default_value_t = 4000)]
    requests: usize,
    /// Repetitions; medians and spreads are reported.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Open dashboards (status-stream subscribers) in the second measurement.
    #[arg(long, default_value_t = 20)]
    dashboards: usize,
    /// Where to save a PNG plot of the repeats.
    #[arg(long, default_value = "benchmarks/ui/ui.png")]
    plot: PathBuf,
}

pub(super) fn run(args: UiArgs) -> Result<()> {
    let model = match &args.model {
        Some(m) => m
            .split_once('=')
            .map(|(n, p)| (n.to_string(), PathBuf::from(p)))
            .ok_or_else(|| anyhow!("--model {m}: expected NAME=PATH"))?,
        None => (
            "mlp_a".to_string(),
            crate::weir_home().join("models").join("mlp_a.onnx"),
        ),
    };
    let config = UiBenchConfig {
        model,
        clients: args.clients.max(1),
        requests: args.requests.max(1),
        repeats: args.repeats.max(1),
        dashboards: args.dashboards.max(1),
    };
    let repeats = ui(&config)?;
    super::print_machine(Some(format!(
        "{}, HTTP binary bodies, keep-alive, {} clients; {} requests per measurement, {} repeats (median [min–max]); load average {}",
        config.model.0,
        config.clients,
        config.requests,
        config.repeats,
        super::load_average()
    )))?;
    print!("{}", ui_table(&repeats, config.dashboards));
    super::write_plot(&args.plot, |p| plot_ui(&repeats, config.dashboards, p));
    Ok(())
}
