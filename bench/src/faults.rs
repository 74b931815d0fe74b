//! Faults of the network under steady load: a remote executor beside a local replica whose link
//! is cut and healed, cut one way, flapped and throttled, and a HAMS primary partitioned and
//! healed, cut off from the front end only (its backup still reaching it) and healed, and healed
//! the moment its backup is promoted; per scenario, what the clients saw (sent, answered, failed by status, wrong, answered
//! twice), what the HAMS journals say (contradicted outputs), how long no right answer came, and
//! how long after the heal the faulted host was serving (or, for HAMS, protecting) again.
//!
//! The hosts, the faults and the clients are the integration tests' own ([`weir_faults`]): the
//! same namespaces, veth pairs and bridge, the same closed-loop clients with request ids and the
//! same checker. The graph runs in this process; executors and HAMS members are this binary's
//! `executor` subcommand run inside their namespaces. The reference is measured in the same run:
//! the answer rate before the fault, against which the rate during it is a ratio.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use weir::hams::journal::{check, read_dir};
use weir::{load_graph, start, RunningGraph, RuntimeOptions};
use weir_faults::load::{inputs, Load, Outcome, Reference, Stateful};
use weir_faults::netns::{Lan, Netns};

use crate::process::spawn_ready;

/// The zenoh port every host listens on inside its own namespace.
const PORT: u16 = 7447;

/// Jobs the executor must take after the heal to count as serving again.
const TAKES_LOAD: u64 = 20;

/// What one run measures.
#[derive(Debug, Clone)]
pub struct FaultsConfig {
    /// Closed-loop clients.
    pub clients: u64,
    /// Seconds of load before each fault (the reference rate).
    pub before: Duration,
    /// Seconds each fault lasts (the flapping link flaps this long, 2 s down / 2 s up).
    pub fault: Duration,
    /// Seconds of load after recovery.
    pub after: Duration,
    /// Where HAMS journals and graphs are written.
    pub dir: PathBuf,
    /// Only the scenarios whose name contains this text (all when `None`).
    pub only: Option<String>,
}

impl FaultsConfig {
    fn runs(&self, scenario: &str) -> bool {
        self.only.as_deref().is_none_or(|o| scenario.contains(o))
    }
}

/// The scenario whose answers per second are plotted.
pub const PLOTTED: &str = "executor partition + heal";

/// One scenario's figures.
#[derive(Debug, Clone)]
pub struct FaultRow {
    /// The scenario.
    pub scenario: &'static str,
    /// Requests sent, and answered.
    pub sent: u64,
    /// Requests answered (with anything).
    pub answered: u64,
    /// Failed requests by error class.
    pub failed: BTreeMap<&'static str, u64>,
    /// Answers unequal to the reference.
    pub wrong: usize,
    /// Requests answered more than once.
    pub twice: usize,
    /// HAMS: journal violations and released outputs contradicted (none for stateless ones).
    pub contradicted: Option<usize>,
    /// The longest time without a right answer from the fault on.
    pub unavailable: Duration,
    /// From the heal until the faulted host served (or protected) again; `None`: never.
    pub recover: Option<Duration>,
    /// Answers per second during the fault ÷ before it.
    pub rate_ratio: f64,
    /// When the fault began and ended, since the load started.
    pub fault_window: (Duration, Duration),
    /// Every answer (for the plot).
    pub outcome_timeline: Vec<weir_faults::load::Answer>,
}

/// The stateless scenarios' faults.
#[derive(Debug, Clone, Copy)]
enum LinkFault {
    Cut,
    OneWay,
    Flap,
    Throttle,
}

/// A child process killed when dropped.
struct Host(Child);

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The test models' folder, absolute (graphs written elsewhere name files by it).
fn models() -> PathBuf {
    let home = crate::weir_home();
    std::env::current_dir()
        .map_or(home.clone(), |cwd| cwd.join(&home))
        .join("models")
}

/// This binary's `executor` subcommand inside `ns`, listening on its address, journaling HAMS
/// events into `journal` when given.
fn executor_in(
    ns: &Netns,
    name: &str,
    extra: &[&str],
    journal: Option<&Path>,
) -> Result<(Host, String)> {
    let exe = std::env::current_exe().context("locating this executable")?;
    let endpoint = format!("tcp/{}:{PORT}", ns.ip());
    let mut cmd = ns.command(&exe.to_string_lossy());
    cmd.args(["executor", "--name", name, "--listen", &endpoint]);
    cmd.args(extra);
    if let Some(dir) = journal {
        cmd.env("WEIR_HAMS_JOURNAL", dir);
    }
    Ok((Host(spawn_ready(&mut cmd, name)?), endpoint))
}

