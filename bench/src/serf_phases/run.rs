//! Running the comparison: per run, a fresh profile, the burn-in, then every set-up on a fresh
//! one-node graph driven with the same arrivals, the configuration in force and the machine's
//! counters sampled as it serves.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use crossbeam_channel::unbounded;
use weir::loadgen::{run_load, Arrival, LoadSpec};
use weir::profile::{profile_node, profile_path, ProfileOptions};
use weir::workload::Workload;
use weir::{plan_spec, start, RunningGraph, RuntimeOptions};
use weir_engine::spec::{
    AutoSpec, ExecutorSpec, FixedParallelism, GraphSpec, ModelBuilder, ParallelismSpec,
};
use weir_serf::config::Config;
use weir_serf::profile::Profile;

use super::plan::{
    run_order, schedule, with_threads_only, Plan, PLANNING_ROUNDS, PLANNING_SAMPLES_FACTOR,
};
use super::runs::{write_call_trace, PhasesRun, SetupRun, TracedCall};
use super::{PhasesConfig, Setup, NODE};
use crate::conditions::Probe;
use crate::serf::request_signature;

/// A one-node graph of `path` under `setup` with `executor`'s spinning and pinning; for SERF,
/// `profile` is written next to it first.
fn setup_graph(
    path: &Path,
    setup: Setup,
    profile: &Profile,
    dir: &Path,
    executor: ExecutorSpec,
) -> Result<(RunningGraph, Workload)> {
    let (input, dtype, shape, output) = request_signature(path)?;
    let parallelism = match setup {
        Setup::Serf => {
            profile.save(&profile_path(&dir.join("graph.yaml"), NODE))?;
            ParallelismSpec::Auto(AutoSpec::default())
        }
        Setup::SerfThreads(threads) => {
            with_threads_only(profile, threads)?
                .save(&profile_path(&dir.join("graph.yaml"), NODE))?;
            ParallelismSpec::Auto(AutoSpec::default())
        }
        Setup::SerfCapped(permille) => {
            profile.save(&profile_path(&dir.join("graph.yaml"), NODE))?;
            ParallelismSpec::Auto(AutoSpec {
                max_utilisation: Some(f64::from(permille) / 1000.0),
            })
        }
        Setup::Fixed(c) => ParallelismSpec::Fixed(FixedParallelism {
            concurrency: c.concurrency,
            threads: c.threads,
        }),
    };
    let absolute =
        std::fs::canonicalize(path).with_context(|| format!("finding {}", path.display()))?;
    let spec = GraphSpec::builder("serf_phases")
        .input("x", dtype, &shape)
        .model(
            ModelBuilder::new(NODE, &absolute)
                .input(&input.name, "x")
                .executor(executor)
                .parallelism(parallelism),
        )
        .output("y", &format!("model.{}", output.name))
        .build();
    let graph = plan_spec(&spec, dir).map_err(|d| anyhow!("{d}"))?;
    let workload = Workload::random(&graph.plan, 1, 7);
    Ok((start(graph.plan, RuntimeOptions::default())?, workload))
}

