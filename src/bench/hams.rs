//! `weir bench hams`: HAMS's normal-case cost and failover time on real executor processes
//! (notes/hams.md §5.2, X1, X3, X4).
//!
//! **Overhead.** Three scaled-down service graphs, each stateful node on executor processes: the
//! auto-pilot chain (stateless perception → two adjacent stateful GRUs → argmax), a single stateful
//! GRU last in the graph (nothing downstream overlaps its state delivery, the paper's condition
//! C2 failing), and an online learner with a 1 MiB state (512 × 512 weights). Each runs under
//! `none` (one executor per stateful node, no backup: the reference), `nspb` and `remus`
//! (stop-and-buffer), closed loop, and reports throughput and latency percentiles as medians over
//! repeats with ratios to `none` measured in the same run.
//!
//! **Failover.** One stateful GRU under NSPB (and under Remus) with closed-loop load; its primary
//! is SIGKILLed at a random moment; per trial: *detection* (kill → the manager learns of it),
//! *protocol* (promotion, rollback, retries, resume) and *handover* (resume → the first reply
//! after it), and whether every request was answered once. Medians over the trials.
//!
//! Both parts also run the checkpoint-and-replay baseline (`replication: {mode: checkpoint}`:
//! replies at once, the whole state to the backup every `--checkpoint-every` batches, replay of
//! the batches since then after a failover). [`super::hams_divergence`] measures what that
//! replay does to released outputs (X7).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use rand::{Rng, SeedableRng};

use crate::bench::remote::{free_endpoint, spawn_ready};
use crate::{load_graph, start, NamedTensor, RunningGraph, RuntimeOptions, Tensor};

/// What `weir bench hams` runs.
#[derive(Debug, Clone)]
pub struct HamsBenchConfig {
    /// The models folder (`.weir/models`).
    pub models: PathBuf,
    /// Requests per measurement.
    pub requests: usize,
    /// Closed-loop concurrency.
    pub concurrency: usize,
    /// Measurements per (graph, mode); medians are reported.
    pub repeats: usize,
    /// Failover trials per mode.
    pub trials: usize,
    /// Rows per batch at the stateful nodes.
    pub batch: usize,
    /// Emulated extra compute per batch at stateful nodes, ms.
    pub compute_ms: f64,
    /// Service graphs of the overhead part.
    pub services: Vec<Service>,
    /// Batches between two checkpoints in `checkpoint` mode.
    pub checkpoint_every: u64,
}

/// What a benchmark's executors run with beyond the defaults.
#[derive(Debug, Clone, Default)]
pub(super) struct MemberExtras {
    /// `--perturb`: each batch's rows in a seeded order per (node, version, epoch).
    pub perturb: bool,
    /// `WEIR_HAMS_JOURNAL`: the folder every member journals into.
    pub journal: Option<PathBuf>,
}

/// A `weir executor` serving stateful models, SIGKILLed when dropped.
pub(super) struct MemberProcess {
    child: Child,
}

impl MemberProcess {
    fn spawn(
        name: &str,
        endpoint: &str,
        peers: &[String],
        models: &[(String, PathBuf)],
        compute_ms: f64,
        extras: &MemberExtras,
    ) -> Result<Self> {
        let exe = std::env::current_exe().context("locating the weir binary")?;
        let mut cmd = Command::new(exe);
        cmd.args(["executor", "--name", name, "--listen", endpoint]);
        if extras.perturb {
            cmd.arg("--perturb");
        }
        if let Some(dir) = &extras.journal {
            cmd.env("WEIR_HAMS_JOURNAL", dir);
        }
        for p in peers {
            cmd.args(["--connect", p]);
        }
        for (node, file) in models {
            cmd.arg("--stateful")
                .arg(format!("{node}={}", file.display()));
        }
        let child = spawn_ready(cmd.args(["--compute-ms", &compute_ms.to_string()]), name)?;
        Ok(MemberProcess { child })
    }

