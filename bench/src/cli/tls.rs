//! `weir-bench tls`: `weir serve`'s HTTP path with and without TLS, binary bodies, keep-alive.

use anyhow::Result;
use clap::Args;

use crate::tls::{tls, tls_table, TlsBenchConfig};

#[derive(Debug, Args)]
pub(super) struct TlsArgs {
    /// The model, as NAME=PATH (default: the zoo's squeezenet).
    #[arg(long)]
    model: Option<String>,
    /// Client concurrencies.
    #[arg(long, value_delimiter = ',', default_value = "1,4")]
    concurrency: Vec<usize>,
    /// Requests per measurement.
    #[arg(long, default_value_t = 200)]
    requests: usize,
    /// Repetitions; medians and spreads are reported.
    #[arg(long, default_value_t = 5)]
    repeats: usize,
}

pub(super) fn run(args: TlsArgs) -> Result<()> {
    let model = super::model_or(args.model.as_deref(), super::squeezenet)?;
    let config = TlsBenchConfig {
        model,
        concurrency: args.concurrency,
        requests: args.requests.max(1),
        repeats: args.repeats.max(1),
    };
    let (rows, negotiated) = tls(&config)?;
    super::print_machine(Some(format!(
        "{}, HTTP binary bodies, keep-alive, {negotiated}; {} requests per measurement, {} repeats (median [min–max]); load average {}",
        config.model.0,
        config.requests,
        config.repeats,
        super::load_average()
    )))?;
    print!("{}", tls_table(&rows));
    Ok(())
}
