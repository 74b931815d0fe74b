//! Running the experiment: the emulated executors, each set-up's graph over them, the profile
//! measured through weir, the sweep and the goodput trials.

use std::path::Path;
use std::process::Child;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use rand::rngs::StdRng;
use rand::SeedableRng;
use weir::loadgen::{run_query_load, Arrival, LoadSpec};
use weir::workload::Workload;
use weir::{load_graph, start, RuntimeOptions};
use weir_kairos::workload::BatchDist;

use super::results::{max_passing, RatePoint, RunInfo, SetupResult, Trial};
use super::setup::{pool_cost, setups, share_over_limit, Policy, Setup};
use super::types::{emulated_profile, planned_pool, EmulatedType, KairosLatency};
use super::{KairosLiveConfig, MAX_QUERY_ROWS, PROFILE_FILE, PROFILE_ROWS};
use crate::overhead::median;
use crate::process::{executor_command, free_endpoint, spawn_ready};

/// A `weir executor --emulate-latency` child, SIGKILLed when dropped.
struct EmulatedExecutor {
    child: Child,
    name: String,
    endpoint: String,
    type_idx: usize,
}

impl EmulatedExecutor {
    fn spawn(name: &str, model: &Path, ty: &EmulatedType, type_idx: usize) -> Result<Self> {
        let endpoint = free_endpoint()?;
        let child = spawn_ready(
            executor_command(name, &endpoint)?
                .arg("--model")
                .arg(format!("model={}", model.display()))
                .args(["--emulate-latency", &ty.latency.to_string()])
                .args(["--queue-capacity", "1024"]),
            name,
        )?;
        Ok(EmulatedExecutor {
            child,
            name: name.to_string(),
            endpoint,
            type_idx,
        })
    }
}

impl Drop for EmulatedExecutor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes the MLP (seeded weights) to `path` unless it is there.
fn make_model(path: &Path, hidden: usize) -> Result<()> {
    if path.is_file() {
        return Ok(());
    }
    let arch = weir_training::Architecture::Mlp {
        hidden: vec![hidden, hidden],
    };
    let model = weir_training::OnnxModel::from_proto(arch.build(64, 10)?)?;
    model.reinitialize(weir_training::Init::Xavier, &mut StdRng::seed_from_u64(7))?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    model.save(path)?;
    Ok(())
}

/// The graph of one set-up on `executors` (the first `pool[t]` of each type). Each query is one
/// job (`batching.max_size` = the largest query), and the graph admits and batches whole queries.
fn graph_yaml(
    config: &KairosLiveConfig,
    setup: &Setup,
    executors: &[EmulatedExecutor],
    model: &Path,
) -> String {
    let mut chosen = Vec::new();
    for (t, &n) in setup.pool.iter().enumerate() {
        chosen.extend(executors.iter().filter(|e| e.type_idx == t).take(n));
    }
    let mut yaml =
        "name: kairos-live\ninputs:\n  - {name: x, dtype: f32, shape: [64]}\nexecutors:\n"
            .to_string();
    for e in &chosen {
        let t = &config.types[e.type_idx];
        yaml.push_str(&format!(
            "  - {{name: {}, endpoint: \"{}\", labels: {{instance_type: {}, cost_per_hour: \"{}\"}}}}\n",
            e.name, e.endpoint, t.name, t.cost_per_hour
        ));
    }
    yaml.push_str(&format!(
        "nodes:\n  - model:\n      id: model\n      path: {}\n      inputs: {{x: x}}\n      batching: {{max_size: {MAX_QUERY_ROWS}}}\n      executor: {{timeout_ms: 10000}}\n      replicas: [{}]\n      routing: {}\noutputs:\n  - {{name: probs, from: model.probs}}\n",
        model.display(),
        chosen.iter().map(|e| e.name.as_str()).collect::<Vec<_>>().join(", "),
        setup.policy.yaml(config.qos_ms, config.kairos_latency)
    ));
    yaml
}

/// Writes and starts the graph of `setup` in `dir`, with a workload for it.
fn start_setup(
    config: &KairosLiveConfig,
    setup: &Setup,
    executors: &[EmulatedExecutor],
    model: &Path,
    dir: &Path,
) -> Result<(weir::RunningGraph, Workload)> {
    let path = dir.join("graph.yaml");
    std::fs::write(&path, graph_yaml(config, setup, executors, model))?;
    let graph = load_graph(&path).map_err(|e| anyhow!("{e}"))?;
    let workload = Workload::random(&graph.plan, 64, 3);
    let running = start(
        graph.plan,
        RuntimeOptions {
            workers: 1,
            max_in_flight: 1 << 20,
            max_ingress_batch: 2 * MAX_QUERY_ROWS,
            ..RuntimeOptions::default()
        },
    )?;
    Ok((running, workload))
}

