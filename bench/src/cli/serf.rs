//! `weir-bench serf`: SERF's predictions against measured latency per configuration and load, or
//! with `--phases` its live parallelism switch under changing load; and how the model node's cores
//! are planned, pinned and reserved for both.

use std::path::PathBuf;

use anyhow::{anyhow, Context, Result};
use clap::Args;
use weir::profile::{available_cores, describe, measured_in, ProfileOptions};
use weir::OrtRuntime;
use weir_serf::config::Config;

use crate::serf::{plot_serf, serf_bench, serf_table, SecondProfile, SerfBenchConfig};
use crate::serf_phases::{phases_table, plot_phases, serf_phases, PhasesConfig};

#[derive(Debug, Args)]
pub(super) struct SerfBenchArgs {
    /// ONNX model (repeat to measure several; default: the zoo's squeezenet, with `--phases`
    /// its shufflenet).
    #[arg(long = "model")]
    models: Vec<PathBuf>,
    /// Requests at the highest load (lower loads get proportionally fewer).
    #[arg(long, default_value_t = 2000)]
    requests: usize,
    /// Fewest requests at any point.
    #[arg(long, default_value_t = 150)]
    min_requests: usize,
    /// Most seconds one point may take.
    #[arg(long, default_value_t = 6.0)]
    point_seconds: f64,
    /// Load levels.
    #[arg(long, default_value_t = 10)]
    loads: usize,
    /// Measured requests per profiling tuple.
    #[arg(long, default_value_t = 10)]
    samples: usize,
    /// Interleaved profiling rounds the samples are split across (each tuple keeps its median).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Where the Markdown table goes.
    #[arg(long, default_value = "benchmarks/serf/ort.md")]
    table: PathBuf,
    /// Where the plot goes.
    #[arg(long, default_value = "benchmarks/serf/ort.png")]
    plot: PathBuf,
    /// Instead: the moderate → low → moderate load run, `parallelism: auto` against every fixed
    /// configuration (first `--model` only).
    #[arg(long)]
    phases: bool,
    /// Seconds per phase (`--phases`).
    #[arg(long, default_value_t = 60.0)]
    phase_seconds: f64,
    /// Moderate load as a fraction of the largest configuration capacity (`--phases`).
    #[arg(long, default_value_t = 0.55)]
    moderate: f64,
    /// Low load, same unit (`--phases`).
    #[arg(long, default_value_t = 0.2)]
    low: f64,
    /// Moderate load in requests per second, instead of `--moderate` (`--phases`; with
    /// `--low-rate`): runs started apart then serve the same load and pool.
    #[arg(long, requires = "low_rate")]
    moderate_rate: Option<f64>,
    /// Low load in requests per second, instead of `--low` (`--phases`; with `--moderate-rate`).
    #[arg(long, requires = "moderate_rate")]
    low_rate: Option<f64>,
    /// A fixed configuration to run, as `CONCURRENCYxTHREADS` (`--phases`; repeat for several;
    /// default: every one stable at moderate load).
    #[arg(long = "fixed", value_parser = parse_fixed_config)]
    fixed: Vec<Config>,
    /// Also run the control set-up (`--phases`): `parallelism: auto` over the profile cut to the
    /// configurations with this many intra-op threads, which beside the fixed configuration it
    /// settles in measures what the `auto` machinery itself costs.
    #[arg(long)]
    control_threads: Option<usize>,
    /// Also run SERF with this utilisation cap (`--phases`; `parallelism: {auto:
    /// {max_utilisation: U}}`, 0 < U ≤ 1), in the same runs as SERF with the default cap.
    #[arg(long, value_parser = parse_utilisation)]
    also_max_utilisation: Option<f64>,
    /// Write every call of every set-up's model node to `run<R>-<set-up>.csv` in this folder
    /// (`--phases`; one line per call: when it began, how long it took, its thread's idle time
    /// before it, the configuration it ran in).
    #[arg(long)]
    calls_csv: Option<PathBuf>,
    /// Seed of the first run's arrivals; run `r` uses `seed + r` (`--phases`).
    #[arg(long, default_value_t = 11)]
    seed: u64,
    /// Seconds of moderate load served on a throwaway graph before each run's first measured
    /// set-up (`--phases`; 0: none).
    #[arg(long, default_value_t = 20.0)]
    burn_in: f64,
    /// Whether intra-op threads spin while idle, in the profile and in every graph served.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    spinning: bool,
    /// Pin session threads and intra-op workers to cores from this index of the process's CPUs
    /// on, in the profile and in every graph served (`executor.pin_cores_from`; default: the OS
    /// places them).
    #[arg(long)]
    pin_cores_from: Option<usize>,
    /// Cores the model node may use: the configurations profiled and served are those with
    /// `c·t` at most this (default: all available). With `--pin-cores-from`, a host with more
    /// cores serves the node on these alone: they are reserved for it, and the load generator and
    /// weir's own threads are kept on the rest.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    cores: Option<u16>,
    /// With `--cores` and `--pin-cores-from`: pin the node's threads but leave the process's other
    /// threads free to run on its cores too, to compare with the reservation.
    #[arg(long, requires_all = ["cores", "pin_cores_from"])]
    share_node_cores: bool,
    /// Profile bare sessions back to back (the paper's way) instead of the node's executor in a
    /// running one-node graph.
    #[arg(long)]
    bare_sessions: bool,
    /// Also profile the model again just before each configuration's loads and predict its
    /// points from that profile as well (a column beside the prediction from the profile taken
    /// once): how much of the error is the profile's age on a host whose speed drifts.
    #[arg(long, conflicts_with_all = ["phases", "spread_profile"])]
    reprofile: bool,
    /// Also take a second profile right after the first with its rounds (at least five) spread
    /// over this many seconds, and predict every point from it as well: whether a profile that
    /// samples several moments predicts better than one that catches one.
    #[arg(long, value_parser = weir::profile::parse_seconds, conflicts_with = "phases")]
    spread_profile: Option<std::time::Duration>,
    /// Also take a second profile right after the first whose tuples `(i, t)` run with `i`
    /// clients (none waiting) instead of `i + 1`, and predict every point from it as well.
    #[arg(long, conflicts_with_all = ["phases", "reprofile", "spread_profile"])]
    profile_without_queue: bool,
    /// Whole comparisons to run; the report quotes medians (`--phases`).
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// Where the phases table goes (`--phases`).
    #[arg(long, default_value = "benchmarks/serf/phases.md")]
    phases_table: PathBuf,
    /// Where the latency-over-time plot goes (`--phases`; the last run's).
    #[arg(long, default_value = "benchmarks/serf/phases.png")]
    phases_plot: PathBuf,
}