/// Sends `times` open-loop (each at its scheduled instant) and collects every latency; for SERF,
/// samples the configuration in force every 50 ms. The machine's and executor's counters are read
/// at the start, at each of `phase_starts` after the first (seconds) and at the end.
fn drive(
    graph: &RunningGraph,
    workload: &Workload,
    times: &[f64],
    setup: Setup,
    phase_starts: &[f64],
    keep_calls: bool,
) -> SetupRun {
    let runtime = graph.runtime();
    let (tx, rx) = unbounded::<(usize, f64, bool)>();
    let started = Instant::now();
    let mut configs = Vec::new();
    let current = |g: &RunningGraph| {
        g.parallelism_stats()
            .first()
            .map(|(_, p)| Config::new(p.concurrency, p.threads))
    };
    if let (true, Some(c)) = (setup.is_auto(), current(graph)) {
        configs.push((0.0, c));
    }
    let probe = Probe::start(graph);
    let call_log = keep_calls.then(|| graph.executor_load(NODE)).flatten();
    if let Some(load) = &call_log {
        load.record_calls();
    }
    let mut boundary_probes = Vec::new();
    let sent_all = Arc::new(std::sync::atomic::AtomicBool::new(false));
    std::thread::scope(|s| {
        let boundaries = s.spawn(|| {
            let mut probes = Vec::new();
            for &at in phase_starts.iter().skip(1) {
                let due = started + Duration::from_secs_f64(at);
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
                probes.push(Probe::start(graph));
            }
            probes
        });
        let sent = Arc::clone(&sent_all);
        s.spawn(move || {
            for (i, &t) in times.iter().enumerate() {
                let scheduled = started + Duration::from_secs_f64(t);
                let now = Instant::now();
                if scheduled > now {
                    std::thread::sleep(scheduled - now);
                }
                let tx2 = tx.clone();
                let submitted = runtime.submit(
                    workload.item(i).inputs,
                    Box::new(move |r| {
                        let _ = tx2.send((i, scheduled.elapsed().as_secs_f64() * 1e3, r.is_ok()));
                    }),
                );
                if submitted.is_err() {
                    let _ = tx.send((i, scheduled.elapsed().as_secs_f64() * 1e3, false));
                }
            }
            sent.store(true, std::sync::atomic::Ordering::Release);
        });
        if setup.is_auto() {
            while !sent_all.load(std::sync::atomic::Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(50));
                if let Some(c) = current(graph) {
                    if configs.last().is_none_or(|(_, last)| *last != c) {
                        configs.push((started.elapsed().as_secs_f64(), c));
                    }
                }
            }
        }
        boundary_probes = boundaries.join().unwrap_or_default();
    });
    let mut answers: Vec<Option<f64>> = vec![None; times.len()];
    for _ in 0..times.len() {
        match rx.recv_timeout(Duration::from_secs(120)) {
            Ok((i, ms, ok)) => answers[i] = ok.then_some(ms),
            Err(_) => break,
        }
    }
    let last = Probe::start(graph);
    let calls = call_log.map_or_else(Vec::new, |load| {
        load.take_calls()
            .calls
            .iter()
            .map(|c| TracedCall {
                began_s: c
                    .ended_at
                    .saturating_duration_since(started)
                    .saturating_sub(c.duration)
                    .as_secs_f64(),
                ms: c.duration.as_secs_f64() * 1e3,
                idle_before_ms: c.idle_before.map(|d| d.as_secs_f64() * 1e3),
            })
            .collect()
    });
    let conditions = probe.until(last);
    let probes: Vec<Probe> = std::iter::once(probe)
        .chain(boundary_probes)
        .chain(std::iter::once(last))
        .collect();
    let phase_conditions = probes.windows(2).map(|w| w[0].until(w[1])).collect();
    let mut latencies = Vec::with_capacity(times.len());
    let mut failed = Vec::new();
    for (&t, answer) in times.iter().zip(answers) {
        match answer {
            Some(ms) => latencies.push((t, ms)),
            None => failed.push(t),
        }
    }
    let serf = if setup.is_auto() {
        graph.parallelism_stats().first().map(|(_, p)| p.clone())
    } else {
        None
    };
    SetupRun {
        setup,
        latencies,
        failed,
        configs,
        serf,
        conditions,
        calls,
        phase_conditions,
    }
}

