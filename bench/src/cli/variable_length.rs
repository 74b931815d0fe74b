//! `weir-bench variable-length`: padded batching of requests of drawn lengths against no batching
//! and against batching only requests of one length.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::variable_length::{
    variable_length, variable_length_table, variable_length_thread_table, Batching,
    VariableLengthConfig,
};

#[derive(Debug, Args)]
pub(super) struct VariableLengthArgs {
    /// The model: inputs `input_ids`/`attention_mask` on a dimension named `seq`.
    #[arg(long, default_value = ".weir/models/seq_pool.onnx")]
    model: PathBuf,
    /// Shortest sequence (lengths are uniform between this and --max-len, both included).
    #[arg(long, default_value_t = 8)]
    min_len: usize,
    /// Longest sequence.
    #[arg(long, default_value_t = 128)]
    max_len: usize,
    /// Requests per measurement (a tenth more warm up first).
    #[arg(long, default_value_t = 20000)]
    requests: usize,
    /// Closed-loop client counts.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64")]
    clients: Vec<usize>,
    /// Poisson arrival rates, requests per second.
    #[arg(long, value_delimiter = ',', default_value = "5000,20000")]
    rates: Vec<f64>,
    /// Most requests per call when batching.
    #[arg(long, default_value_t = 8)]
    max_size: usize,
    /// Longest a request waits for others when batching, in microseconds.
    #[arg(long, default_value_t = 2000)]
    max_delay_us: u64,
    /// Measurements of each set-up under each load; medians are reported.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Seed of the request pool.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Set-ups to run (default all): none, same-length, padded, padded-always.
    #[arg(long, value_delimiter = ',', value_parser = parse_setup)]
    setups: Vec<Batching>,
    /// Also print each kind of thread's CPU time and voluntary context switches per request.
    #[arg(long)]
    threads: bool,
    /// Where to save a PNG plot.
    #[arg(long, default_value = "benchmarks/variable_length/variable_length.png")]
    plot: PathBuf,
}

pub(super) fn run(args: VariableLengthArgs) -> Result<()> {
    let config = VariableLengthConfig {
        model: args.model,
        lengths: (args.min_len, args.max_len),
        requests: args.requests,
        clients: args.clients,
        rates: args.rates,
        max_size: args.max_size,
        max_delay_us: args.max_delay_us,
        repeats: args.repeats.max(1),
        seed: args.seed,
        setups: if args.setups.is_empty() {
            Batching::ALL.to_vec()
        } else {
            args.setups
        },
    };
    let rows = variable_length(&config)?;
    super::print_machine(Some(format!(
        "lengths uniform in [{}, {}], {} requests per measurement, batching ≤ {} within {} µs, median of {} repeats; load average {}",
        config.lengths.0,
        config.lengths.1,
        config.requests,
        config.max_size,
        config.max_delay_us,
        config.repeats,
        super::load_average()
    )))?;
    print!("{}", variable_length_table(&rows));
    if args.threads {
        print!("\n{}", variable_length_thread_table(&rows));
    }
    super::write_plot(&args.plot, |p| crate::plot::plot_variable_length(&rows, p));
    Ok(())
}

fn parse_setup(s: &str) -> Result<Batching, String> {
    match s {
        "none" => Ok(Batching::None),
        "same-length" => Ok(Batching::SameLength),
        "padded" => Ok(Batching::Padded),
        "padded-always" => Ok(Batching::PaddedAlways),
        _ => Err(format!(
            "`{s}`: one of none, same-length, padded, padded-always"
        )),
    }
}
