//! `weir bench <experiment> [flags]`: the experiments live in the `weir-bench` crate, so that the
//! server carries none of their code or plotting; this command replaces the process with the
//! `weir-bench` binary beside `weir`, handing it the arguments as given. Its exit code, output and
//! signals are then that binary's own, and `weir bench <experiment> --help` is its help.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::Args;

#[derive(Debug, Args)]
pub(super) struct BenchArgs {
    /// The experiment and its flags, passed to `weir-bench` unchanged.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    args: Vec<OsString>,
}

/// Execs `weir-bench`; returns only when it could not (its error says how to build it).
pub(super) fn run(args: BenchArgs) -> Result<()> {
    let exe = std::env::current_exe().context("locating the weir binary")?;
    let bench = exe.with_file_name("weir-bench");
    if !bench.is_file() {
        bail!(
            "the benchmarks are the weir-bench binary, and {} is missing: build it with `cargo build --release -p weir-bench` (or run `cargo run --release -p weir-bench -- <experiment>`)",
            bench.display()
        );
    }
    // The program name its usage lines print: `weir bench serf`, as typed.
    let err = Command::new(&bench)
        .arg0("weir bench")
        .args(args.args)
        .exec();
    Err(err).with_context(|| format!("running {}", bench.display()))
}
