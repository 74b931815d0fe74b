//! The live Kairos experiment (notes/kairos.md §6.2, the "real run"): real `weir executor`
//! processes of emulated instance types, at the same budget, under open-loop Poisson load.
//!
//! Instance types are emulated with `weir executor --slowdown F` (real ONNX Runtime inference,
//! then a sleep of (F − 1) × its time) and priced by the graph's `cost_per_hour` labels. The model
//! is a 64 → W → W → 10 MLP with seeded random weights written here by `weir-training` (a few
//! hundred µs to a few ms per call, growing with the rows per call, with a 256-byte request, so the
//! emulated service time dominates the zenoh hop and the machine's two cores are not the bottleneck).
//!
//! Set-ups: every pool within the budget (the heterogeneous one, and as many instances of each
//! type as the budget buys) under every routing policy (Kairos with latencies learned online,
//! least outstanding, round robin), all in one run. Metric, per set-up: a sweep up a fixed grid of
//! offered rates (×`rate_step` from `start_rate`), `trials` runs of `seconds_per_trial` at each
//! rate, and the largest rate whose **median p99 over the trials** (scheduled send → answer; a
//! trial with an unanswered request counts as a miss) meets the QoS target; the sweep stops after
//! two rates in a row miss. Then the goodput (answers within the QoS target per second) of
//! `trials` runs at one fixed offered rate, the same for every set-up. Spreads: each trial's own
//! largest passing rate, and the goodput's range.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use plotters::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;

use super::overhead::median;
use super::remote::free_endpoint;
use crate::loadgen::{run_load, Arrival, LoadSpec};
use crate::workload::Workload;
use crate::{load_graph, start, RuntimeOptions};

/// One emulated instance type.
#[derive(Debug, Clone)]
pub struct EmulatedType {
    /// Name, used as the `instance_type` label.
    pub name: String,
    /// `weir executor --slowdown`.
    pub slowdown: f64,
    /// Price, the `cost_per_hour` label.
    pub cost_per_hour: f64,
}

/// The experiment's settings.
#[derive(Debug, Clone)]
pub struct KairosLiveConfig {
    /// Instance types.
    pub types: Vec<EmulatedType>,
    /// Instances per type of the heterogeneous pool.
    pub hetero: Vec<usize>,
    /// Budget in $/h every pool must fit.
    pub budget_per_hour: f64,
    /// p99 latency target, ms.
    pub qos_ms: f64,
    /// MLP hidden width.
    pub hidden: usize,
    /// Most rows per job and per executor call (the model node's `batching.max_size`, the
    /// executors' `--max-batch`).
    pub max_batch: usize,
    /// First offered rate of each sweep, requests/s.
    pub start_rate: f64,
    /// Factor between consecutive rates of the sweep.
    pub rate_step: f64,
    /// Highest rate of the sweep.
    pub max_rate: f64,
    /// Seconds of load per trial (bounded to 300..3000 requests).
    pub seconds_per_trial: f64,
    /// Trials per rate; medians over them are reported.
    pub trials: usize,
    /// Offered rate of the goodput runs, requests/s.
    pub goodput_rate: f64,
    /// Policies to run (every pool is run under each).
    pub policies: Vec<Policy>,
}

impl KairosLiveConfig {
    /// The sweep's rates.
    pub fn rates(&self) -> Vec<f64> {
        let mut v = Vec::new();
        let mut r = self.start_rate.max(1.0);
        while r <= self.max_rate * (1.0 + 1e-9) && v.len() < 64 {
            v.push((r * 10.0).round() / 10.0);
            r *= self.rate_step.max(1.01);
        }
        v
    }
}

/// A routing policy of the model node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// `routing: {kairos: {qos_ms}}`, latencies learned online.
    Kairos,
    /// `routing: least_outstanding`.
    LeastOutstanding,
    /// `routing: round_robin`.
    RoundRobin,
}

impl Policy {
    /// Every policy.
    pub const ALL: [Policy; 3] = [Policy::Kairos, Policy::LeastOutstanding, Policy::RoundRobin];