    pub(super) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn signal(&self, sig: &str) {
        let _ = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .stderr(Stdio::null())
            .status();
    }
}

impl Drop for MemberProcess {
    fn drop(&mut self) {
        self.signal("-CONT");
        self.kill();
    }
}

/// The service graphs measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    /// perception → motion (stateful) → route (stateful) → argmax.
    Autopilot,
    /// One stateful GRU, last in the graph.
    Tracker,
    /// An online learner with a 1 MiB state.
    Online,
}

impl Service {
    /// `autopilot`, `tracker` or `online`.
    ///
    /// # Errors
    /// On any other name.
    pub fn parse(name: &str) -> Result<Service> {
        match name.trim() {
            "autopilot" => Ok(Service::Autopilot),
            "tracker" => Ok(Service::Tracker),
            "online" => Ok(Service::Online),
            other => bail!("unknown service graph `{other}` (autopilot, tracker, online)"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Service::Autopilot => "auto-pilot chain (2 stateful)",
            Service::Tracker => "tracker (stateful last)",
            Service::Online => "online learner (1 MiB state)",
        }
    }

    /// (node, model file) of each stateful node.
    fn stateful(self) -> Vec<(&'static str, &'static str)> {
        match self {
            Service::Autopilot => vec![("motion", "gru_stream.onnx"), ("route", "gru_chain.onnx")],
            Service::Tracker => vec![("track", "gru_stream.onnx")],
            Service::Online => vec![("learner", "online_wide.onnx")],
        }
    }
}

/// The executors of one graph: per stateful node, `[primary, backup]` (only the primary under
/// `none`): (name, endpoint, process).
pub(super) struct Deployment {
    pub(super) members: Vec<(String, String, MemberProcess)>,
}

impl Deployment {
    fn start(config: &HamsBenchConfig, service: Service, mode: &str, tag: &str) -> Result<Self> {
        Deployment::start_nodes(
            config,
            &service.stateful(),
            mode,
            tag,
            &MemberExtras::default(),
        )
    }

    /// Executors for stateful nodes `nodes` ((node, model file) pairs).
    pub(super) fn start_nodes(
        config: &HamsBenchConfig,
        nodes: &[(&str, &str)],
        mode: &str,
        tag: &str,
        extras: &MemberExtras,
    ) -> Result<Self> {
        let mut members: Vec<(String, String, MemberProcess)> = Vec::new();
        let copies = if mode == "none" { 1 } else { 2 };
        for &(node, file) in nodes {
            for c in 0..copies {
                let name = format!("hb-{tag}-{node}-{c}");
                let endpoint = free_endpoint()?;
                let peers: Vec<String> = members.iter().map(|m| m.1.clone()).collect();
                let p = MemberProcess::spawn(
                    &name,
                    &endpoint,
                    &peers,
                    &[(node.to_string(), config.models.join(file))],
                    config.compute_ms,
                    extras,
                )?;
                members.push((name, endpoint, p));
            }
        }
        Ok(Deployment { members })
    }

