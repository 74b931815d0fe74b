//! The remote-executor experiment: what running a model node on a `weir executor` process over
//! zenoh costs against running it in-process, and how fast a SIGKILLed executor's work moves.
//!
//! Part 1: the same graph (one model node, `instances × 1` thread) runs with its node in-process
//! and on one executor process on loopback, taking turns repeat by repeat; closed-loop load at
//! each concurrency; medians of throughput and latency, remote/in-process as ratios.
//!
//! Part 2: three executors serve the node; under closed-loop load one is SIGKILLed. Measured from
//! the kill: when the graph sees its liveliness token go (detection), and when the first of its
//! in-flight jobs is re-dispatched to a live replica. Every request must still be answered.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use crate::overhead::{first_input_output, median};
use crate::process::{free_endpoint, ExecutorProcess};
use weir::loadgen::{run_load, Arrival, LoadReport, LoadSpec};
use weir::workload::Workload;
use weir::{load_graph, start, RunningGraph, RuntimeOptions};

/// The experiment's settings.
#[derive(Debug, Clone)]
pub struct RemoteBenchConfig {
    /// The model (one f32 input).
    pub model: PathBuf,
    /// Sessions per executor (and in-process).
    pub instances: usize,
    /// Closed-loop concurrencies to measure.
    pub concurrency: Vec<usize>,
    /// Requests per measurement.
    pub requests: usize,
    /// Repeats per side and concurrency; medians are reported.
    pub repeats: usize,
    /// SIGKILLs in part 2.
    pub kills: usize,
}

/// Part 1's result at one concurrency.
#[derive(Debug, Clone)]
pub struct RemoteRow {
    /// Closed-loop clients.
    pub concurrency: usize,
    /// In-process: requests per second, p50 and p99 in ms.
    pub local: (f64, f64, f64),
    /// Remote executor: the same.
    pub remote: (f64, f64, f64),
}

/// Part 2's medians.
#[derive(Debug, Clone)]
pub struct FailoverResult {
    /// Kills measured.
    pub kills: usize,
    /// Kill → liveliness lost, ms (median, max).
    pub detect_ms: (f64, f64),
    /// Kill → first re-dispatch, ms (median, max).
    pub redispatch_ms: (f64, f64),
    /// Requests answered with an error over every run (must be 0).
    pub errors: usize,
    /// Requests sent over every run.
    pub requests: usize,
    /// Largest latency of any request over every run, ms.
    pub max_latency_ms: f64,
}

/// Writes a one-node graph on `replicas` (`local` or executor names at `endpoints`).
fn graph_file(config: &RemoteBenchConfig, endpoints: &[String], tag: &str) -> Result<PathBuf> {
    one_node_graph(&config.model, config.instances, endpoints, false, "", tag)
}

/// Writes a one-node graph of `file` (`instances` sessions per replica) on the executors at
/// `endpoints` (named `e0`, `e1`, ...) plus an in-process replica when `local` (or only in-process
/// when there are no endpoints), with `extra` YAML lines appended to the model node.
pub(crate) fn one_node_graph(
    file: &Path,
    instances: usize,
    endpoints: &[String],
    local: bool,
    extra: &str,
    tag: &str,
) -> Result<PathBuf> {
    let model = std::fs::canonicalize(file).with_context(|| format!("model {}", file.display()))?;
    let (input, output) = first_input_output(&model)?;
    let shape: Vec<String> = input.dims[1..]
        .iter()
        .map(|d| match d {
            weir_engine::tensor::Dim::Fixed(n) => n.to_string(),
            weir_engine::tensor::Dim::Dynamic => "1".into(),
        })
        .collect();
    let mut yaml = format!(
        "name: remote-bench\ninputs:\n  - {{name: x, dtype: f32, shape: [{}]}}\n",
        shape.join(", ")
    );
    let mut replicas: Vec<String> = Vec::new();
    if local || endpoints.is_empty() {
        replicas.push("local".into());
    }
    if !endpoints.is_empty() {
        yaml.push_str("executors:\n");
        for (i, e) in endpoints.iter().enumerate() {
            yaml.push_str(&format!("  - {{name: e{i}, endpoint: \"{e}\"}}\n"));
            replicas.push(format!("e{i}"));
        }
    }
    yaml.push_str(&format!(
        "nodes:\n  - model:\n      id: model\n      path: {}\n      inputs: {{{}: x}}\n      executor: {{instances: {}, timeout_ms: 5000}}\n      replicas: [{}]\n{extra}outputs:\n  - {{name: y, from: model.{}}}\n",
        model.display(),
        input.name,
        instances,
        replicas.join(", "),
        output.name
    ));
    let path = std::env::temp_dir().join(format!("weir-bench-{tag}-{}.yaml", std::process::id()));
    std::fs::write(&path, yaml)?;
    Ok(path)
}

