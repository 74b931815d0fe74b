//! The live Kairos experiment (notes/kairos.md §6.2, the "real run"): real `weir executor`
//! processes of emulated instance types, at the same budget, under open-loop Poisson load of
//! queries with trace-like sizes.
//!
//! Instance types are emulated with `weir executor --emulate-latency BASE_MS,PER_ROW_MS` (real
//! ONNX Runtime inference, the call then held until `BASE + PER_ROW × rows` ms have passed since it
//! could start) and priced by the graph's `cost_per_hour` labels. The default types follow the
//! paper's DIEN fits (notes §2.7) ×4 in time: a GPU-like type (g4dn: large fixed cost, small
//! per-row cost, expensive) and a CPU-like one (r5n: the opposite, cheap), so each has the batch
//! sizes it is best at, which uniform slowdowns cannot give. The model is a small 64 → W → W → 10
//! MLP with seeded weights (well under a millisecond of real inference per call here, so the
//! emulated time dominates and this machine's cores stay far from saturated; the bench measures
//! and reports the CPU its processes use).
//!
//! Workload: queries of several rows (one graph request per row, submitted together so they reach
//! the model node as one job), with sizes drawn from the paper artifact's replay of the DeepRecSys
//! production trace (`weir_kairos::workload::BatchDist::Trace`: 10..1000 rows, mean ≈ 244, heavy
//! tail), Poisson arrivals. A query's latency is from its scheduled send to its last row's answer.
//!
//! Kairos gets the emulated types' batch → latency profile the way a user gives it: a profile YAML
//! (`routing: {kairos: {qos_ms, profiles: profile.yaml}}`), or, with `learned`, nothing (latencies
//! learned online). The heterogeneous pool is the one `weir plan` picks for the profile and budget
//! (or given). Set-ups: that pool and every homogeneous pool the budget buys of a type that meets
//! the QoS target at the largest query (the paper's homogeneous baseline; a type that cannot serve
//! the largest queries in time cannot meet a p99 when more than 1 % of queries are that large),
//! each under every routing policy. Metric, per set-up: a sweep up a fixed grid of offered rates
//! (×`rate_step` from `start_rate`), `trials` runs of `seconds_per_trial` at each rate, and the
//! largest rate whose **median p99 over the trials** (a trial with an unanswered query counts as a
//! miss) meets the QoS target; the sweep stops after two rates in a row miss. Then the goodput
//! (queries answered within the target per second) of `trials` runs at one fixed offered rate.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use plotters::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;
use weir_executor::emulation::LatencyProfile;

use weir_kairos::profile::{InstanceType, LatencyTable, ModelProfile, TypeProfile};
use weir_kairos::workload::BatchDist;

use super::overhead::median;
use super::remote::free_endpoint;
use crate::loadgen::{run_query_load, Arrival, LoadSpec};
use crate::workload::Workload;
use crate::{load_graph, start, RuntimeOptions};

/// Rows of the largest query (the trace's largest batch, the paper's 1000).
pub const MAX_QUERY_ROWS: usize = 1000;

/// One emulated instance type: a call of `n` rows takes `base_ms + per_row_ms × n`.
#[derive(Debug, Clone, PartialEq)]
pub struct EmulatedType {
    /// Name, used as the `instance_type` label.
    pub name: String,
    /// Its calls' latency (`weir executor --emulate-latency BASE,PER_ROW`).
    pub latency: LatencyProfile,
    /// Price, the `cost_per_hour` label.
    pub cost_per_hour: f64,
}

impl EmulatedType {
    /// Parses `NAME:BASE_MS:PER_ROW_MS:PRICE_PER_HOUR`.
    ///
    /// # Errors
    /// When the text has another shape, or a number is not one (or not positive where it must be).
    pub fn parse(text: &str) -> Result<Self> {
        let parts: Vec<&str> = text.split(':').collect();
        let [name, base, per_row, price] = parts.as_slice() else {
            bail!("`{text}` is not NAME:BASE_MS:PER_ROW_MS:PRICE_PER_HOUR");
        };
        let latency: LatencyProfile = format!("{base},{per_row}")
            .parse()
            .with_context(|| format!("latency of `{text}`"))?;
        let cost_per_hour = price
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| anyhow!("price `{price}` in `{text}` is not a number ≥ 0"))?;
        let name = name.trim().to_string();
        if name.is_empty() || cost_per_hour <= 0.0 {
            bail!("`{text}`: a type needs a name and a positive price");
        }
        Ok(EmulatedType {
            name,
            latency,
            cost_per_hour,
        })
    }

    /// Its emulated latency of a call of `rows` rows, ms.
    pub fn latency_ms(&self, rows: usize) -> f64 {
        self.latency.call_ms(rows)
    }
}