    pub(super) fn replicas(&self, node: &str) -> Vec<&str> {
        self.members
            .iter()
            .filter(|m| m.0.contains(&format!("-{node}-")))
            .map(|m| m.0.as_str())
            .collect()
    }
}

pub(super) fn stateful_node(
    id: &str,
    file: &Path,
    input: &str,
    state: (&str, &str),
    batch: usize,
    replicas: &[&str],
    replication: &str,
) -> String {
    format!(
        "  - model:\n      id: {id}\n      path: {}\n      inputs: {input}\n      batching: {{max_size: {batch}}}\n      state: {{inputs: [{}], outputs: [{}]}}\n      replicas: [{}]\n      replication: {replication}\n",
        file.display(),
        state.0,
        state.1,
        replicas.join(", ")
    )
}

fn graph_yaml(config: &HamsBenchConfig, service: Service, mode: &str, d: &Deployment) -> String {
    let mut yaml = String::from("name: hams-bench\n");
    let m = |f: &str| config.models.join(f);
    let b = config.batch;
    let mode = &format!(
        "{{mode: {mode}, detect_ms: 200, checkpoint_every: {}}}",
        config.checkpoint_every
    );
    match service {
        Service::Online => yaml.push_str("inputs:\n  - {name: x, dtype: f32, shape: [512]}\n  - {name: label, dtype: f32, shape: [512]}\n  - {name: train, dtype: f32, shape: [1]}\n"),
        _ => yaml.push_str("inputs:\n  - {name: x, dtype: f32, shape: [16]}\n"),
    }
    yaml.push_str("executors:\n");
    for (name, endpoint, _) in &d.members {
        yaml.push_str(&format!("  - {{name: {name}, endpoint: \"{endpoint}\"}}\n"));
    }
    yaml.push_str("nodes:\n");
    match service {
        Service::Autopilot => {
            yaml.push_str(&format!("  - model: {{id: perception, path: {}, inputs: {{x: x}}, batching: {{max_size: {b}}}}}\n", m("affine.onnx").display()));
            yaml.push_str(&stateful_node(
                "motion",
                &m("gru_stream.onnx"),
                "{x: perception.y}",
                ("h_in", "h_out"),
                b,
                &d.replicas("motion"),
                mode,
            ));
            yaml.push_str(&stateful_node(
                "route",
                &m("gru_chain.onnx"),
                "{x: motion.y}",
                ("h_in", "h_out"),
                b,
                &d.replicas("route"),
                mode,
            ));
            yaml.push_str("  - argmax: {id: action, input: route.y}\noutputs:\n  - {name: y, from: action.index}\n");
        }
        Service::Tracker => {
            yaml.push_str(&format!("  - model: {{id: perception, path: {}, inputs: {{x: x}}, batching: {{max_size: {b}}}}}\n", m("affine.onnx").display()));
            yaml.push_str(&stateful_node(
                "track",
                &m("gru_stream.onnx"),
                "{x: perception.y}",
                ("h_in", "h_out"),
                b,
                &d.replicas("track"),
                mode,
            ));
            yaml.push_str("outputs:\n  - {name: y, from: track.y}\n");
        }
        Service::Online => {
            yaml.push_str(&stateful_node(
                "learner",
                &m("online_wide.onnx"),
                "{x: x, label: label, train: train}",
                ("w_in", "w_out"),
                b,
                &d.replicas("learner"),
                mode,
            ));
            yaml.push_str("outputs:\n  - {name: y, from: learner.probs}\n");
        }
    }
    yaml
}

fn request(service: Service, rng: &mut rand::rngs::StdRng) -> Vec<NamedTensor> {
    let named = |name: &str, tensor: Tensor| NamedTensor {
        name: name.into(),
        tensor,
    };
    match service {
        Service::Online => {
            let x: Vec<f32> = (0..512).map(|_| rng.random_range(-1.0..1.0)).collect();
            let mut label = vec![0.0; 512];
            label[rng.random_range(0..512)] = 1.0;
            let train = if rng.random_bool(0.5) { 1.0 } else { 0.0 };
            vec![
                named("x", Tensor::f32(vec![512], x)),
                named("label", Tensor::f32(vec![512], label)),
                named("train", Tensor::f32(vec![1], vec![train])),
            ]
        }
        _ => vec![named(
            "x",
            Tensor::f32(
                vec![16],
                (0..16).map(|_| rng.random_range(-1.0..1.0)).collect(),
            ),
        )],
    }
}

/// One closed-loop run: per request (submitted at, answered at, ok), by index.
pub(super) struct Run {
    started: Instant,
    pub(super) ended: Instant,
    pub(super) done: Vec<(Instant, Instant, bool)>,
    pub(super) answers: HashMap<usize, usize>,
}

impl Run {
    /// Every request answered exactly once, none failed.
    pub(super) fn answered_once(&self, n: usize) -> bool {
        self.done.iter().all(|d| d.2)
            && self.answers.len() == n
            && self.answers.values().all(|&c| c == 1)
    }
}

/// Runs `n` random requests of `service` `concurrency` at a time; `during(i)` after submitting
/// request `i`.
fn closed_loop(
    graph: &RunningGraph,
    service: Service,
    n: usize,
    concurrency: usize,
    seed: u64,
    during: impl FnMut(usize),
) -> Run {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    closed_loop_of(
        graph,
        n,
        concurrency,
        |_| request(service, &mut rng),
        during,
    )
}

/// Runs requests `make(0..n)` `concurrency` at a time; `during(i)` after submitting request `i`.
pub(super) fn closed_loop_of(
    graph: &RunningGraph,
    n: usize,
    concurrency: usize,
    mut make: impl FnMut(usize) -> Vec<NamedTensor>,
    mut during: impl FnMut(usize),
) -> Run {
    let (tx, rx) = crossbeam_channel::unbounded::<(usize, Instant, bool)>();
    let mut submitted: Vec<Instant> = Vec::with_capacity(n);
    let mut done: Vec<Option<(Instant, bool)>> = vec![None; n];
    let mut answers: HashMap<usize, usize> = HashMap::new();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(120);
    let mut received = 0;
    while received < n && Instant::now() < deadline {
        while submitted.len() < n && submitted.len() - received < concurrency {
            let i = submitted.len();
            let tx = tx.clone();
            submitted.push(Instant::now());
            let ok = graph.runtime().submit(
                make(i),
                Box::new(move |r| {
                    if let Err(e) = &r {
                        tracing::warn!(request = i, error = %e, "A benchmark request failed.");
                    }
                    let _ = tx.send((i, Instant::now(), r.is_ok()));
                }),
            );
            if ok.is_err() {
                done[i] = Some((Instant::now(), false));
                received += 1;
            }
            during(i);
        }
        if let Ok((i, at, ok)) = rx.recv_timeout(Duration::from_secs(1)) {
            *answers.entry(i).or_default() += 1;
            if done[i].is_none() {
                done[i] = Some((at, ok));
                received += 1;
            }
        }
    }
    let ended = Instant::now();
    std::thread::sleep(Duration::from_millis(100));
    while let Ok((i, _, _)) = rx.try_recv() {
        *answers.entry(i).or_default() += 1;
    }
    let done = submitted
        .iter()
        .zip(done)
        .map(|(&s, d)| match d {
            Some((at, ok)) => (s, at, ok),
            None => (s, ended, false),
        })
        .collect();
    Run {
        started,
        ended,
        done,
        answers,
    }
}

pub(super) fn start_graph(yaml: &str, tag: &str) -> Result<RunningGraph> {
    let path =
        std::env::temp_dir().join(format!("weir-bench-hams-{tag}-{}.yaml", std::process::id()));
    std::fs::write(&path, yaml)?;
    let graph = load_graph(&path).map_err(|e| anyhow!("{e}"))?;
    let running = start(graph.plan, RuntimeOptions::default())?;
    let _ = std::fs::remove_file(&path);
    Ok(running)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

pub(super) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    percentile(&v, 0.5)
}

/// One (service, mode) overhead measurement, medians over repeats.
#[derive(Debug, Clone)]
pub struct OverheadRow {
    /// Service graph.
    pub service: &'static str,
    /// `none`, `nspb` or `remus`.
    pub mode: &'static str,
    /// Requests per second.
    pub throughput: f64,
    /// Latency percentiles, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
}

/// Part 1: normal-case latency and throughput per service graph and mode.
///
/// # Errors
/// When an executor or a graph cannot start, or a request fails.
pub fn overhead(config: &HamsBenchConfig) -> Result<Vec<OverheadRow>> {
    let mut rows = Vec::new();
    for &service in &config.services {
        for mode in ["none", "nspb", "remus", "checkpoint"] {
            let mut tputs = Vec::new();
            let mut p50s = Vec::new();
            let mut p99s = Vec::new();
            for r in 0..config.repeats {
                let tag = format!("o{r}-{mode}");
                let d = Deployment::start(config, service, mode, &tag)?;
                let graph = start_graph(&graph_yaml(config, service, mode, &d), &tag)?;
                let _warm = closed_loop(
                    &graph,
                    service,
                    config.concurrency * 8,
                    config.concurrency,
                    1,
                    |_| {},
                );
                let run = closed_loop(
                    &graph,
                    service,
                    config.requests,
                    config.concurrency,
                    2 + r as u64,
                    |_| {},
                );
                graph.shutdown();
                drop(d);
                let failed = run.done.iter().filter(|d| !d.2).count();
                if failed > 0 {
                    bail!("{}, {mode}: {failed} requests failed", service.name());
                }
                let mut lat: Vec<f64> = run
                    .done
                    .iter()
                    .map(|(s, e, _)| (*e - *s).as_secs_f64() * 1e3)
                    .collect();
                lat.sort_by(f64::total_cmp);
                tputs.push(run.done.len() as f64 / (run.ended - run.started).as_secs_f64());
                p50s.push(percentile(&lat, 0.5));
                p99s.push(percentile(&lat, 0.99));
            }
            rows.push(OverheadRow {
                service: service.name(),
                mode,
                throughput: median(tputs),
                p50_ms: median(p50s),
                p99_ms: median(p99s),
            });
        }
    }
    Ok(rows)
}

/// One failover trial.
#[derive(Debug, Clone)]
pub struct Trial {
    /// Kill → the manager learnt of it, ms.
    pub detection_ms: f64,
    /// Promotion, rollback and retries, ms.
    pub protocol_ms: f64,
    /// Resume → the first reply after it, ms.
    pub handover_ms: f64,
    /// Kill → the first reply after the resume, ms.
    pub total_ms: f64,
    /// Requests run again.
    pub retried: usize,
    /// Batches replayed from a checkpoint.
    pub replayed: u64,
    /// Every request answered exactly once, none failed.
    pub exactly_once: bool,
}

/// How the primary fails in a trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// SIGKILL: its zenoh link drops, its liveliness token goes.
    Kill,
    /// SIGSTOP: it stays connected and silent; only the `detect_ms` timeout finds it.
    Stop,
}