pub(crate) fn start_graph(path: &Path) -> Result<(RunningGraph, Workload)> {
    let graph = load_graph(path).map_err(|e| anyhow!("{e}"))?;
    let workload = Workload::random(&graph.plan, 8, 7);
    let running = start(graph.plan, RuntimeOptions::default())?;
    Ok((running, workload))
}

fn load(
    running: &RunningGraph,
    workload: &Workload,
    concurrency: usize,
    requests: usize,
) -> LoadReport {
    run_load(
        running.runtime(),
        workload,
        &LoadSpec {
            requests,
            warmup: concurrency * 2,
            arrival: Arrival::Closed { concurrency },
            seed: 1,
            label_output: None,
            progress: false,
        },
    )
}

/// Part 1: remote against in-process.
pub fn remote_overhead(config: &RemoteBenchConfig) -> Result<Vec<RemoteRow>> {
    let endpoint = free_endpoint()?;
    let _executor = ExecutorProcess::spawn(
        "e0",
        &endpoint,
        &[("model", &config.model)],
        config.instances,
    )?;
    let local_path = graph_file(config, &[], "local")?;
    let remote_path = graph_file(config, std::slice::from_ref(&endpoint), "remote")?;
    let (local, local_work) = start_graph(&local_path)?;
    let (remote, remote_work) = start_graph(&remote_path)?;
    let mut rows = Vec::new();
    for &c in &config.concurrency {
        let mut l = (Vec::new(), Vec::new(), Vec::new());
        let mut r = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..config.repeats.max(1) {
            for (graph, work, acc) in [
                (&local, &local_work, &mut l),
                (&remote, &remote_work, &mut r),
            ] {
                let rep = load(graph, work, c, config.requests);
                if rep.error_count() > 0 {
                    bail!("{} errors at concurrency {c}", rep.error_count());
                }
                acc.0.push(rep.throughput());
                acc.1.push(rep.latency_ms(0.5));
                acc.2.push(rep.latency_ms(0.99));
            }
        }
        let m = |v: (Vec<f64>, Vec<f64>, Vec<f64>)| (median(v.0), median(v.1), median(v.2));
        rows.push(RemoteRow {
            concurrency: c,
            local: m(l),
            remote: m(r),
        });
    }
    local.shutdown();
    remote.shutdown();
    let _ = std::fs::remove_file(local_path);
    let _ = std::fs::remove_file(remote_path);
    Ok(rows)
}

