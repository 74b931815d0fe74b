//! `weir-bench infaas-profiles`: the digits variants' latency and accuracy (E2).

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::infaas_profiles::{
    infaas_profiles, infaas_profiles_table, plot_infaas_profiles, InfaasProfilesConfig,
};

#[derive(Debug, Args)]
pub(super) struct InfaasProfilesArgs {
    /// The architectures, as NAME=PATH (default: the set-up's digits_tiny, digits_mlp, digits_wide).
    #[command(flatten)]
    models: super::ModelsArg,
    /// The validation set.
    #[arg(long, default_value = ".weir/data/digits_validation.jsonl")]
    validation: PathBuf,
    /// Timed calls per batch size (the median is kept).
    #[arg(long, default_value_t = 50)]
    runs: usize,
    /// Where the PNG plot goes.
    #[arg(
        long,
        default_value = "benchmarks/infaas_profiles/latency_by_batch.png"
    )]
    plot: PathBuf,
}

pub(super) fn digits_models() -> Vec<(String, PathBuf)> {
    ["digits_tiny", "digits_mlp", "digits_wide"]
        .iter()
        .map(|m| {
            (
                m.to_string(),
                PathBuf::from(format!(".weir/models/{m}.onnx")),
            )
        })
        .collect()
}

pub(super) fn run(args: InfaasProfilesArgs) -> Result<()> {
    let config = InfaasProfilesConfig {
        models: args.models.parse_or(digits_models)?,
        validation: args.validation,
        runs: args.runs.max(1),
    };
    let dir = std::env::temp_dir().join(format!("weir-infaas-profiles-{}", std::process::id()));
    let rows = infaas_profiles(&config, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    let rows = rows?;
    super::print_machine(Some(format!(
        "median of {} calls per batch size, one intra-op thread, graph level all, load average {}",
        config.runs,
        super::load_average()
    )))?;
    print!("{}", infaas_profiles_table(&rows));
    super::write_plot(&args.plot, |p| plot_infaas_profiles(&rows, p));
    Ok(())
}