fn start_graph(yaml: &str, path: &Path) -> Result<Arc<RunningGraph>> {
    std::fs::write(path, yaml)?;
    let loaded = load_graph(path).map_err(|e| anyhow!("{e}"))?;
    Ok(Arc::new(start(loaded.plan, RuntimeOptions::default())?))
}

/// The MLP graph on `replicas`, with executor `cpu-a` at `endpoint` when given.
fn mlp_yaml(endpoint: Option<&str>, replicas: &str) -> String {
    let executors = endpoint
        .map(|e| format!("executors:\n  - {{name: cpu-a, endpoint: \"{e}\"}}\n"))
        .unwrap_or_default();
    format!(
        "name: mlp\ninputs:\n  - {{name: x, dtype: f32, shape: [64]}}\n{executors}nodes:\n  - model:\n      id: m\n      path: {}\n      inputs: {{x: x}}\n      batching: {{max_size: 8}}\n      executor: {{timeout_ms: 2000}}\n      replicas: [{replicas}]\noutputs:\n  - {{name: probs, from: m.probs}}\n",
        models().join("mlp_a.onnx").display()
    )
}

/// The reference: 16 inputs answered by the same model in this process, no network involved.
fn mlp_reference(dir: &Path) -> Result<Reference> {
    let graph = start_graph(&mlp_yaml(None, "local"), &dir.join("mlp-local.yaml"))?;
    let inputs = inputs(16, 64);
    let mut outputs = Vec::new();
    for x in &inputs {
        let t = weir::Tensor::f32(vec![64], x.clone());
        let x = weir::NamedTensor {
            name: "x".into(),
            tensor: t,
        };
        let r = graph.runtime().infer(vec![x])?;
        let probs = r.output("probs").and_then(weir::Tensor::as_f32);
        outputs.push(probs.ok_or_else(|| anyhow!("no probs"))?.to_vec());
    }
    Ok(Reference {
        input: "x".into(),
        output: "probs".into(),
        inputs,
        outputs,
    })
}

/// Jobs sent to replica `cpu-a` so far.
fn remote_jobs(graph: &RunningGraph) -> u64 {
    graph
        .replica_pools()
        .first()
        .and_then(|(_, p)| p.replica_states().into_iter().find(|s| s.0 == "cpu-a"))
        .map_or(0, |s| s.3)
}