/// One comparison: profile (SERF starts from this run's own profile, as a deployed `auto` node
/// would), serve `plan`'s phases with SERF and every fixed configuration it lists.
fn run_once(config: &PhasesConfig, run: usize, plan: &Plan) -> Result<PhasesRun> {
    let (name, path) = &config.model;
    let profile = profile_node(name, path, &config.profile)?;
    let Plan {
        moderate,
        low,
        setups,
        skipped,
        left_out,
        widest,
    } = plan;
    let len = config.phase_seconds;
    let rates = [(*moderate, len), (*low, len), (*moderate, len)];
    let phases: Vec<(f64, f64, f64)> = rates
        .iter()
        .enumerate()
        .map(|(i, &(rate, l))| (rate, i as f64 * l, (i + 1) as f64 * l))
        .collect();
    let phase_starts: Vec<f64> = phases.iter().map(|p| p.1).collect();
    let times = schedule(&rates, config.seed + run as u64);
    eprintln!(
        "run {}: moderate {moderate:.1}/s, low {low:.1}/s, {len} s each, {} requests per set-up",
        run + 1,
        times.len()
    );
    for (c, utilisation) in skipped {
        eprintln!(
            "run {}: skipping fixed {c}: utilisation {utilisation:.2} at moderate load",
            run + 1
        );
    }
    let dir = std::env::temp_dir().join(format!("weir-serf-phases-{}-{run}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    if let Some(widest) = *widest {
        burn_in(config, widest, &profile, &times, &dir, run)?;
    }
    let order = run_order(setups.len(), run);
    let mut results: Vec<Option<SetupRun>> = vec![None; setups.len()];
    for &index in &order {
        let setup = setups[index];
        let r = serve(config, setup, &profile, &dir, (&times, &phase_starts))?;
        eprintln!(
            "run {}: {setup}: mean {:.2} ms over {} answered requests, {} failed{}",
            run + 1,
            r.mean_between(0.0, f64::INFINITY),
            r.latencies.len(),
            r.failed.len(),
            if r.configs.is_empty() {
                String::new()
            } else {
                format!(
                    ", configurations {}",
                    r.config_timeline(|t, c| format!("{c}@{t:.1}s"))
                )
            }
        );
        if let Some(calls_dir) = &config.calls_dir {
            let file = calls_dir.join(format!("run{}-{}.csv", run + 1, setup.slug()));
            write_call_trace(&r, &file)?;
        }
        results[index] = Some(r);
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(PhasesRun {
        profile,
        phases,
        setups: results.into_iter().flatten().collect(),
        order,
        settle_seconds: config.settle_seconds,
        skipped: skipped.clone(),
        left_out: left_out.clone(),
    })
}

/// Serves `times` with `setup` on a fresh graph, warmed up first and shut down after; the
/// conditions are read per phase of `phase_starts` (seconds).
fn serve(
    config: &PhasesConfig,
    setup: Setup,
    profile: &Profile,
    dir: &Path,
    (times, phase_starts): (&[f64], &[f64]),
) -> Result<SetupRun> {
    let (graph, workload) = setup_graph(
        &config.model.1,
        setup,
        profile,
        dir,
        config.profile.executor(),
    )?;
    let warm = graph_warmup(&graph, &workload);
    let r = drive(
        &graph,
        &workload,
        times,
        setup,
        phase_starts,
        config.calls_dir.is_some(),
    );
    graph.shutdown();
    warm?;
    Ok(r)
}

/// Serves the first [`PhasesConfig::burn_in_seconds`] of `times` on a throwaway graph of
/// `widest` (the profile's largest-capacity configuration) and discards the latencies.
fn burn_in(
    config: &PhasesConfig,
    widest: Config,
    profile: &Profile,
    times: &[f64],
    dir: &Path,
    run: usize,
) -> Result<()> {
    let head: Vec<f64> = times
        .iter()
        .copied()
        .take_while(|t| *t < config.burn_in_seconds)
        .collect();
    if head.is_empty() {
        return Ok(());
    }
    let setup = Setup::Fixed(widest);
    let r = serve(config, setup, profile, dir, (&head, &[]))?;
    eprintln!(
        "run {}: burn-in ({setup}, {:.0} s, discarded): mean {:.2} ms over {} requests",
        run + 1,
        config.burn_in_seconds,
        r.mean_between(0.0, f64::INFINITY),
        r.latencies.len()
    );
    Ok(())
}

fn graph_warmup(graph: &RunningGraph, workload: &Workload) -> Result<()> {
    let report = run_load(
        graph.runtime(),
        workload,
        &LoadSpec {
            requests: 20,
            warmup: 0,
            arrival: Arrival::Closed { concurrency: 2 },
            seed: 0,
            label_output: None,
            progress: false,
        },
    );
    if report.error_count() > 0 {
        return Err(anyhow!("warm-up failed: {:?}", report.errors));
    }
    Ok(())
}

/// Runs [`PhasesConfig::runs`] comparisons.
///
/// # Errors
/// When the model cannot be profiled or served. Failed requests are recorded, not errors.
pub fn serf_phases(config: &PhasesConfig) -> Result<Vec<PhasesRun>> {
    let (name, path) = &config.model;
    let planning = ProfileOptions {
        samples: config.profile.samples * PLANNING_SAMPLES_FACTOR,
        rounds: PLANNING_ROUNDS,
        ..config.profile
    };
    eprintln!(
        "planning profile ({} requests per tuple):",
        planning.samples
    );
    let plan = Plan::from_profile(config, &profile_node(name, path, &planning)?)?;
    (0..config.runs.max(1))
        .map(|r| run_once(config, r, &plan))
        .collect()
}
