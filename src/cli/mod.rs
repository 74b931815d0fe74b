//! The `weir` command line: one module per command, each holding its flags and what it does with
//! them; the flags several commands share (graph files, the timely cluster) and what the
//! long-running ones share (zenoh security, stopping on a signal) have modules of their own.
//! `weir bench` only hands its arguments to the `weir-bench` binary.
//!
//! It is part of the library so that `weir-bench` starts the executors and servers its
//! experiments need from its own binary ([`run_executor`], [`run_serve`]): the same code as `weir
//! executor` and `weir serve`, without requiring a `weir` binary built beside it.

mod bench;
mod cluster;
mod executor;
mod files;
mod hams;
pub mod logging;
pub mod model;
mod plan;
mod process;
mod profile;
mod run;
mod serve;
#[cfg(feature = "train")]
mod train;
mod validate;

use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

pub use executor::{run as run_executor, ExecutorArgs};
pub use serve::{run as run_serve, ServeArgs};

/// Logs to stderr as text, filtered by `WEIR_LOG` (default [`logging::DEFAULT_FILTER`]), without
/// the access log: what `weir-bench` starts with, since a line per request would be part of what
/// its experiments measure.
pub fn init_logging() {
    logging::init(logging::LogFormat::Text, false);
}

/// The `weir` binary: parses the command line, runs the command, prints an error chain on failure.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let access_log = match &cli.command {
        Command::Serve(a) => a.access_log(),
        _ => true,
    };
    logging::init(cli.log_format, access_log);
    match cli.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e:#}");
            ExitCode::FAILURE
        }
    }
}

/// weir serves ML service graphs: ONNX models and tensor ops compiled into timely dataflow.
#[derive(Debug, Parser)]
#[command(name = "weir", version, about, long_about = None)]
pub struct Cli {
    /// How log lines (stderr) are written: `text`, or `json` (one object per line). Which lines
    /// is `WEIR_LOG`'s choice (default `warn,weir::access=info`).
    #[arg(
        long,
        global = true,
        value_enum,
        default_value_t,
        env = "WEIR_LOG_FORMAT"
    )]
    log_format: logging::LogFormat,
    #[command(subcommand)]
    command: Command,
}

// Parsed once per process: a variant's size costs nothing, boxing would cost clarity.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Parse, validate and plan a graph, printing every problem with its YAML location.
    Validate(validate::ValidateArgs),
    /// Serve a graph in-process over a generated workload and print throughput, latency and accuracy.
    Run(run::RunArgs),
    /// Serve graphs over HTTP with the Open Inference Protocol (KServe v2), until SIGTERM or Ctrl-C.
    Serve(serve::ServeArgs),
    /// Serve ONNX models to graphs on other processes or hosts over zenoh, until SIGTERM or Ctrl-C.
    Executor(executor::ExecutorArgs),
    #[cfg(feature = "train")]
    /// Train a digits classifier (MLP or LeNet-style CNN) with candle and write it as ONNX.
    Train(train::TrainArgs),
    #[cfg(feature = "train")]
    /// ParM parity models.
    #[command(subcommand)]
    Parity(train::ParityCommand),
    /// Kairos: pick a heterogeneous executor pool within a budget from latency profiles.
    Plan(plan::PlanArgs),
    /// The model repository of model-less serving: register, list, show, remove models.
    #[command(subcommand)]
    Model(model::ModelCommand),
    /// Replicated stateful nodes (HAMS): check consistency journals.
    #[command(subcommand)]
    Hams(hams::HamsCommand),
    /// Run a benchmark experiment (see benchmarks/README.md).
    #[command(disable_help_flag = true)]
    Bench(bench::BenchArgs),
    /// SERF: measure every (concurrency × intra-op threads) configuration of the graph's model
    /// nodes on ONNX Runtime and save `<graph dir>/<node>.serf.json`.
    Profile(profile::ProfileArgs),
}

impl Cli {
    /// Runs the command asked for.
    pub fn run(self) -> Result<()> {
        match self.command {
            Command::Validate(a) => validate::run(a),
            Command::Run(a) => run::run(a),
            Command::Serve(a) => serve::run(a),
            Command::Executor(a) => executor::run(a),
            #[cfg(feature = "train")]
            Command::Train(a) => train::train(a),
            #[cfg(feature = "train")]
            Command::Parity(train::ParityCommand::Train(a)) => train::parity_train(a),
            Command::Plan(a) => plan::run(a),
            Command::Model(c) => model::run(c),
            Command::Hams(c) => hams::run(c),
            Command::Bench(a) => bench::run(a),
            Command::Profile(a) => profile::run(a),
        }
    }
}