/// Where Kairos's latency predictions come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KairosLatency {
    /// A profile measured through weir before the sweep (each type's mean query latency, graph
    /// and zenoh hop included, at a few sizes), given as YAML (`profiles:`): what a user profiling
    /// their deployment would write.
    Measured,
    /// The types' nominal emulated latencies (`BASE + PER_ROW × rows`), given as YAML.
    Nominal,
    /// Learned online from the node's own jobs (no `profiles:`).
    Learned,
}

impl KairosLatency {
    /// Parses `measured`, `nominal` or `learned`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "measured" => Some(KairosLatency::Measured),
            "nominal" => Some(KairosLatency::Nominal),
            "learned" => Some(KairosLatency::Learned),
            _ => None,
        }
    }

    /// How the table names it.
    pub fn describe(self) -> &'static str {
        match self {
            KairosLatency::Measured => {
                "a profile measured through weir before the sweep, given in YAML"
            }
            KairosLatency::Nominal => "the types' nominal emulated latencies, given in YAML",
            KairosLatency::Learned => "learned online",
        }
    }
}

/// Rows at which profiles are measured and written.
const PROFILE_ROWS: [usize; 6] = [10, 100, 250, 500, 750, MAX_QUERY_ROWS];

/// A Kairos latency profile of `types` (the YAML `weir plan --profiles` and
/// `routing: {kairos: {profiles: ...}}` read) with `latency(t, rows)` ms at [`PROFILE_ROWS`] rows
/// for type `t`; with `|t, n| types[t].latency_ms(n)` it is their nominal emulated profile.
///
/// # Errors
/// When the numbers make no valid profile (no type meets `qos_ms` at the largest query).
pub fn emulated_profile(
    types: &[EmulatedType],
    qos_ms: f64,
    latency: impl Fn(usize, usize) -> f64,
) -> Result<ModelProfile> {
    let types = types
        .iter()
        .enumerate()
        .map(|(i, t)| {
            Ok(TypeProfile {
                instance: InstanceType {
                    name: t.name.clone(),
                    cost_per_hour: t.cost_per_hour,
                },
                latency: LatencyTable::new(
                    PROFILE_ROWS
                        .iter()
                        .map(|&n| (n as u32, latency(i, n)))
                        .collect(),
                )?,
            })
        })
        .collect::<Result<Vec<_>, weir_kairos::KairosError>>()?;
    Ok(ModelProfile::new(
        "kairos-live-mlp",
        qos_ms,
        MAX_QUERY_ROWS as u32,
        types,
        None,
    )?)
}

/// The pool `weir plan` picks for `profile` within `budget` (instances per type).
///
/// # Errors
/// When the planner finds nothing affordable.
pub fn planned_pool(profile: &ModelProfile, budget_per_hour: f64) -> Result<Vec<usize>> {
    let report = weir_kairos::planner::plan_report(
        &profile.to_yaml(),
        budget_per_hour,
        Some(profile.qos_ms),
        None,
    )?;
    Ok(report.chosen().counts.iter().map(|&n| n as usize).collect())
}

/// The experiment's settings.
#[derive(Debug, Clone)]
pub struct KairosLiveConfig {
    /// Instance types.
    pub types: Vec<EmulatedType>,
    /// Instances per type of the heterogeneous pool (`None`: the pool `weir plan` picks).
    pub hetero: Option<Vec<usize>>,
    /// Budget in $/h every pool must fit.
    pub budget_per_hour: f64,
    /// p99 latency target, ms.
    pub qos_ms: f64,
    /// MLP hidden width.
    pub hidden: usize,
    /// Where Kairos's latencies come from.
    pub kairos_latency: KairosLatency,
    /// First offered rate of each sweep, queries/s.
    pub start_rate: f64,
    /// Factor between consecutive rates of the sweep.
    pub rate_step: f64,
    /// Highest rate of the sweep.
    pub max_rate: f64,
    /// Seconds of load per trial (at least `min_queries` queries).
    pub seconds_per_trial: f64,
    /// Fewest queries per trial (so a p99 rests on a few queries over it).
    pub min_queries: usize,
    /// Trials per rate; medians over them are reported.
    pub trials: usize,
    /// Offered rate of the goodput runs, queries/s.
    pub goodput_rate: f64,
    /// Policies to run (every pool is run under each).
    pub policies: Vec<Policy>,
}