    /// Its name in tables and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Kairos => "kairos",
            Policy::LeastOutstanding => "least outstanding",
            Policy::RoundRobin => "round robin",
        }
    }

    /// Parses `kairos`, `least_outstanding` or `round_robin`.
    pub fn parse(text: &str) -> Option<Policy> {
        match text.replace('-', "_").as_str() {
            "kairos" => Some(Policy::Kairos),
            "least_outstanding" => Some(Policy::LeastOutstanding),
            "round_robin" => Some(Policy::RoundRobin),
            _ => None,
        }
    }

    fn yaml(self, qos_ms: f64) -> String {
        match self {
            Policy::Kairos => format!("{{kairos: {{qos_ms: {qos_ms}}}}}"),
            Policy::LeastOutstanding => "least_outstanding".into(),
            Policy::RoundRobin => "round_robin".into(),
        }
    }
}

/// A pool and its routing.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The pool, for tables (`1×emu.fast + 2×emu.slow`).
    pub pool_label: String,
    /// Instances per type.
    pub pool: Vec<usize>,
    /// Routing.
    pub policy: Policy,
}

impl Setup {
    /// Label in tables and plots.
    pub fn label(&self) -> String {
        format!("{} · {}", self.pool_label, self.policy.name())
    }

    /// Whether the pool has one instance type only.
    pub fn homogeneous(&self) -> bool {
        self.pool.iter().filter(|&&n| n > 0).count() == 1
    }
}

/// One trial.
#[derive(Debug, Clone, Copy)]
pub struct Trial {
    /// p50 latency, ms.
    pub p50_ms: f64,
    /// p99 latency, ms (infinite when nothing was answered).
    pub p99_ms: f64,
    /// Requests not answered with outputs.
    pub errors: usize,
    /// Answers within the QoS target per second.
    pub goodput: f64,
}

impl Trial {
    /// Its p99 as the sweep judges it: infinite when a request went unanswered.
    pub fn judged_p99(&self) -> f64 {
        if self.errors > 0 {
            f64::INFINITY
        } else {
            self.p99_ms
        }
    }
}

/// One rate of a sweep.
#[derive(Debug, Clone)]
pub struct RatePoint {
    /// Offered rate, requests/s.
    pub rate: f64,
    /// The trials at this rate.
    pub trials: Vec<Trial>,
}

impl RatePoint {
    /// Median over the trials of the judged p99.
    pub fn median_p99(&self) -> f64 {
        median(self.trials.iter().map(Trial::judged_p99).collect())
    }
}

/// One set-up's results.
#[derive(Debug, Clone)]
pub struct SetupResult {
    /// The set-up.
    pub setup: Setup,
    /// Pool price, $/h.
    pub cost_per_hour: f64,
    /// The sweep, lowest rate first.
    pub points: Vec<RatePoint>,
    /// Largest rate whose median p99 meets QoS (0 when none does).
    pub max_rate: f64,
    /// Each trial index's own largest passing rate (the spread of `max_rate`).
    pub max_rate_per_trial: Vec<f64>,
    /// The goodput trials at the fixed rate.
    pub goodput: Vec<Trial>,
    /// Share of jobs each type served over the whole set-up.
    pub type_share: Vec<f64>,
}

impl SetupResult {
    /// Median goodput, requests/s.
    pub fn median_goodput(&self) -> f64 {
        median(self.goodput.iter().map(|t| t.goodput).collect())
    }
}

/// A `weir executor --slowdown` child, SIGKILLed when dropped.
struct EmulatedExecutor {
    child: Child,
    name: String,
    endpoint: String,
    type_idx: usize,
}

