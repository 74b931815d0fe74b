//! `weir-bench infaas-cold-start`: a variant's first query against its warm ones.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::infaas_cold_start::{cold_start, cold_start_table, ColdStartConfig};

#[derive(Debug, Args)]
pub(super) struct InfaasColdStartArgs {
    /// The architectures, as NAME=PATH (default: the set-up's digits_tiny, digits_mlp, digits_wide).
    #[command(flatten)]
    models: super::ModelsArg,
    /// The validation set.
    #[arg(long, default_value = ".weir/data/digits_validation.jsonl")]
    validation: PathBuf,
    /// Warm queries per architecture per repeat.
    #[arg(long, default_value_t = 200)]
    warm: usize,
    /// Fresh front ends, each one cold start per architecture; medians are reported.
    #[arg(long, default_value_t = 5)]
    repeats: usize,
}

pub(super) fn run(args: InfaasColdStartArgs) -> Result<()> {
    let config = ColdStartConfig {
        models: args
            .models
            .parse_or(super::infaas_profiles::digits_models)?,
        validation: args.validation,
        warm: args.warm.max(1),
        repeats: args.repeats.max(1),
    };
    let dir = std::env::temp_dir().join(format!("weir-infaas-cold-{}", std::process::id()));
    let rows = cold_start(&config, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    let rows = rows?;
    super::print_machine(Some(format!(
        "{} fresh front ends, {} warm queries each, load average {}",
        config.repeats,
        config.warm,
        super::load_average()
    )))?;
    print!("{}", cold_start_table(&rows));
    Ok(())
}