impl KairosLiveConfig {
    /// Queries per trial at `rate`.
    pub fn queries_at(&self, rate: f64) -> usize {
        ((rate * self.seconds_per_trial) as usize).clamp(self.min_queries.max(1), 20_000)
    }

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
    /// `routing: {kairos: {qos_ms, profiles}}` (or latencies learned online): weir's Kairos, which
    /// may send an idle replica several queued queries in one call.
    Kairos,
    /// The same with `batch_queued_jobs: false`: one query per call, as in the paper.
    KairosOnePerCall,
    /// `routing: least_outstanding`.
    LeastOutstanding,
    /// `routing: round_robin`.
    RoundRobin,
}

impl Policy {
    /// Every policy.
    pub const ALL: [Policy; 4] = [
        Policy::Kairos,
        Policy::KairosOnePerCall,
        Policy::LeastOutstanding,
        Policy::RoundRobin,
    ];

    /// Its name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Kairos => "kairos",
            Policy::KairosOnePerCall => "kairos, one query per call",
            Policy::LeastOutstanding => "least outstanding",
            Policy::RoundRobin => "round robin",
        }
    }

    /// Whether it is one of the Kairos variants.
    pub fn is_kairos(self) -> bool {
        matches!(self, Policy::Kairos | Policy::KairosOnePerCall)
    }

    /// Parses `kairos`, `kairos_one_per_call`, `least_outstanding` or `round_robin`.
    pub fn parse(text: &str) -> Option<Policy> {
        match text.replace('-', "_").as_str() {
            "kairos" => Some(Policy::Kairos),
            "kairos_one_per_call" => Some(Policy::KairosOnePerCall),
            "least_outstanding" => Some(Policy::LeastOutstanding),
            "round_robin" => Some(Policy::RoundRobin),
            _ => None,
        }
    }

    fn yaml(self, qos_ms: f64, latency: KairosLatency) -> String {
        let profiles = match latency {
            KairosLatency::Measured | KairosLatency::Nominal => {
                format!(", profiles: {PROFILE_FILE}")
            }
            KairosLatency::Learned => String::new(),
        };
        match self {
            Policy::Kairos => format!("{{kairos: {{qos_ms: {qos_ms}{profiles}}}}}"),
            Policy::KairosOnePerCall => {
                format!("{{kairos: {{qos_ms: {qos_ms}{profiles}, batch_queued_jobs: false}}}}")
            }
            Policy::LeastOutstanding => "least_outstanding".into(),
            Policy::RoundRobin => "round_robin".into(),
        }
    }
}

/// The profile file beside each set-up's graph.
const PROFILE_FILE: &str = "profile.yaml";

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
    /// Queries not answered with outputs.
    pub errors: usize,
    /// Queries answered within the QoS target per second.
    pub goodput: f64,
    /// CPU time of the graph process and every executor over the trial, per second of it (cores).
    pub cpu_cores: f64,
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
    /// Executor calls (jobs) per query over the whole set-up: below 1 when Kairos batches queued
    /// queries, above 1 when a query was split.
    pub jobs_per_query: f64,
}

impl SetupResult {
    /// Median goodput, requests/s.
    pub fn median_goodput(&self) -> f64 {
        median(self.goodput.iter().map(|t| t.goodput).collect())
    }
}

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
        let exe = std::env::current_exe().context("locating the weir binary")?;
        let mut child = Command::new(exe)
            .args(["executor", "--name", name, "--listen", &endpoint])
            .arg("--model")
            .arg(format!("model={}", model.display()))
            .args(["--emulate-latency", &ty.latency.to_string()])
            .args(["--queue-capacity", "1024"])
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