/// Each type's mean query latency through weir (one replica of it, one query at a time: graph,
/// zenoh hop and emulated service), at each of [`PROFILE_ROWS`] rows; 8 queries per size, the
/// slowest dropped (the artifact's profiling rule).
fn measure_profile(
    config: &KairosLiveConfig,
    executors: &[EmulatedExecutor],
    model: &Path,
    dir: &Path,
) -> Result<Vec<Vec<f64>>> {
    let mut measured = Vec::new();
    for t in 0..config.types.len() {
        let mut pool = vec![0; config.types.len()];
        pool[t] = 1;
        let setup = Setup {
            pool_label: config.types[t].name.clone(),
            pool,
            policy: Policy::LeastOutstanding,
        };
        let (running, workload) = start_setup(config, &setup, executors, model, dir)?;
        let mut row = Vec::new();
        for &n in &PROFILE_ROWS {
            let spec = LoadSpec {
                requests: 1,
                warmup: 0,
                arrival: Arrival::Closed { concurrency: 1 },
                seed: 0,
                label_output: None,
                progress: false,
            };
            let mut ms: Vec<f64> = (0..8)
                .map(|_| run_query_load(running.runtime(), &workload, &spec, &[n]).latency_ms(0.5))
                .collect();
            ms.sort_by(f64::total_cmp);
            ms.pop();
            row.push(ms.iter().sum::<f64>() / ms.len() as f64);
        }
        running.shutdown();
        measured.push(row);
    }
    Ok(measured)
}