/// A utilisation cap: a number above 0 and at most 1.
fn parse_utilisation(text: &str) -> std::result::Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(u) if weir_engine::spec::AutoSpec::accepts_max_utilisation(u) => Ok(u),
        _ => Err(format!(
            "`{text}` is not a utilisation above 0 and at most 1 (e.g. 0.6)"
        )),
    }
}

/// A fixed configuration from `CONCURRENCYxTHREADS` (`2x1`: two requests at once, one intra-op
/// thread each).
fn parse_fixed_config(text: &str) -> std::result::Result<Config, String> {
    let bad = || format!("`{text}` is not CONCURRENCYxTHREADS with both at least 1 (e.g. 2x1)");
    let (c, t) = text.split_once(['x', 'X']).ok_or_else(bad)?;
    let c: usize = c.trim().parse().map_err(|_| bad())?;
    let t: usize = t.trim().parse().map_err(|_| bad())?;
    if c == 0 || t == 0 {
        return Err(bad());
    }
    Ok(Config::new(c, t))
}

/// The cores `weir-bench serf` plans the model node for: `--cores`, else the machine's.
fn node_cores(args: &SerfBenchArgs) -> usize {
    args.cores.map_or_else(available_cores, usize::from)
}

/// The machine line of the SERF benchmarks' reports: the machine's cores and, where `--cores` or
/// `--pin-cores-from` narrowed them, the node's.
fn serf_machine_line(args: &SerfBenchArgs) -> String {
    let reserved = if weir_operators::model::pinning::cpus_before_reservation().is_some() {
        "; the node's cores reserved for it, the process's other threads kept off them"
    } else {
        ""
    };
    let pinned = args
        .pin_cores_from
        .map_or_else(|| "no".to_string(), |k| format!("from core {k}{reserved}"));
    format!(
        "machine: {} cores, the model node planned for {} (threads pinned: {pinned})",
        available_cores(),
        node_cores(args)
    )
}

