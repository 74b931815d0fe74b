//! `weir-bench parm-decode`: ParM against equal resources, per decode rule and r, with and without
//! a straggler, on the digits MLP.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::{Args, ValueEnum};

use crate::parm::decode::{parm_decode, parm_decode_table, DecodeBenchConfig};
use crate::parm::Straggler;
use crate::plot::plot_parm_decode;

/// What the straggler does to replica `e0`.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum StragglerKind {
    /// Its link is `--delay-ms` slower each way for `--slow-ms` of every `--period-ms`.
    SlowLink,
    /// Its host is frozen (SIGSTOP) for `--slow-ms` of every `--period-ms`.
    Freeze,
}

#[derive(Debug, Args)]
pub(super) struct DecodeArgs {
    /// The deployed model.
    #[arg(long, default_value = ".weir/models/digits_mlp.onnx")]
    model: PathBuf,
    /// Its k = 2 parity models, in index order (comma-separated): the first serves r = 1, the
    /// first two r = 2.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = ".weir/models/digits_mlp_parity_k2.onnx,.weir/models/digits_mlp_parity_k2_t1.onnx"
    )]
    parity_models: Vec<PathBuf>,
    /// The labelled data set.
    #[arg(long, default_value = ".weir/models/digits_test.csv")]
    dataset: PathBuf,
    /// Decode rules of the r = 1 set-ups (comma-separated `decode.after` values).
    #[arg(long, value_delimiter = ',', default_value = "first_available,p99")]
    rules: Vec<String>,
    /// Decode rule of the r = 2 set-up.
    #[arg(long, default_value = "p99")]
    r2_rule: String,
    /// Leave out the r = 2 set-up.
    #[arg(long)]
    no_r2: bool,
    /// Poisson arrivals per second.
    #[arg(long, default_value_t = 200.0)]
    rate: f64,
    /// Measured requests per set-up and repeat.
    #[arg(long, default_value_t = 2000)]
    requests: usize,
    /// Warm-up requests before them.
    #[arg(long, default_value_t = 200)]
    warmup: usize,
    /// Repeats of every set-up (the table shows medians).
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// What the straggler does.
    #[arg(long, value_enum, default_value_t = StragglerKind::SlowLink)]
    straggler: StragglerKind,
    /// Latency the slow link adds each way, ms.
    #[arg(long, default_value_t = 50)]
    delay_ms: u64,
    /// How long each slow spell (or freeze) lasts, ms.
    #[arg(long, default_value_t = 200)]
    slow_ms: u64,
    /// Time from one spell to the next, ms.
    #[arg(long, default_value_t = 1000)]
    period_ms: u64,
    /// Where the PNG plot goes.
    #[arg(long, default_value = "benchmarks/parm_decode/parm_decode.png")]
    plot: PathBuf,
}

pub(super) fn run(args: DecodeArgs) -> Result<()> {
    if args.period_ms <= args.slow_ms {
        bail!(
            "--period-ms {} must be longer than --slow-ms {}",
            args.period_ms,
            args.slow_ms
        );
    }
    let (slow, period) = (
        Duration::from_millis(args.slow_ms),
        Duration::from_millis(args.period_ms),
    );
    let straggler = match args.straggler {
        StragglerKind::SlowLink => Straggler::SlowLink {
            delay: Duration::from_millis(args.delay_ms),
            slow,
            period,
        },
        StragglerKind::Freeze => Straggler::Freeze {
            freeze: slow,
            period,
        },
    };
    let config = DecodeBenchConfig {
        model: args.model,
        parity_models: args.parity_models,
        dataset: args.dataset,
        rules: args.rules,
        r2_rule: (!args.no_r2).then_some(args.r2_rule),
        rate: args.rate,
        requests: args.requests,
        warmup: args.warmup,
        repeats: args.repeats,
        straggler,
    };
    let rows = parm_decode(&config)?;
    super::print_machine(Some(format!("load average {}", super::load_average())))?;
    print!("{}", parm_decode_table(&rows, &config));
    super::write_plot(&args.plot, |p| plot_parm_decode(&rows, p));
    Ok(())
}