impl EmulatedExecutor {
    fn spawn(
        name: &str,
        model: &Path,
        slowdown: f64,
        type_idx: usize,
        max_batch: usize,
    ) -> Result<Self> {
        let endpoint = free_endpoint()?;
        let exe = std::env::current_exe().context("locating the weir binary")?;
        let mut child = Command::new(exe)
            .args(["executor", "--name", name, "--listen", &endpoint])
            .arg("--model")
            .arg(format!("model={}", model.display()))
            .args(["--slowdown", &slowdown.to_string()])
            .args(["--max-batch", &max_batch.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("starting weir executor")?;
        let stdout = child.stdout.take();
        let e = EmulatedExecutor {
            child,
            name: name.to_string(),
            endpoint,
            type_idx,
        };
        let mut line = String::new();
        if let Some(out) = stdout {
            std::io::BufReader::new(out).read_line(&mut line)?;
        }
        if !line.starts_with("weir executor") {
            bail!("executor {name} did not start: `{}`", line.trim());
        }
        Ok(e)
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

/// The set-ups: the heterogeneous pool, then each homogeneous pool within the budget, each under
/// every policy of the config.
pub fn setups(config: &KairosLiveConfig) -> Vec<Setup> {
    let describe = |pool: &[usize]| {
        pool.iter()
            .zip(&config.types)
            .filter(|(n, _)| **n > 0)
            .map(|(n, t)| format!("{n}×{}", t.name))
            .collect::<Vec<_>>()
            .join(" + ")
    };
    let mut pools = vec![config.hetero.clone()];
    for (i, t) in config.types.iter().enumerate() {
        let n = (config.budget_per_hour / t.cost_per_hour + 1e-9).floor() as usize;
        if n == 0 {
            continue;
        }
        let mut pool = vec![0; config.types.len()];
        pool[i] = n;
        if !pools.contains(&pool) {
            pools.push(pool);
        }
    }
    let mut v = Vec::new();
    for pool in pools {
        for &policy in &config.policies {
            v.push(Setup {
                pool_label: describe(&pool),
                pool: pool.clone(),
                policy,
            });
        }
    }
    v
}

fn pool_cost(config: &KairosLiveConfig, pool: &[usize]) -> f64 {
    pool.iter()
        .zip(&config.types)
        .map(|(n, t)| *n as f64 * t.cost_per_hour)
        .sum()
}

/// The graph of one set-up on `executors` (the first `pool[t]` of each type).
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
        "nodes:\n  - model:\n      id: model\n      path: {}\n      inputs: {{x: x}}\n      batching: {{max_size: {}}}\n      executor: {{timeout_ms: 5000}}\n      replicas: [{}]\n      routing: {}\noutputs:\n  - {{name: probs, from: model.probs}}\n",
        model.display(),
        config.max_batch,
        chosen.iter().map(|e| e.name.as_str()).collect::<Vec<_>>().join(", "),
        setup.policy.yaml(config.qos_ms)
    ));
    yaml
}

/// One set-up: the sweep, the goodput runs and each type's job share.
fn run_setup(
    config: &KairosLiveConfig,
    setup: &Setup,
    executors: &[EmulatedExecutor],
    model: &Path,
    dir: &Path,
) -> Result<SetupResult> {
    let path = dir.join("graph.yaml");
    std::fs::write(&path, graph_yaml(config, setup, executors, model))?;
    let graph = load_graph(&path).map_err(|e| anyhow!("{e}"))?;
    let workload = Workload::random(&graph.plan, 64, 3);
    let running = start(graph.plan, RuntimeOptions::default())?;
    let qos_us = (config.qos_ms * 1000.0) as u64;
    let mut seed = 0u64;
    let mut trial = |rate: f64| -> Trial {
        seed += 1;
        let requests = ((rate * config.seconds_per_trial) as usize).clamp(300, 3000);
        let report = run_load(
            running.runtime(),
            &workload,
            &LoadSpec {
                requests,
                warmup: 100,
                arrival: Arrival::Poisson { rate },
                seed,
                label_output: None,
                progress: false,
            },
        );
        let within = report.latency_us.count_between(0, qos_us);
        std::thread::sleep(Duration::from_millis(150));
        Trial {
            p50_ms: report.latency_ms(0.5),
            p99_ms: if report.ok > 0 {
                report.latency_ms(0.99)
            } else {
                f64::INFINITY
            },
            errors: report.sent - report.ok,
            goodput: within as f64 / report.elapsed.as_secs_f64().max(1e-9),
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
            "  {:<44} {:>6.1} req/s: median p99 {:>7.1} ms (trials {})",
            setup.label(),
            rate,
            point.median_p99(),
            p99s.join(", ")
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
        "  {:<44} goodput at {} req/s offered: {}",
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
    })
}

/// The largest rate of the sweep whose median p99 (or trial `k`'s own p99) meets `qos_ms`.
pub fn max_passing(points: &[RatePoint], qos_ms: f64, k: Option<usize>) -> f64 {
    points
        .iter()
        .filter(|p| {
            let p99 = match k {
                None => p.median_p99(),
                Some(k) => p.trials.get(k).map_or(f64::INFINITY, Trial::judged_p99),
            };
            p99 <= qos_ms
        })
        .map(|p| p.rate)
        .fold(0.0, f64::max)
}

/// Runs the experiment.
///
/// # Errors
/// When the model cannot be written, an executor does not start, or a graph fails.
pub fn kairos_live(config: &KairosLiveConfig, model: &Path) -> Result<Vec<SetupResult>> {
    if config.hetero.len() != config.types.len() {
        bail!("the heterogeneous pool needs one count per type");
    }
    let cost = pool_cost(config, &config.hetero);
    if cost > config.budget_per_hour + 1e-9 {
        bail!(
            "the heterogeneous pool costs ${cost:.2}/h, over the ${:.2}/h budget",
            config.budget_per_hour
        );
    }
    make_model(model, config.hidden)?;
    let model =
        &std::fs::canonicalize(model).with_context(|| format!("model {}", model.display()))?;
    let setups = setups(config);
    let mut executors = Vec::new();
    for (t, ty) in config.types.iter().enumerate() {
        let n = setups.iter().map(|s| s.pool[t]).max().unwrap_or(0);
        for i in 0..n {
            let name = format!("{}-{i}", ty.name.replace('.', "-"));
            executors.push(EmulatedExecutor::spawn(
                &name,
                model,
                ty.slowdown,
                t,
                config.max_batch,
            )?);
        }
    }
    let dir = std::env::temp_dir().join(format!("weir-bench-kairos-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut results = Vec::new();
    for setup in &setups {
        let r = run_setup(config, setup, &executors, model, &dir)?;
        eprintln!(
            "{:<46} max {:>6.1} req/s (per trial {:?}), goodput {:.1} req/s",
            setup.label(),
            r.max_rate,
            r.max_rate_per_trial,
            r.median_goodput()
        );
        results.push(r);
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(results)
}

fn spread(values: &[f64]) -> String {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if values.is_empty() {
        "–".into()
    } else {
        format!("{lo:.0}–{hi:.0}")
    }
}

/// The best homogeneous set-up (largest max rate, then goodput), whatever its policy.
fn best_homogeneous(results: &[SetupResult]) -> Option<&SetupResult> {
    results
        .iter()
        .filter(|r| r.setup.homogeneous())
        .max_by(|a, b| {
            (a.max_rate, a.median_goodput())
                .partial_cmp(&(b.max_rate, b.median_goodput()))
                .unwrap_or(std::cmp::Ordering::Equal)
        })
}

/// The Markdown table (one row per pool × policy), the comparisons, and every point.
pub fn kairos_live_table(config: &KairosLiveConfig, results: &[SetupResult]) -> String {
    let best_homo = best_homogeneous(results);
    let (homo_rate, homo_goodput) =
        best_homo.map_or((0.0, 0.0), |r| (r.max_rate, r.median_goodput()));
    let types: Vec<String> = config
        .types
        .iter()
        .map(|t| {
            format!(
                "{} (×{} slower, ${}/h)",
                t.name, t.slowdown, t.cost_per_hour
            )
        })
        .collect();
    let rates = config.rates();
    let mut s = format!(
        "Types: {}. Budget ${}/h, p99 target {} ms, MLP 64→{}→{}→10, jobs and executor calls ≤ {} rows. \
         Sweep: {} rates from {} to {} req/s (×{}), {} trials of {} s each per rate, stopping after two misses; \
         goodput at {} req/s offered, {} trials.\n\n",
        types.join(", "),
        config.budget_per_hour,
        config.qos_ms,
        config.hidden,
        config.hidden,
        config.max_batch,
        rates.len(),
        rates.first().copied().unwrap_or(0.0),
        rates.last().copied().unwrap_or(0.0),
        config.rate_step,
        config.trials,
        config.seconds_per_trial,
        config.goodput_rate,
        config.trials,
    );
    s.push_str(&format!(
        "| pool | routing | $/h | max req/s with median p99 ≤ {} ms | per-trial max (spread) | vs best homogeneous | goodput at {} req/s, median [range] | vs best homogeneous | jobs per type |\n|---|---|---|---|---|---|---|---|---|\n",
        config.qos_ms, config.goodput_rate
    ));
    for r in results {
        let share: Vec<String> = r
            .type_share
            .iter()
            .zip(&config.types)
            .filter(|(x, _)| **x > 0.0)
            .map(|(x, t)| format!("{} {:.0} %", t.name, x * 100.0))
            .collect();
        let goodputs: Vec<f64> = r.goodput.iter().map(|t| t.goodput).collect();
        s.push_str(&format!(
            "| {} | {} | {:.2} | {:.1} | {} ({}) | {:.2} | {:.1} [{}] | {:.2} | {} |\n",
            r.setup.pool_label,
            r.setup.policy.name(),
            r.cost_per_hour,
            r.max_rate,
            r.max_rate_per_trial
                .iter()
                .map(|x| format!("{x:.0}"))
                .collect::<Vec<_>>()
                .join(", "),
            spread(&r.max_rate_per_trial),
            r.max_rate / homo_rate.max(1e-9),
            r.median_goodput(),
            spread(&goodputs),
            r.median_goodput() / homo_goodput.max(1e-9),
            share.join(", ")
        ));
    }
    let hetero: Vec<&SetupResult> = results
        .iter()
        .filter(|r| r.setup.pool == config.hetero)
        .collect();
    if let (Some(k), Some(h)) = (
        hetero.iter().find(|r| r.setup.policy == Policy::Kairos),
        best_homo,
    ) {
        s.push_str(&format!(
            "\nBest homogeneous: {} ({:.1} req/s, goodput {:.1}). Kairos on {}: {:.2}× its max rate, {:.2}× its goodput.\n",
            h.setup.label(),
            h.max_rate,
            h.median_goodput(),
            k.setup.pool_label,
            k.max_rate / h.max_rate.max(1e-9),
            k.median_goodput() / h.median_goodput().max(1e-9),
        ));
        for o in hetero.iter().filter(|r| r.setup.policy != Policy::Kairos) {
            s.push_str(&format!(
                "Kairos vs {} on the same pool: {:.2}× max rate, {:.2}× goodput.\n",
                o.setup.policy.name(),
                k.max_rate / o.max_rate.max(1e-9),
                k.median_goodput() / o.median_goodput().max(1e-9),
            ));
        }
    }
    s
}

/// Every trial, one line each, for the record.
pub fn kairos_live_points(results: &[SetupResult]) -> String {
    let mut s = String::from("set-up\trate\ttrial\tp50_ms\tp99_ms\terrors\tgoodput\n");
    for r in results {
        let goodput = r.goodput.iter().map(|t| ("goodput", t));
        for p in &r.points {
            for (k, t) in p.trials.iter().enumerate() {
                s.push_str(&format!(
                    "{}\t{}\t{}\t{:.2}\t{:.2}\t{}\t{:.1}\n",
                    r.setup.label(),
                    p.rate,
                    k,
                    t.p50_ms,
                    t.p99_ms,
                    t.errors,
                    t.goodput
                ));
            }
        }
        for (k, (what, t)) in goodput.enumerate() {
            s.push_str(&format!(
                "{}\t{what}\t{}\t{:.2}\t{:.2}\t{}\t{:.1}\n",
                r.setup.label(),
                k,
                t.p50_ms,
                t.p99_ms,
                t.errors,
                t.goodput
            ));
        }
    }
    s
}

/// Median p99 over the trials against offered rate per set-up (the bars span the trials), with
/// the QoS target as a line; the heterogeneous pool solid, homogeneous pools thinner.
///
/// # Errors
/// When the image cannot be drawn or written.
pub fn plot_kairos_live(
    config: &KairosLiveConfig,
    results: &[SetupResult],
    path: &Path,
) -> Result<()> {
    let root = BitMapBackend::new(path, (1000, 620)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let top = config.qos_ms * 3.0;
    let cap = |v: f64| v.min(top);
    let right = results
        .iter()
        .flat_map(|r| r.points.iter().map(|p| p.rate))
        .fold(1.0, f64::max)
        * 1.05;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Kairos live: median p99 over {} trials vs offered load (budget ${}/h)",
                config.trials, config.budget_per_hour
            ),
            ("sans-serif", 20),
        )
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..right, 0.0..top)
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_desc("offered rate, requests/s (Poisson)")
        .y_desc("p99 latency, ms (capped at 3× QoS)")
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .draw_series(LineSeries::new(
            vec![(0.0, config.qos_ms), (right, config.qos_ms)],
            ShapeStyle::from(BLACK).stroke_width(1),
        ))
        .map_err(|e| anyhow!("{e}"))?
        .label(format!("p99 target {} ms", config.qos_ms))
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK));
    let pool_colors = [
        RED,
        BLUE,
        RGBColor(0, 150, 0),
        RGBColor(255, 140, 0),
        MAGENTA,
        CYAN,
    ];
    let mut pools: Vec<&Vec<usize>> = Vec::new();
    for r in results {
        if !pools.contains(&&r.setup.pool) {
            pools.push(&r.setup.pool);
        }
    }
    for r in results {
        let pi = pools.iter().position(|p| **p == r.setup.pool).unwrap_or(0);
        let color = pool_colors[pi % pool_colors.len()];
        let width = if r.setup.homogeneous() { 1 } else { 3 };
        let style = ShapeStyle::from(color).stroke_width(width);
        let pts: Vec<(f64, f64)> = r
            .points
            .iter()
            .map(|p| (p.rate, cap(p.median_p99())))
            .collect();
        let label = format!(
            "{} (max {:.0}/s, goodput {:.0}/s)",
            r.setup.label(),
            r.max_rate,
            r.median_goodput()
        );
        // Policy by marker: Kairos circles, least outstanding triangles, round robin crosses.
        match r.setup.policy {
            Policy::Kairos => {
                chart
                    .draw_series(LineSeries::new(pts.clone(), style))
                    .map_err(|e| anyhow!("{e}"))?
                    .label(label)
                    .legend(move |(x, y)| Circle::new((x + 9, y), 4, style.filled()));
                chart
                    .draw_series(pts.iter().map(|&p| Circle::new(p, 4, style.filled())))
                    .map_err(|e| anyhow!("{e}"))?;
            }
            Policy::LeastOutstanding => {
                chart
                    .draw_series(DashedLineSeries::new(pts.clone(), 8, 4, style))
                    .map_err(|e| anyhow!("{e}"))?
                    .label(label)
                    .legend(move |(x, y)| TriangleMarker::new((x + 9, y), 5, style.filled()));
                chart
                    .draw_series(
                        pts.iter()
                            .map(|&p| TriangleMarker::new(p, 5, style.filled())),
                    )
                    .map_err(|e| anyhow!("{e}"))?;
            }
            Policy::RoundRobin => {
                chart
                    .draw_series(DashedLineSeries::new(pts.clone(), 2, 4, style))
                    .map_err(|e| anyhow!("{e}"))?
                    .label(label)
                    .legend(move |(x, y)| Cross::new((x + 9, y), 4, style));
                chart
                    .draw_series(pts.iter().map(|&p| Cross::new(p, 4, style)))
                    .map_err(|e| anyhow!("{e}"))?;
            }
        }
        // The trials' range at each rate.
        chart
            .draw_series(r.points.iter().map(|p| {
                let lo = p
                    .trials
                    .iter()
                    .map(Trial::judged_p99)
                    .fold(f64::INFINITY, f64::min);
                let hi = p
                    .trials
                    .iter()
                    .map(Trial::judged_p99)
                    .fold(f64::NEG_INFINITY, f64::max);
                PathElement::new(
                    vec![(p.rate, cap(lo)), (p.rate, cap(hi))],
                    ShapeStyle::from(color.mix(0.4)).stroke_width(1),
                )
            }))
            .map_err(|e| anyhow!("{e}"))?;
    }
    super::plot::draw_legend(&mut chart)?;
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

/// The model file the experiment writes and serves, under `.weir/models/`.
pub fn default_model(weir_home: &Path, hidden: usize) -> PathBuf {
    weir_home
        .join("models")
        .join(format!("kairos_mlp_{hidden}.onnx"))
}
