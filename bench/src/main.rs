//! `weir-bench <experiment> [flags]`: runs one of weir's benchmark experiments (the crate's docs
//! list them). `weir bench <experiment> [flags]` runs this binary with the same arguments.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    weir::cli::init_logging();
    match weir_bench::cli::Cli::parse().run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e:#}");
            ExitCode::FAILURE
        }
    }
}