/// Part 2: SIGKILL one of three executors under load, `config.kills` times.
pub fn failover(config: &RemoteBenchConfig) -> Result<FailoverResult> {
    let endpoints: Vec<String> = (0..3).map(|_| free_endpoint()).collect::<Result<_>>()?;
    let mut executors = endpoints
        .iter()
        .enumerate()
        .map(|(i, e)| ExecutorProcess::spawn(&format!("e{i}"), e, &[("model", &config.model)], 1))
        .collect::<Result<Vec<_>>>()?;
    let path = graph_file(config, &endpoints, "failover")?;
    let (running, workload) = start_graph(&path)?;
    let pool = running
        .replica_pools()
        .into_iter()
        .next()
        .ok_or_else(|| anyhow!("no replica pool"))?
        .1;
    let (mut detect, mut redispatch) = (Vec::new(), Vec::new());
    let (mut errors, mut requests, mut max_latency) = (0, 0, 0.0f64);
    for k in 0..config.kills {
        let victim = k % executors.len();
        let before = pool.stats().redispatched;
        let outcome = std::thread::scope(|s| -> Result<(f64, f64)> {
            let loader = s.spawn(|| load(&running, &workload, 6, config.requests));
            std::thread::sleep(Duration::from_millis(800));
            let killed = Instant::now();
            executors[victim].kill();
            let (mut seen_dead, mut seen_move) = (None, None);
            while (seen_dead.is_none() || seen_move.is_none())
                && killed.elapsed() < Duration::from_secs(10)
            {
                if seen_dead.is_none() && !pool.replica_states()[victim].1 {
                    seen_dead = Some(killed.elapsed());
                }
                if seen_move.is_none() && pool.stats().redispatched > before {
                    seen_move = Some(killed.elapsed());
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            let rep = loader.join().map_err(|_| anyhow!("load thread panicked"))?;
            errors += rep.error_count();
            requests += rep.sent;
            max_latency = max_latency.max(rep.latency_ms(1.0));
            let ms = |d: Option<Duration>| d.map_or(f64::NAN, |d| d.as_secs_f64() * 1e3);
            Ok((ms(seen_dead), ms(seen_move)))
        })?;
        detect.push(outcome.0);
        redispatch.push(outcome.1);
        executors[victim] = ExecutorProcess::spawn(
            &format!("e{victim}"),
            &endpoints[victim],
            &[("model", &config.model)],
            1,
        )?;
        let deadline = Instant::now() + Duration::from_secs(20);
        while !pool.replica_states()[victim].1 {
            if Instant::now() > deadline {
                bail!("e{victim} did not come back");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    running.shutdown();
    let _ = std::fs::remove_file(path);
    let max = |v: &[f64]| v.iter().copied().fold(f64::NAN, f64::max);
    Ok(FailoverResult {
        kills: config.kills,
        detect_ms: (median(detect.clone()), max(&detect)),
        redispatch_ms: (median(redispatch.clone()), max(&redispatch)),
        errors,
        requests,
        max_latency_ms: max_latency,
    })
}

/// The report: the overhead table, and the failover line where there was a failover part.
pub fn remote_table(
    rows: &[RemoteRow],
    failover: Option<&FailoverResult>,
    config: &RemoteBenchConfig,
) -> String {
    let mut s = format!(
        "model {} ({} session(s) × 1 thread), {} requests per measurement, median of {} repeats\n\n",
        crate::overhead::model_file_name(&config.model),
        config.instances,
        config.requests,
        config.repeats
    );
    s.push_str("| clients | in-process req/s | remote req/s | ratio | in-process p50 ms | remote p50 ms | in-process p99 ms | remote p99 ms |\n|---|---|---|---|---|---|---|---|\n");
    for r in rows {
        s.push_str(&format!(
            "| {} | {:.1} | {:.1} | {:.3} | {:.2} | {:.2} | {:.2} | {:.2} |\n",
            r.concurrency,
            r.local.0,
            r.remote.0,
            r.remote.0 / r.local.0.max(1e-9),
            r.local.1,
            r.remote.1,
            r.local.2,
            r.remote.2
        ));
    }
    let Some(failover) = failover else {
        return s;
    };
    s.push_str(&format!(
        "\nSIGKILL of one of three executors under 6 closed-loop clients, {} kills: \
         kill → liveliness lost {:.1} ms median ({:.1} max); kill → first re-dispatch {:.1} ms \
         median ({:.1} max); {} of {} requests failed; slowest request {:.1} ms\n",
        failover.kills,
        failover.detect_ms.0,
        failover.detect_ms.1,
        failover.redispatch_ms.0,
        failover.redispatch_ms.1,
        failover.errors,
        failover.requests,
        failover.max_latency_ms
    ));
    s
}
