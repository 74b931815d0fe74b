//! `weir validate`: parse, validate and plan graphs, printing every problem with its YAML location.

use std::path::PathBuf;

use crate::{start, RuntimeOptions};
use anyhow::{bail, Context, Result};
use clap::Args;

use super::files::{load, FileArgs};

#[derive(Debug, Args)]
pub(super) struct ValidateArgs {
    /// Graph YAML files.
    #[arg(required = true)]
    graphs: Vec<PathBuf>,
    /// Fail on warnings too.
    #[arg(long)]
    deny_warnings: bool,
    /// Also load every model into ONNX Runtime (checks the environment, not only the spec).
    #[arg(long)]
    check_env: bool,
    /// Print the plan as Graphviz DOT instead of text.
    #[arg(long)]
    dot: bool,
    #[command(flatten)]
    files: FileArgs,
}

pub(super) fn run(args: ValidateArgs) -> Result<()> {
    let mut failed = 0;
    for path in &args.graphs {
        match load(path, &args.files) {
            Ok(graph) => {
                let warnings = graph.warnings.warnings().count();
                if warnings > 0 {
                    eprintln!("{}", graph.warnings);
                }
                if args.check_env {
                    let running = start(graph.plan.clone(), RuntimeOptions::default())
                        .with_context(|| format!("starting {}", path.display()))?;
                    running.shutdown();
                }
                if args.dot {
                    print!("{}", graph.plan.dot());
                } else {
                    print!("{}", graph.plan.describe());
                    println!(
                        "{}: ok{}",
                        path.display(),
                        if warnings > 0 {
                            format!(" ({warnings} warning(s))")
                        } else {
                            String::new()
                        }
                    );
                }
                if args.deny_warnings && warnings > 0 {
                    failed += 1;
                }
            }
            Err(e) => {
                eprintln!("{e:#}\n");
                failed += 1;
            }
        }
    }
    if failed > 0 {
        bail!(
            "{failed} of {} graph(s) failed validation",
            args.graphs.len()
        );
    }
    Ok(())
}