/// With `--cores` below the machine's and `--pin-cores-from` (and not `--share-node-cores`), the
/// node's cores are reserved before anything starts a thread; then the accuracy experiment, or
/// with `--phases` the load-phases one.
pub(super) fn run(args: SerfBenchArgs) -> Result<()> {
    if let (Some(first), Some(node), false) = (
        args.pin_cores_from,
        args.cores.map(usize::from),
        args.share_node_cores,
    ) {
        if node < available_cores() {
            // Before any runtime or session starts a thread: every later one inherits it.
            let kept = weir_operators::model::pinning::reserve_for_node(first, node)
                .context("reserving the node's cores (--cores with --pin-cores-from)")?;
            eprintln!(
                "CPUs {kept:?} reserved for the model node; the process's other threads run on the rest"
            );
        } else {
            eprintln!("the node's {node} cores are all this process has: none reserved");
        }
    }
    let paths = if args.models.is_empty() {
        // The phases run needs a model whose intra- and inter-request configurations trade
        // places with the load (see `crate::serf_phases`); on 2 cores squeezenet's do not.
        let default = if args.phases {
            "shufflenet"
        } else {
            "squeezenet"
        };
        vec![PathBuf::from(format!(".weir/zoo/{default}.onnx"))]
    } else {
        args.models.clone()
    };
    let models = paths
        .into_iter()
        .map(|p| {
            let name = p
                .file_stem()
                .map_or_else(|| "model".to_string(), |s| s.to_string_lossy().into_owned());
            (name, p)
        })
        .collect();
    if args.phases {
        return phases(&args, models);
    }
    let config = SerfBenchConfig {
        models,
        requests: args.requests,
        min_requests: args.min_requests.max(1),
        point_seconds: args.point_seconds,
        loads: args.loads.max(1),
        headroom: 0.9,
        profile: ProfileOptions {
            samples: args.samples.max(1),
            rounds: args.rounds.max(1),
            cores: node_cores(&args),
            spinning: args.spinning,
            pin_cores_from: args.pin_cores_from,
            measure_in: measured_in(args.bare_sessions),
            ..ProfileOptions::default()
        },
        second_profile: if args.reprofile {
            Some(SecondProfile::BeforeEachConfiguration)
        } else if args.profile_without_queue {
            Some(SecondProfile::WithoutQueue)
        } else {
            args.spread_profile
                .map(|over| SecondProfile::Spread { over })
        },
    };
    let load_before = super::load_average();
    let results = serf_bench(&config)?;
    let mut text = format!(
        "ONNX Runtime: {}\nmachine load average (1 min) before / after: {load_before} / {}\n{}; requests per point: {} × k/{} (at least {}, at most {} s × λ); profile: {} requests per tuple\n\n",
        OrtRuntime::get()?.build_info(),
        super::load_average(),
        serf_machine_line(&args),
        config.requests,
        config.loads,
        config.min_requests,
        config.point_seconds,
        config.profile.samples
    );
    for r in &results {
        text.push_str(&describe(&r.profile)?);
        text.push('\n');
        if let Some((
            kind @ (SecondProfile::Spread { .. } | SecondProfile::WithoutQueue),
            seconds,
        )) = &r.second_profiles
        {
            if let Some((_, second)) = seconds.first() {
                text.push_str(&format!("The second profile, {}:\n", kind.describe()));
                text.push_str(&describe(second)?);
                text.push('\n');
            }
        }
    }
    text.push_str(&serf_table(&results));
    print!("{text}");
    std::fs::write(&args.table, &text)
        .with_context(|| format!("writing {}", args.table.display()))?;
    println!("\ntable: {}", args.table.display());
    super::write_plot(&args.plot, |p| plot_serf(&results, p));
    Ok(())
}

/// `--phases`: the first model under moderate → low → moderate load; the table goes to
/// `--phases-table`, the last run's latency over time to `--phases-plot`.
fn phases(args: &SerfBenchArgs, models: Vec<(String, PathBuf)>) -> Result<()> {
    let model = models
        .into_iter()
        .next()
        .ok_or_else(|| anyhow!("no model"))?;
    let config = PhasesConfig {
        model,
        phase_seconds: args.phase_seconds.max(1.0),
        moderate: args.moderate,
        low: args.low,
        rates: args.moderate_rate.zip(args.low_rate),
        fixed: args.fixed.clone(),
        control_threads: args.control_threads,
        also_cap: args.also_max_utilisation,
        calls_dir: args.calls_csv.clone(),
        settle_seconds: 8.0,
        burn_in_seconds: args.burn_in,
        bin_seconds: 2.0,
        runs: args.runs.max(1),
        seed: args.seed,
        profile: ProfileOptions {
            samples: args.samples.max(1),
            rounds: args.rounds.max(1),
            cores: node_cores(args),
            spinning: args.spinning,
            pin_cores_from: args.pin_cores_from,
            measure_in: measured_in(args.bare_sessions),
            ..ProfileOptions::default()
        },
    };
    if let Some(dir) = &config.calls_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let load_before = super::load_average();
    let runs = serf_phases(&config)?;
    let text = format!(
        "ONNX Runtime: {}\n{}; load average (1 min) before / after: {load_before} / {}\nmodel: {} ({}); phases: {}, {} s each; arrivals seeded {} + run; intra-op spinning {}; profile: {} requests per tuple, fresh each run (SERF starts from it)\n{}",
        OrtRuntime::get()?.build_info(),
        serf_machine_line(args),
        super::load_average(),
        config.model.0,
        config.model.1.display(),
        match config.rates {
            Some((moderate, low)) => format!("moderate {moderate}/s, low {low}/s (given; a planning profile taken once before run 1 chose the fixed set-ups)"),
            None => format!("moderate {} × / low {} × the largest configuration capacity of a planning profile taken once before run 1 (10 × the runs' requests per tuple)", config.moderate, config.low),
        },
        config.phase_seconds,
        config.seed,
        if config.profile.spinning { "on" } else { "off" },
        config.profile.samples,
        phases_table(&runs)
    );
    print!("{text}");
    std::fs::write(&args.phases_table, &text)
        .with_context(|| format!("writing {}", args.phases_table.display()))?;
    println!("\ntable: {}", args.phases_table.display());
    if let Some(last) = runs.last() {
        super::write_plot(&args.phases_plot, |p| {
            plot_phases(last, config.bin_seconds, p)
        });
    }
    Ok(())
}
