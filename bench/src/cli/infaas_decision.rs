//! `weir-bench infaas-decision`: INFaaS decision time against brute force (paper Table 7).

use anyhow::Result;
use clap::Args;

use crate::infaas_decision::{decision, decision_table, DecisionConfig};

#[derive(Debug, Args)]
pub(super) struct InfaasDecisionArgs {
    /// Queries per repeat.
    #[arg(long, default_value_t = 20_000)]
    queries: usize,
    /// Repeats, each with a fresh random state of the 175 variants on 12 workers.
    #[arg(long, default_value_t = 5)]
    repeats: usize,
    /// Fraction of the variants loaded somewhere.
    #[arg(long, default_value_t = 0.3)]
    loaded_fraction: f64,
    /// Random seed.
    #[arg(long, default_value_t = 43)]
    seed: u64,
}

pub(super) fn run(args: InfaasDecisionArgs) -> Result<()> {
    let config = DecisionConfig {
        queries: args.queries,
        repeats: args.repeats.max(1),
        loaded_fraction: args.loaded_fraction.clamp(0.0, 1.0),
        seed: args.seed,
    };
    let rows = decision(&config)?;
    println!(
        "machine: {} cores, load average {}; 175 variants, 12 workers, {} queries × {} random states\n",
        super::machine_cores(),
        super::load_average(),
        config.queries,
        config.repeats
    );
    print!("{}", decision_table(&rows));
    Ok(())
}