/// One set-up: the sweep, the goodput runs and each type's job share.
fn run_setup(
    config: &KairosLiveConfig,
    setup: &Setup,
    executors: &[EmulatedExecutor],
    model: &Path,
    dir: &Path,
) -> Result<SetupResult> {
    let (running, workload) = start_setup(config, setup, executors, model, dir)?;
    let pids: Vec<u32> = std::iter::once(std::process::id())
        .chain(executors.iter().map(|e| e.child.id()))
        .collect();
    let cpu_now = || {
        pids.iter()
            .map(|&p| crate::process::cpu_seconds(p))
            .sum::<f64>()
    };
    let qos_us = (config.qos_ms * 1000.0) as u64;
    let mut queries_sent = 0usize;
    let mut trial_index = 0u64;
    let mut trial = |rate: f64| -> Trial {
        trial_index += 1;
        let queries = config.queries_at(rate);
        let warmup = 20;
        // Trial k of every set-up draws the same query sizes and arrival times.
        let sizes: Vec<usize> = BatchDist::Trace
            .sample_many(warmup + queries, trial_index)
            .into_iter()
            .map(|b| b as usize)
            .collect();
        let cpu_before = cpu_now();
        let report = run_query_load(
            running.runtime(),
            &workload,
            &LoadSpec {
                requests: queries,
                warmup,
                arrival: Arrival::Poisson { rate },
                seed: trial_index,
                label_output: None,
                progress: false,
            },
            &sizes,
        );
        let cpu = cpu_now() - cpu_before;
        queries_sent += warmup + queries;
        let within = report.latency_us.count_between(0, qos_us);
        std::thread::sleep(Duration::from_millis(200));
        Trial {
            p50_ms: report.latency_ms(0.5),
            p99_ms: if report.ok > 0 {
                report.latency_ms(0.99)
            } else {
                f64::INFINITY
            },
            errors: report.sent - report.ok,
            goodput: within as f64 / report.elapsed.as_secs_f64().max(1e-9),
            cpu_cores: cpu / report.elapsed.as_secs_f64().max(1e-9),
        }
    };
    let trials = config.trials.max(1);
    let mut points = Vec::new();
    let mut misses = 0;
    for rate in config.rates() {
        let point = RatePoint {
            rate,
            trials: (0..trials).map(|_| trial(rate)).collect(),
        };
        let p99s: Vec<String> = point
            .trials
            .iter()
            .map(|t| format!("{:.1}", t.judged_p99()))
            .collect();
        eprintln!(
            "  {:<40} {:>6.1} q/s: median p99 {:>7.1} ms (trials {}), CPU {:.2} cores",
            setup.label(),
            rate,
            point.median_p99(),
            p99s.join(", "),
            median(point.trials.iter().map(|t| t.cpu_cores).collect())
        );
        let met = point.median_p99() <= config.qos_ms;
        points.push(point);
        misses = if met { 0 } else { misses + 1 };
        if misses == 2 {
            break;
        }
    }
    let goodput: Vec<Trial> = (0..trials).map(|_| trial(config.goodput_rate)).collect();
    eprintln!(
        "  {:<40} goodput at {} q/s offered: {}",
        setup.label(),
        config.goodput_rate,
        goodput
            .iter()
            .map(|t| format!("{:.1}", t.goodput))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let states = running
        .replica_pools()
        .into_iter()
        .next()
        .map(|(_, p)| p.replica_states())
        .unwrap_or_default();
    running.shutdown();
    let mut share = vec![0.0; config.types.len()];
    let total: u64 = states.iter().map(|s| s.3).sum();
    for (name, _, _, dispatched) in &states {
        if let Some(e) = executors.iter().find(|e| &e.name == name) {
            share[e.type_idx] += *dispatched as f64 / total.max(1) as f64;
        }
    }
    Ok(SetupResult {
        setup: setup.clone(),
        cost_per_hour: pool_cost(config, &setup.pool),
        max_rate: max_passing(&points, config.qos_ms, None),
        max_rate_per_trial: (0..trials)
            .map(|k| max_passing(&points, config.qos_ms, Some(k)))
            .collect(),
        points,
        goodput,
        type_share: share,
        jobs_per_query: total as f64 / queries_sent.max(1) as f64,
    })
}

/// Real ONNX Runtime time of one call of the served model, median of 20, at each of `rows` (what
/// the emulated latencies must dominate).
///
/// # Errors
/// When the runtime or the model cannot be loaded, or a call fails.
pub fn real_call_ms(model: &Path, rows: &[usize]) -> Result<Vec<(usize, f64)>> {
    let runtime = weir_operators::model::OrtRuntime::get()?;
    let mut session = runtime.session("kairos-live", model, 1, false)?;
    let (input, _) = crate::overhead::model_input(model)?;
    rows.iter()
        .map(|&n| {
            let data = vec![0.5f32; n * 64];
            let mut times = Vec::new();
            for _ in 0..23 {
                let t = std::time::Instant::now();
                let value = ort::value::TensorRef::from_array_view(([n, 64usize], &data[..]))?;
                drop(session.run(vec![(input.as_str(), value)])?);
                times.push(t.elapsed().as_secs_f64() * 1e3);
            }
            Ok((n, median(times.split_off(3))))
        })
        .collect()
}

/// Runs the experiment.
///
/// # Errors
/// When the model cannot be written, an executor does not start, or a graph fails.
pub fn kairos_live(config: &KairosLiveConfig, model: &Path) -> Result<(Vec<SetupResult>, RunInfo)> {
    let profile = emulated_profile(&config.types, config.qos_ms, |t, n| {
        config.types[t].latency_ms(n)
    })?;
    let (hetero, planned) = match &config.hetero {
        Some(h) => (h.clone(), false),
        None => (planned_pool(&profile, config.budget_per_hour)?, true),
    };
    if hetero.len() != config.types.len() {
        bail!("the heterogeneous pool needs one count per type");
    }
    let cost = pool_cost(config, &hetero);
    if cost > config.budget_per_hour + 1e-9 {
        bail!(
            "the heterogeneous pool costs ${cost:.2}/h, over the ${:.2}/h budget",
            config.budget_per_hour
        );
    }
    make_model(model, config.hidden)?;
    let model =
        &std::fs::canonicalize(model).with_context(|| format!("model {}", model.display()))?;
    let sizes: Vec<usize> = BatchDist::Trace
        .sample_many(10_000, 2023)
        .into_iter()
        .map(|b| b as usize)
        .collect();
    let mut info = RunInfo {
        planned,
        over_limit: config
            .types
            .iter()
            .map(|t| share_over_limit(t, config.qos_ms, &sizes))
            .collect(),
        real_call_ms: real_call_ms(model, &[10, 240, MAX_QUERY_ROWS])?,
        hetero: hetero.clone(),
        measured_ms: Vec::new(),
    };
    eprintln!(
        "heterogeneous pool {:?} ({}); real inference per call: {}",
        hetero,
        if planned { "weir plan's pick" } else { "given" },
        info.real_call_ms
            .iter()
            .map(|(n, ms)| format!("{n} rows {ms:.3} ms"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let setups = setups(config, &hetero);
    let mut executors = Vec::new();
    for (t, ty) in config.types.iter().enumerate() {
        let n = setups.iter().map(|s| s.pool[t]).max().unwrap_or(0);
        for i in 0..n {
            let name = format!("{}-{i}", ty.name.replace('.', "-"));
            executors.push(EmulatedExecutor::spawn(&name, model, ty, t)?);
        }
    }
    let dir = std::env::temp_dir().join(format!("weir-bench-kairos-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    info.measured_ms = measure_profile(config, &executors, model, &dir)?;
    let given = match config.kairos_latency {
        KairosLatency::Measured => {
            let measured = &info.measured_ms;
            emulated_profile(&config.types, config.qos_ms, |t, n| {
                let i = PROFILE_ROWS.iter().position(|&r| r == n).unwrap_or(0);
                measured[t][i]
            })?
        }
        KairosLatency::Nominal | KairosLatency::Learned => profile,
    };
    eprintln!(
        "Kairos profile ({:?}):\n{}",
        config.kairos_latency,
        given.to_yaml()
    );
    std::fs::write(dir.join(PROFILE_FILE), given.to_yaml())?;
    let mut results = Vec::new();
    for setup in &setups {
        let r = run_setup(config, setup, &executors, model, &dir)?;
        eprintln!(
            "{:<42} max {:>6.1} q/s (per trial {:?}), goodput {:.1} q/s",
            setup.label(),
            r.max_rate,
            r.max_rate_per_trial,
            r.median_goodput()
        );
        results.push(r);
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok((results, info))
}