/// Part 2: `trials` failures of a stateful primary under load, per (mode, fault): SIGKILL under
/// NSPB and Remus, and SIGSTOP under NSPB (detection by the 200 ms timeout).
///
/// # Errors
/// When an executor or the graph cannot start, or the failover did not happen.
pub fn failover(config: &HamsBenchConfig) -> Result<Vec<(&'static str, Vec<Trial>)>> {
    let mut out = Vec::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(17);
    for (label, mode, fault) in [
        ("nspb, SIGKILL", "nspb", Fault::Kill),
        ("remus, SIGKILL", "remus", Fault::Kill),
        ("nspb, SIGSTOP", "nspb", Fault::Stop),
        ("checkpoint, SIGKILL", "checkpoint", Fault::Kill),
    ] {
        let mut trials = Vec::new();
        for t in 0..config.trials {
            let tag = format!("f{t}-{mode}");
            let mut d = Deployment::start(config, Service::Tracker, mode, &tag)?;
            let graph = start_graph(&graph_yaml(config, Service::Tracker, mode, &d), &tag)?;
            let _warm = closed_loop(&graph, Service::Tracker, 64, config.concurrency, 1, |_| {});
            // Under checkpoints, kill about half an interval after a checkpoint (the paper kills
            // LS at the 50th batch of 150): replay then costs half an interval on average.
            let (n, kill_at) = if mode == "checkpoint" {
                let at = config.checkpoint_every as usize * config.batch * 3 / 2;
                (at * 2, at)
            } else {
                let n = config.requests.max(400);
                (n, rng.random_range(n / 4..n / 2))
            };
            let mut killed_at = None;
            let run = {
                let primary = &mut d.members[0].2;
                closed_loop(
                    &graph,
                    Service::Tracker,
                    n,
                    config.concurrency,
                    3 + t as u64,
                    |i| {
                        if i == kill_at {
                            match fault {
                                Fault::Kill => primary.kill(),
                                Fault::Stop => primary.signal("-STOP"),
                            }
                            killed_at = Some(Instant::now());
                        }
                    },
                )
            };
            let recoveries = graph.hams().map(|h| h.recoveries()).unwrap_or_default();
            graph.shutdown();
            let (Some(killed), Some(rec)) = (killed_at, recoveries.first()) else {
                bail!("{mode} trial {t}: no failover happened");
            };
            let resumed = rec.detected_at + rec.protocol;
            let first_after = run
                .done
                .iter()
                .filter(|(_, e, ok)| *ok && *e > resumed)
                .map(|(_, e, _)| *e)
                .min()
                .unwrap_or(run.ended);
            let ms = |d: Duration| d.as_secs_f64() * 1e3;
            trials.push(Trial {
                detection_ms: ms(rec.detected_at.saturating_duration_since(killed)),
                protocol_ms: ms(rec.protocol),
                handover_ms: ms(first_after.saturating_duration_since(resumed)),
                total_ms: ms(first_after.saturating_duration_since(killed)),
                retried: rec.retried,
                replayed: rec.replayed,
                exactly_once: run.answered_once(n),
            });
        }
        out.push((label, trials));
    }
    Ok(out)
}

