//! `weir-bench ui`: `weir serve`'s throughput with no dashboard open against N open, same run;
//! `weir-bench ui-paths`: its throughput and latency by share of request paths kept. Both drive
//! one small model's server through the same closed loop and take the same load flags
//! ([`UiLoadArgs`]).

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::ui::{plot_ui, ui, ui_table, UiBenchConfig};
use crate::ui_paths::{plot_ui_paths, ui_paths, ui_paths_table, UiPathsConfig};

/// The model and the closed loop of the dashboard experiments.
#[derive(Debug, Args)]
pub(super) struct UiLoadArgs {
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
}

/// The model and load, parsed and bounded below by 1.
struct UiLoad {
    model: (String, PathBuf),
    clients: usize,
    requests: usize,
    repeats: usize,
}

impl UiLoadArgs {
    fn parse(&self) -> Result<UiLoad> {
        let default = || {
            (
                "mlp_a".to_string(),
                crate::weir_home().join("models").join("mlp_a.onnx"),
            )
        };
        Ok(UiLoad {
            model: super::model_or(self.model.as_deref(), default)?,
            clients: self.clients.max(1),
            requests: self.requests.max(1),
            repeats: self.repeats.max(1),
        })
    }
}

impl UiLoad {
    /// The report's first lines: the machine, the model and the load.
    fn print_setting(&self) -> Result<()> {
        super::print_machine(Some(format!(
            "{}, HTTP binary bodies, keep-alive, {} clients; {} requests per measurement, {} repeats (median [min–max]); load average {}",
            self.model.0,
            self.clients,
            self.requests,
            self.repeats,
            super::load_average()
        )))
    }
}

#[derive(Debug, Args)]
pub(super) struct UiArgs {
    #[command(flatten)]
    load: UiLoadArgs,
    /// Open dashboards (status-stream subscribers) in the second measurement.
    #[arg(long, default_value_t = 20)]
    dashboards: usize,
    /// Where to save a PNG plot of the repeats.
    #[arg(long, default_value = "benchmarks/ui/ui.png")]
    plot: PathBuf,
}

pub(super) fn run(args: UiArgs) -> Result<()> {
    let load = args.load.parse()?;
    let config = UiBenchConfig {
        model: load.model.clone(),
        clients: load.clients,
        requests: load.requests,
        repeats: load.repeats,
        dashboards: args.dashboards.max(1),
    };
    let repeats = ui(&config)?;
    load.print_setting()?;
    print!("{}", ui_table(&repeats, config.dashboards));
    super::write_plot(&args.plot, |p| plot_ui(&repeats, config.dashboards, p));
    Ok(())
}

#[derive(Debug, Args)]
pub(super) struct UiPathsArgs {
    #[command(flatten)]
    load: UiLoadArgs,
    /// Settings of `weir serve --ui-path-every` compared (one request's path kept in this many; 0
    /// keeps none); the first is the reference of the ratios.
    #[arg(long, value_delimiter = ',', default_value = "0,16,1")]
    path_every: Vec<u32>,
    /// Where to save a PNG plot of the repeats.
    #[arg(long, default_value = "benchmarks/ui/paths.png")]
    plot: PathBuf,
}

pub(super) fn run_paths(args: UiPathsArgs) -> Result<()> {
    let load = args.load.parse()?;
    let config = UiPathsConfig {
        model: load.model.clone(),
        clients: load.clients,
        requests: load.requests,
        repeats: load.repeats,
        every: args.path_every,
    };
    let repeats = ui_paths(&config)?;
    load.print_setting()?;
    print!("{}", ui_paths_table(&repeats, &config.every));
    super::write_plot(&args.plot, |p| plot_ui_paths(&repeats, &config.every, p));
    Ok(())
}
