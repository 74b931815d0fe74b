//! `weir hams`: operator commands for replicated stateful nodes. `weir hams check JOURNAL…` reads
//! the consistency journals every role writes (`WEIR_HAMS_JOURNAL`) and runs the checker over
//! them all ("HAMS: High Availability for Distributed Machine Learning Service Graphs", §I and
//! §IV): it prints what it read, every contradiction found, and fails naming the first, so a
//! script or an operator after an incident gets a yes or no with the reason.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Subcommand;
use weir_hams::journal::{check, read_paths};

/// `weir hams` subcommands.
#[derive(Debug, Subcommand)]
pub(super) enum HamsCommand {
    /// Check consistency journals (files, or folders of `*.jsonl`): exactly once, no conflicting
    /// outputs, apply after dependencies, the release rule. Exits non-zero naming the first
    /// contradiction.
    Check {
        /// Journal files or folders; all are checked together (the rules span roles).
        #[arg(required = true)]
        journals: Vec<PathBuf>,
    },
}

/// Runs a `weir hams` subcommand.
pub(super) fn run(command: HamsCommand) -> Result<()> {
    match command {
        HamsCommand::Check { journals } => check_journals(&journals),
    }
}

fn check_journals(paths: &[PathBuf]) -> Result<()> {
    let read = read_paths(paths).context("reading the journals")?;
    if read.files == 0 {
        bail!("no journal files found (a folder is read for its `*.jsonl` files)");
    }
    let report = check(&read.events);
    println!(
        "{} files, {} events ({} lines skipped as not events): {} released, {} applied, {} produced, {} re-executed",
        read.files,
        read.events.len(),
        read.skipped,
        report.released,
        report.applied,
        report.produced,
        report.reexecuted
    );
    for v in &report.violations {
        println!("contradiction: {v}");
    }
    match report.violations.first() {
        None => {
            println!("consistent: no contradiction");
            Ok(())
        }
        Some(first) => bail!(
            "{} contradiction(s); the first: {first}",
            report.violations.len()
        ),
    }
}