/// The tables, as Markdown.
pub fn tables(
    rows: &[OverheadRow],
    failovers: &[(&'static str, Vec<Trial>)],
    config: &HamsBenchConfig,
) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(s, "normal case: closed loop, concurrency {}, {} requests, batches ≤ {} rows at stateful nodes, {} ms emulated compute per stateful batch, checkpoints every {} batches, median of {} runs; ratios against `none` (no backup) of the same graph", config.concurrency, config.requests, config.batch, config.compute_ms, config.checkpoint_every, config.repeats);
    let _ = writeln!(s, "\n| service graph | mode | throughput (req/s) | ratio | p50 (ms) | p50 overhead | p99 (ms) | p99 overhead |\n|---|---|---|---|---|---|---|---|");
    for r in rows {
        let base = rows
            .iter()
            .find(|b| b.service == r.service && b.mode == "none");
        let (t, p50, p99) = base.map_or((f64::NAN, f64::NAN, f64::NAN), |b| {
            (b.throughput, b.p50_ms, b.p99_ms)
        });
        let _ = writeln!(
            s,
            "| {} | {} | {:.0} | {:.2} | {:.2} | {:+.1}% | {:.2} | {:+.1}% |",
            r.service,
            r.mode,
            r.throughput,
            r.throughput / t,
            r.p50_ms,
            (r.p50_ms / p50 - 1.0) * 100.0,
            r.p99_ms,
            (r.p99_ms / p99 - 1.0) * 100.0
        );
    }
    let _ = writeln!(s, "\nfailover: the tracker's primary fails under closed-loop load (detect_ms 200), {} trials per row, medians (min–max of total)", config.trials);
    let _ = writeln!(s, "\n| mode, fault | detection (ms) | protocol (ms) | handover (ms) | total (ms) | total range (ms) | retried requests | replayed batches | answered once, none failed |\n|---|---|---|---|---|---|---|---|---|");
    for (mode, trials) in failovers {
        let col = |f: fn(&Trial) -> f64| median(trials.iter().map(f).collect());
        let totals: Vec<f64> = trials.iter().map(|t| t.total_ms).collect();
        let lo = totals.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = totals.iter().copied().fold(0.0, f64::max);
        let _ = writeln!(
            s,
            "| {mode} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1}–{:.1} | {:.0} | {:.0} | {}/{} |",
            col(|t| t.detection_ms),
            col(|t| t.protocol_ms),
            col(|t| t.handover_ms),
            col(|t| t.total_ms),
            lo,
            hi,
            col(|t| t.retried as f64),
            col(|t| t.replayed as f64),
            trials.iter().filter(|t| t.exactly_once).count(),
            trials.len()
        );
    }
    s
}

/// X2: the online learner's (fixed 1 MiB state) p50 overhead over no replication per batch size,
/// clients = 2 × batch so batches fill; returns (batch, mode, overhead %) and the rows measured.
///
/// # Errors
/// As [`overhead`].
pub fn batch_sweep(
    config: &HamsBenchConfig,
    batches: &[usize],
) -> Result<Vec<(usize, &'static str, f64)>> {
    let mut out = Vec::new();
    for &batch in batches {
        let c = HamsBenchConfig {
            batch,
            concurrency: batch * 2,
            services: vec![Service::Online],
            ..config.clone()
        };
        let rows = overhead(&c)?;
        let base = rows
            .iter()
            .find(|r| r.mode == "none")
            .map_or(f64::NAN, |r| r.p50_ms);
        for r in rows.iter().filter(|r| r.mode != "none") {
            out.push((batch, r.mode, (r.p50_ms / base - 1.0) * 100.0));
        }
    }
    Ok(out)
}

/// The batch sweep as a Markdown table.
pub fn sweep_table(rows: &[(usize, &'static str, f64)], config: &HamsBenchConfig) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(s, "batch sweep (X2): online learner, 1 MiB state, {} ms emulated compute per batch, clients = 2 × batch, p50 overhead over no backup, median of {} runs\n", config.compute_ms, config.repeats);
    let _ = writeln!(
        s,
        "| rows per batch | nspb | remus | checkpoint |\n|---|---|---|---|"
    );
    let mut batches: Vec<usize> = rows.iter().map(|r| r.0).collect();
    batches.dedup();
    for b in batches {
        let cell = |m: &str| {
            rows.iter()
                .find(|r| r.0 == b && r.1 == m)
                .map_or("—".to_string(), |r| format!("{:+.1} %", r.2))
        };
        let _ = writeln!(
            s,
            "| {b} | {} | {} | {} |",
            cell("nspb"),
            cell("remus"),
            cell("checkpoint")
        );
    }
    s
}

/// R16 / X10: the cost of HAMS's lineage per batch of `rows` rows against the path length: one
/// hop appended (Algorithm 1) plus the dependency scan a stateful node makes before sending a
/// batch (per replicated node on the path, the highest version). Returns (hops, µs per batch),
/// medians over `iterations`.
pub fn lineage_cost(rows: usize, hops: &[usize], iterations: usize) -> Vec<(usize, f64)> {
    use weir_engine::lineage::{append_hop, LineageBuilder, LineageEntry, LineageView};
    hops.iter()
        .map(|&n| {
            let mut b = LineageBuilder::with_capacity(rows, n);
            for r in 0..rows {
                for h in 0..n as u32 {
                    b.push_entry(LineageEntry {
                        pred_node: h,
                        pred_seq: r as u64,
                        node: h + 1,
                        seq: 1000 + r as u64,
                    });
                }
                b.finish_row();
            }
            let list = b.finish();
            let mut times = Vec::with_capacity(iterations);
            for i in 0..iterations {
                let started = Instant::now();
                let next = append_hop(&list, &[n as u32], n as u32 + 1, i as u64);
                let view = LineageView::new(&next);
                let mut deps: Vec<(u32, u64)> = Vec::new();
                for r in 0..rows {
                    for e in view.row(r) {
                        match deps.iter_mut().find(|(node, _)| *node == e.node) {
                            Some(d) => d.1 = d.1.max(e.seq),
                            None => deps.push((e.node, e.seq)),
                        }
                    }
                }
                std::hint::black_box(&deps);
                times.push(started.elapsed().as_secs_f64() * 1e6);
            }
            (n, median(times))
        })
        .collect()
}