/// Polls `done` every 20 ms for up to `limit`; the time it took, or `None`.
fn time_until(limit: Duration, mut done: impl FnMut() -> bool) -> Option<Duration> {
    let t = Instant::now();
    while t.elapsed() < limit {
        if done() {
            return Some(t.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Right answers per second between `from` and `to`.
fn rate(outcome: &Outcome, from: Duration, to: Duration) -> f64 {
    let n = outcome
        .timeline
        .iter()
        .filter(|a| a.failure.is_none() && a.at >= from && a.at < to)
        .count();
    n as f64 / (to - from).as_secs_f64().max(1e-3)
}

/// Applies `fault` to `ns` for `config.fault`.
fn inject(ns: &Netns, fault: LinkFault, length: Duration) {
    match fault {
        LinkFault::Cut => {
            ns.cut();
            std::thread::sleep(length);
            ns.heal();
        }
        LinkFault::OneWay => {
            ns.cut_towards();
            std::thread::sleep(length);
            ns.heal_towards();
        }
        LinkFault::Throttle => {
            ns.throttle("64kbit");
            std::thread::sleep(length);
            ns.unthrottle();
        }
        LinkFault::Flap => {
            let until = Instant::now() + length;
            while Instant::now() < until {
                ns.cut();
                std::thread::sleep(Duration::from_secs(2));
                ns.heal();
                std::thread::sleep(Duration::from_secs(2));
            }
        }
    }
}

fn row(
    scenario: &'static str,
    outcome: Outcome,
    window: (Duration, Duration),
    before: Duration,
    recover: Option<Duration>,
    contradicted: Option<usize>,
) -> FaultRow {
    let end = outcome.timeline.last().map_or(window.1, |a| a.at);
    let reference = rate(&outcome, window.0.saturating_sub(before), window.0);
    FaultRow {
        scenario,
        sent: outcome.sent,
        answered: outcome.timeline.len() as u64,
        failed: outcome.failed.iter().map(|(k, v)| (*k, v.0)).collect(),
        wrong: outcome.wrong.len(),
        twice: outcome.not_once.iter().filter(|(_, n)| *n > 1).count(),
        contradicted,
        unavailable: outcome.longest_silence(window.0, end),
        recover,
        rate_ratio: rate(&outcome, window.0, window.1) / reference.max(1e-9),
        fault_window: window,
        outcome_timeline: outcome.timeline,
    }
}

/// A remote executor beside a local replica, its link suffering `fault`.
fn link_scenario(
    scenario: &'static str,
    fault: LinkFault,
    config: &FaultsConfig,
    reference: &Arc<Reference>,
) -> Result<FaultRow> {
    let ns = Netns::create();
    let (_executor, endpoint) = executor_in(
        &ns,
        "cpu-a",
        &[
            "--model",
            &format!("m={}", models().join("mlp_a.onnx").display()),
            "--max-batch",
            "8",
        ],
        None,
    )?;
    let slug: String = scenario
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let path = config.dir.join(format!("mlp-{slug}.yaml"));
    let graph = start_graph(&mlp_yaml(Some(&endpoint), "cpu-a, local"), &path)?;
    let load = Load::start(&graph, reference, config.clients);
    std::thread::sleep(config.before);
    let from = load.elapsed();
    inject(&ns, fault, config.fault);
    let to = load.elapsed();
    let at_heal = remote_jobs(&graph);
    let recover = time_until(Duration::from_secs(60), || {
        remote_jobs(&graph) >= at_heal + TAKES_LOAD
    });
    std::thread::sleep(config.after);
    let outcome = load.finish();
    if let Ok(g) = Arc::try_unwrap(graph) {
        g.shutdown();
    }
    Ok(row(
        scenario,
        outcome,
        (from, to),
        config.before,
        recover,
        None,
    ))
}

/// The HAMS scenarios' faults, all of the primary `fa` while its process keeps running.
#[derive(Debug, Clone, Copy)]
enum HamsFault {
    /// Its link cut both ways (from the front end and from its backup) for `config.fault`.
    Partition,
    /// Cut off from the front end only (its backup still reaches it) for `config.fault`.
    FrontEnd,
    /// Its link cut until the backup is promoted, then healed at once: a batch in flight at it.
    HealedAtPromotion,
}

/// A HAMS `track` node on members in two namespaces of one bridge; its primary suffering `fault`,
/// then healed: recovered once the old primary is the backup again.
fn hams_scenario(
    scenario: &'static str,
    fault: HamsFault,
    config: &FaultsConfig,
) -> Result<FaultRow> {
    let journal = config.dir.join("hams-journal");
    let _ = std::fs::remove_dir_all(&journal);
    std::fs::create_dir_all(&journal)?;
    let lan = Lan::create(2);
    let gru = format!("track={}", models().join("gru_stream.onnx").display());
    let member = |ns: &Netns, name: &str, peer: Option<&str>| -> Result<(Host, String)> {
        let mut extra = vec!["--stateful", gru.as_str()];
        if let Some(p) = peer {
            extra.extend(["--connect", p]);
        }
        executor_in(ns, name, &extra, Some(&journal))
    };
    let (_a, ea) = member(&lan.hosts[0], "fa", None)?;
    let (_b, eb) = member(&lan.hosts[1], "fb", Some(&ea))?;
    let yaml = format!(
        "name: track\ninputs:\n  - {{name: x, dtype: f32, shape: [8]}}\nexecutors:\n  - {{name: fa, endpoint: \"{ea}\"}}\n  - {{name: fb, endpoint: \"{eb}\"}}\nnodes:\n  - model:\n      id: track\n      path: {}\n      inputs: {{x: x}}\n      batching: {{max_size: 4}}\n      state: {{inputs: [h_in], outputs: [h_out]}}\n      replicas: [fa, fb]\n      replication: {{mode: nspb, detect_ms: 300}}\noutputs:\n  - {{name: y, from: track.y}}\n",
        models().join("gru_stream.onnx").display()
    );
    let graph = start_graph(&yaml, &config.dir.join("track.yaml"))?;
    let manager = graph.hams().ok_or_else(|| anyhow!("no HAMS manager"))?;
    manager.journal_to(&journal);
    let backup_is = |m: &str| {
        manager
            .roles()
            .first()
            .is_some_and(|r| r.3.as_deref() == Some(m))
    };
    let load = Load::start(&graph, &Arc::new(Stateful { features: 8 }), config.clients);
    std::thread::sleep(config.before);
    let from = load.elapsed();
    let primary = &lan.hosts[0];
    match fault {
        HamsFault::Partition => {
            primary.cut();
            std::thread::sleep(config.fault);
            primary.heal();
        }
        HamsFault::FrontEnd => {
            primary.cut_from_here();
            std::thread::sleep(config.fault);
            primary.heal_from_here();
        }
        HamsFault::HealedAtPromotion => {
            primary.cut();
            let promoted = time_until(Duration::from_secs(60), || {
                manager
                    .roles()
                    .first()
                    .is_some_and(|r| r.2.as_deref() == Some("weir/executor/fb"))
            });
            primary.heal();
            if promoted.is_none() {
                bail!("{scenario}: the backup was never promoted");
            }
        }
    }
    let to = load.elapsed();
    let recover = time_until(Duration::from_secs(60), || backup_is("weir/executor/fa"));
    std::thread::sleep(config.after);
    let outcome = load.finish();
    match Arc::try_unwrap(graph) {
        Ok(g) => g.shutdown(),
        Err(_) => bail!("the graph is still shared"),
    }
    let report = check(&read_dir(&journal)?);
    let contradicted = report.violations.len() + report.divergence.differ;
    for v in report.violations.iter().take(5) {
        eprintln!("{scenario}: {v}");
    }
    Ok(row(
        scenario,
        outcome,
        (from, to),
        config.before,
        recover,
        Some(contradicted),
    ))
}

/// Runs every scenario in turn.
///
/// # Errors
/// When a host, the graph or the journal cannot be made or read.
pub fn run_all(config: &FaultsConfig) -> Result<Vec<FaultRow>> {
    std::fs::create_dir_all(&config.dir)?;
    let reference = Arc::new(mlp_reference(&config.dir)?);
    let scenarios: [(&'static str, LinkFault); 4] = [
        (PLOTTED, LinkFault::Cut),
        ("one-way partition", LinkFault::OneWay),
        ("flapping link (2 s down / 2 s up)", LinkFault::Flap),
        ("throttled link (64 kbit/s)", LinkFault::Throttle),
    ];
    let mut rows = Vec::new();
    for (name, fault) in scenarios.into_iter().filter(|(n, _)| config.runs(n)) {
        eprintln!("scenario: {name}");
        rows.push(link_scenario(name, fault, config, &reference)?);
    }
    let hams: [(&'static str, HamsFault); 3] = [
        ("HAMS primary partition + heal", HamsFault::Partition),
        (
            "HAMS front end cut off from a live primary + heal",
            HamsFault::FrontEnd,
        ),
        (
            "HAMS primary healed at its backup's promotion",
            HamsFault::HealedAtPromotion,
        ),
    ];
    for (name, fault) in hams.into_iter().filter(|(n, _)| config.runs(n)) {
        eprintln!("scenario: {name}");
        rows.push(hams_scenario(name, fault, config)?);
    }
    Ok(rows)
}

/// The table: one row per scenario.
pub fn table(rows: &[FaultRow], config: &FaultsConfig) -> String {
    let mut out = format!(
        "{} closed-loop clients; {:.0} s of load before each fault, the fault {:.0} s, {:.0} s after recovery\n\n",
        config.clients,
        config.before.as_secs_f64(),
        config.fault.as_secs_f64(),
        config.after.as_secs_f64()
    );
    out.push_str("| scenario | sent | answered | failed (by status) | wrong | twice | contradicted | longest without an answer (s) | recovered after heal (s) | rate in fault ÷ before |\n");
    out.push_str("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|\n");
    for r in rows {
        let failed = if r.failed.is_empty() {
            "0".to_string()
        } else {
            r.failed
                .iter()
                .map(|(k, v)| format!("{v} {k}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {:.2} | {} | {:.2} |\n",
            r.scenario,
            r.sent,
            r.answered,
            failed,
            r.wrong,
            r.twice,
            r.contradicted.map_or("—".into(), |c| c.to_string()),
            r.unavailable.as_secs_f64(),
            r.recover
                .map_or("never".into(), |d| format!("{:.2}", d.as_secs_f64())),
            r.rate_ratio
        ));
    }
    out
}

/// A series of (seconds since the start, per second) points.
pub type Series = Vec<(f64, f64)>;

/// Right answers and failures per half second through `row`'s fault.
pub fn timeline(row: &FaultRow) -> (Series, Series) {
    let bin = 0.5;
    let end = row
        .outcome_timeline
        .last()
        .map_or(0.0, |a| a.at.as_secs_f64());
    let bins = (end / bin).ceil() as usize + 1;
    let (mut right, mut failed) = (vec![0u64; bins], vec![0u64; bins]);
    for a in &row.outcome_timeline {
        let i = (a.at.as_secs_f64() / bin) as usize;
        match a.failure {
            None => right[i] += 1,
            Some(_) => failed[i] += 1,
        }
    }
    let per_s = |v: &[u64]| {
        v.iter()
            .enumerate()
            .map(|(i, n)| (i as f64 * bin, *n as f64 / bin))
            .collect()
    };
    (per_s(&right), per_s(&failed))
}