/// The set-ups: the heterogeneous pool `hetero`, then, for each type that meets the QoS target at
/// the largest query, as many of it as the budget buys; each under every policy of the config.
pub fn setups(config: &KairosLiveConfig, hetero: &[usize]) -> Vec<Setup> {
    let describe = |pool: &[usize]| {
        pool.iter()
            .zip(&config.types)
            .filter(|(n, _)| **n > 0)
            .map(|(n, t)| format!("{n}×{}", t.name))
            .collect::<Vec<_>>()
            .join(" + ")
    };
    let mut pools = vec![hetero.to_vec()];
    for (i, t) in config.types.iter().enumerate() {
        let n = (config.budget_per_hour / t.cost_per_hour + 1e-9).floor() as usize;
        if n == 0 || t.latency_ms(MAX_QUERY_ROWS) > config.qos_ms {
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

/// Share of the trace's queries larger than the largest that `ty` serves within `qos_ms`
/// (from a sample of `n` sizes): where that exceeds 1 %, a pool of `ty` alone cannot meet a p99.
pub fn share_over_limit(ty: &EmulatedType, qos_ms: f64, sizes: &[usize]) -> f64 {
    let over = sizes
        .iter()
        .filter(|&&rows| ty.latency_ms(rows) > qos_ms)
        .count();
    over as f64 / sizes.len().max(1) as f64
}

fn pool_cost(config: &KairosLiveConfig, pool: &[usize]) -> f64 {
    pool.iter()
        .zip(&config.types)
        .map(|(n, t)| *n as f64 * t.cost_per_hour)
        .sum()
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

/// CPU seconds (user + system) process `pid` has used, from `/proc/<pid>/stat` (clock ticks of
/// 1/100 s, Linux's `USER_HZ`); 0 where it cannot be read.
fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces) close with ')'.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the state.
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

/// Writes and starts the graph of `setup` in `dir`, with a workload for it.
fn start_setup(
    config: &KairosLiveConfig,
    setup: &Setup,
    executors: &[EmulatedExecutor],
    model: &Path,
    dir: &Path,
) -> Result<(crate::RunningGraph, Workload)> {
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
    let cpu_now = || pids.iter().map(|&p| cpu_seconds(p)).sum::<f64>();
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

/// Real ONNX Runtime time of one call of the served model, median of 20, at each of `rows` (what
/// the emulated latencies must dominate).
///
/// # Errors
/// When the runtime or the model cannot be loaded, or a call fails.
pub fn real_call_ms(model: &Path, rows: &[usize]) -> Result<Vec<(usize, f64)>> {
    let runtime = weir_operators::model::OrtRuntime::get()?;
    let mut session = runtime.session("kairos-live", model, 1, false)?;
    let (input, _) = super::overhead::model_input(model)?;
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

/// What a run used: the heterogeneous pool, how Kairos knew latencies, and the real time per call.
#[derive(Debug, Clone)]
pub struct RunInfo {
    /// The heterogeneous pool, instances per type.
    pub hetero: Vec<usize>,
    /// Whether `weir plan` chose it (else it was given).
    pub planned: bool,
    /// Per type, the share of the trace's queries over its QoS limit.
    pub over_limit: Vec<f64>,
    /// Real ONNX Runtime ms per call at some row counts.
    pub real_call_ms: Vec<(usize, f64)>,
    /// Per type, its mean query latency measured through weir at each of [`PROFILE_ROWS`].
    pub measured_ms: Vec<Vec<f64>>,
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
pub fn kairos_live_table(
    config: &KairosLiveConfig,
    info: &RunInfo,
    results: &[SetupResult],
) -> String {
    let best_homo = best_homogeneous(results);
    let (homo_rate, homo_goodput) =
        best_homo.map_or((0.0, 0.0), |r| (r.max_rate, r.median_goodput()));
    let types: Vec<String> = config
        .types
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let measured = info.measured_ms.get(i).map_or(String::new(), |m| {
                format!(
                    "; measured through weir {}",
                    PROFILE_ROWS
                        .iter()
                        .zip(m)
                        .map(|(n, ms)| format!("{ms:.1} ms at {n}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            });
            format!(
                "{} ({} + {} × rows ms, ${}/h; {:.1} % of queries over the target alone{measured})",
                t.name,
                t.latency.base_ms,
                t.latency.per_row_ms,
                t.cost_per_hour,
                info.over_limit.get(i).copied().unwrap_or(0.0) * 100.0
            )
        })
        .collect();
    let rates = config.rates();
    let mut s = format!(
        "Types: {}. Budget ${}/h, p99 target {} ms, MLP 64→{}→{}→10 (real ONNX Runtime time per call: {}). \
         Queries of the production-trace sizes (10..{} rows), one job each; Kairos latencies: {}; heterogeneous pool: {}. \
         Sweep: {} rates from {} to {} queries/s (×{}), {} trials of max({} s, {} queries) each per rate, stopping after two misses; \
         goodput at {} queries/s offered, {} trials.\n\n",
        types.join(", "),
        config.budget_per_hour,
        config.qos_ms,
        config.hidden,
        config.hidden,
        info.real_call_ms
            .iter()
            .map(|(n, ms)| format!("{ms:.3} ms at {n} rows"))
            .collect::<Vec<_>>()
            .join(", "),
        MAX_QUERY_ROWS,
        config.kairos_latency.describe(),
        if info.planned { "weir plan's pick" } else { "given" },
        rates.len(),
        rates.first().copied().unwrap_or(0.0),
        rates.last().copied().unwrap_or(0.0),
        config.rate_step,
        config.trials,
        config.seconds_per_trial,
        config.min_queries,
        config.goodput_rate,
        config.trials,
    );
    s.push_str(&format!(
        "| pool | routing | $/h | max queries/s with median p99 ≤ {} ms | per-trial max (spread) | vs best homogeneous | goodput at {} q/s, median [range] | vs best homogeneous | jobs per type | calls per query | CPU cores at max rate |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
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
        let cpu_at_max = r
            .points
            .iter()
            .find(|p| p.rate == r.max_rate)
            .map_or(0.0, |p| {
                median(p.trials.iter().map(|t| t.cpu_cores).collect())
            });
        s.push_str(&format!(
            "| {} | {} | {:.2} | {:.1} | {} ({}) | {:.2} | {:.1} [{}] | {:.2} | {} | {:.2} | {:.2} |\n",
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
            share.join(", "),
            r.jobs_per_query,
            cpu_at_max
        ));
    }
    let hetero: Vec<&SetupResult> = results
        .iter()
        .filter(|r| r.setup.pool == info.hetero)
        .collect();
    let ratio = |a: f64, b: f64| {
        if b > 0.0 {
            format!("{:.2}×", a / b)
        } else if a > 0.0 {
            "∞ (the other met the target at no rate of the grid)".into()
        } else {
            "– (neither met the target)".into()
        }
    };
    // The paper's homogeneous baseline serves one query per call (FCFS); weir's Kairos may batch.
    let one_per_call = |r: &&SetupResult| r.setup.policy != Policy::Kairos;
    let homo_paper = best_homogeneous(
        &results
            .iter()
            .filter(one_per_call)
            .cloned()
            .collect::<Vec<_>>(),
    )
    .cloned();
    for k in hetero.iter().filter(|r| r.setup.policy.is_kairos()) {
        s.push('\n');
        let bases = [
            ("best homogeneous", best_homo),
            (
                "best homogeneous with one query per call",
                homo_paper.as_ref(),
            ),
        ];
        for (what, h) in bases {
            if let Some(h) = h {
                s.push_str(&format!(
                    "{} on {} vs the {what} ({}, {:.1} q/s): {} max rate, {} goodput.\n",
                    k.setup.policy.name(),
                    k.setup.pool_label,
                    h.setup.label(),
                    h.max_rate,
                    ratio(k.max_rate, h.max_rate),
                    ratio(k.median_goodput(), h.median_goodput()),
                ));
            }
        }
        for o in hetero.iter().filter(|r| !r.setup.policy.is_kairos()) {
            s.push_str(&format!(
                "{} vs {} on the same pool: {} max rate, {} goodput.\n",
                k.setup.policy.name(),
                o.setup.policy.name(),
                ratio(k.max_rate, o.max_rate),
                ratio(k.median_goodput(), o.median_goodput()),
            ));
        }
    }
    s
}

/// Every trial, one line each, for the record.
pub fn kairos_live_points(results: &[SetupResult]) -> String {
    let mut s = String::from("set-up\trate\ttrial\tp50_ms\tp99_ms\terrors\tgoodput\tcpu_cores\n");
    for r in results {
        let goodput = r.goodput.iter().map(|t| ("goodput", t));
        for p in &r.points {
            for (k, t) in p.trials.iter().enumerate() {
                s.push_str(&format!(
                    "{}\t{}\t{}\t{:.2}\t{:.2}\t{}\t{:.1}\t{:.3}\n",
                    r.setup.label(),
                    p.rate,
                    k,
                    t.p50_ms,
                    t.p99_ms,
                    t.errors,
                    t.goodput,
                    t.cpu_cores
                ));
            }
        }
        for (k, (what, t)) in goodput.enumerate() {
            s.push_str(&format!(
                "{}\t{what}\t{}\t{:.2}\t{:.2}\t{}\t{:.1}\t{:.3}\n",
                r.setup.label(),
                k,
                t.p50_ms,
                t.p99_ms,
                t.errors,
                t.goodput,
                t.cpu_cores
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
        .x_desc("offered rate, queries/s (Poisson; 10..1000 rows each)")
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
            "{} (max {:.1}/s, goodput {:.1}/s)",
            r.setup.label(),
            r.max_rate,
            r.median_goodput()
        );
        // Policy by marker: Kairos circles (filled when it batches), least outstanding
        // triangles, round robin crosses.
        match r.setup.policy {
            Policy::Kairos | Policy::KairosOnePerCall => {
                let marker = if r.setup.policy == Policy::Kairos {
                    style.filled()
                } else {
                    style
                };
                chart
                    .draw_series(LineSeries::new(pts.clone(), style))
                    .map_err(|e| anyhow!("{e}"))?
                    .label(label)
                    .legend(move |(x, y)| Circle::new((x + 9, y), 4, marker));
                chart
                    .draw_series(pts.iter().map(|&p| Circle::new(p, 4, marker)))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn types() -> Vec<EmulatedType> {
        ["gpu:26:0.05:0.5", "cpu:3:0.33:0.15"]
            .iter()
            .map(|t| EmulatedType::parse(t).unwrap())
            .collect()
    }

    #[test]
    fn emulated_types_parse_and_refuse_bad_text() {
        let t = &types()[1];
        assert_eq!(t.name, "cpu");
        assert!((t.latency_ms(100) - 36.0).abs() < 1e-9);
        assert_eq!(t.latency.to_string(), "3,0.33");
        for bad in [
            "gpu:1:2",
            "gpu:a:0.1:1",
            ":1:0.1:1",
            "gpu:1:0.1:0",
            "gpu:0:0:1",
            "g:-1:1:1",
        ] {
            assert!(EmulatedType::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_types_that_serve_the_largest_query_in_time_get_a_homogeneous_pool() {
        let config = KairosLiveConfig {
            types: types(),
            hetero: None,
            budget_per_hour: 1.0,
            qos_ms: 140.0,
            hidden: 64,
            kairos_latency: KairosLatency::Measured,
            start_rate: 10.0,
            rate_step: 1.2,
            max_rate: 20.0,
            seconds_per_trial: 1.0,
            min_queries: 10,
            trials: 1,
            goodput_rate: 10.0,
            policies: vec![Policy::Kairos, Policy::LeastOutstanding],
        };
        let s = setups(&config, &[1, 3]);
        let pools: Vec<&[usize]> = s.iter().map(|s| s.pool.as_slice()).collect();
        // cpu takes 333 ms at 1000 rows: no homogeneous cpu pool; gpu: 2 for $1/h.
        assert_eq!(pools, vec![&[1, 3][..], &[1, 3], &[2, 0], &[2, 0]]);
        assert!(s[2].homogeneous() && !s[0].homogeneous());
        // 413 rows is the cpu's last size within 140 ms.
        let sizes = [10, 400, 420, 1000];
        assert_eq!(share_over_limit(&config.types[1], 140.0, &sizes), 0.5);
        assert_eq!(share_over_limit(&config.types[0], 140.0, &sizes), 0.0);
    }

    #[test]
    fn the_nominal_profile_is_the_types_linear_latencies() {
        let t = types();
        let p = emulated_profile(&t, 140.0, |i, n| t[i].latency_ms(n)).unwrap();
        assert_eq!(p.types[p.base].instance.name, "gpu");
        assert!((p.latency_ms(1, 500) - t[1].latency_ms(500)).abs() < 1e-9);
        assert!(Policy::KairosOnePerCall
            .yaml(140.0, KairosLatency::Measured)
            .contains("batch_queued_jobs: false"));
        assert!(!Policy::Kairos
            .yaml(140.0, KairosLatency::Learned)
            .contains("profiles"));
    }
}
