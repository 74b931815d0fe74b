//! One set-up of a ParM experiment, run the same way by every ParM experiment: the `weir executor`
//! hosts it needs ([`Host`], one of them reached through a fault proxy when the straggler slows
//! its link), the graph started from its YAML, a warm-up, then open-loop Poisson load while the
//! straggler (if any) works, and what came back ([`Measured`]).
//!
//! Counters are read before and after the measured part, so the warm-up's jobs count in
//! nothing reported. A set-up also checks its own answers: every request answered once, none
//! with an error, and — on a parity-coded node — every job answered once at the node, real or
//! reconstructed. What fails is named in [`Measured::failures`]; the experiments refuse to print
//! a table while any set-up has one.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use weir::loadgen::{run_load, Arrival, LoadReport, LoadSpec};
use weir::workload::Workload;
use weir::{load_graph, start, RunningGraph, RuntimeOptions};
use weir_faults::proxy::FaultProxy;
use weir_operators::parity::ParityStats;

use super::straggler::Straggler;
use crate::process::{free_address, ExecutorProcess};

/// A `weir executor` host of a set-up, reached directly or through a fault proxy that a
/// [`Straggler::SlowLink`] slows.
pub(crate) struct Host {
    process: ExecutorProcess,
    proxy: Option<Arc<FaultProxy>>,
    endpoint: String,
}

impl Host {
    /// Starts executor `name` serving `models` (node id, file) with `instances` sessions each,
    /// behind a fault proxy when `proxied`.
    pub(crate) fn start(
        name: &str,
        models: &[(&str, &Path)],
        instances: usize,
        proxied: bool,
    ) -> Result<Host> {
        let address = free_address()?;
        let process = ExecutorProcess::spawn(name, &format!("tcp/{address}"), models, instances)?;
        let (proxy, endpoint) = if proxied {
            let target = address.parse().context("the executor's address")?;
            let proxy = Arc::new(FaultProxy::start(target).context("starting the fault proxy")?);
            let endpoint = format!("tcp/{}", proxy.addr());
            (Some(proxy), endpoint)
        } else {
            (None, format!("tcp/{address}"))
        };
        Ok(Host {
            process,
            proxy,
            endpoint,
        })
    }

    /// The zenoh endpoint graphs dial to reach it.
    pub(crate) fn endpoint(&self) -> &str {
        &self.endpoint
    }
}

/// The requests a set-up sends.
#[derive(Debug, Clone)]
pub(crate) enum Requests {
    /// Seeded random tensors of the graph's input shape (8 distinct).
    Random,
    /// A labelled CSV data set; accuracy is scored on output `label_output`.
    Labelled {
        /// The CSV file.
        path: PathBuf,
        /// The graph output holding the predicted class.
        label_output: String,
    },
}

/// The load of a set-up.
#[derive(Debug, Clone)]
pub(crate) struct Load {
    /// Poisson arrivals per second.
    pub rate: f64,
    /// Measured requests.
    pub requests: usize,
    /// Requests before them, at the same rate and under the same straggler, not counted.
    pub warmup: usize,
    /// Arrival and request-order seed.
    pub seed: u64,
    /// What is sent.
    pub requests_from: Requests,
}

/// What one set-up measured.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Latency to the first answer, ms: p50, p99, p99.9, max.
    pub latency_ms: [f64; 4],
    /// Requests sent.
    pub sent: usize,
    /// (correct, labelled) over every answer, when the requests are labelled.
    pub accuracy: Option<(usize, usize)>,
    /// The parity-coded node's counters over the measured requests (none without parity).
    pub parity: Option<ParityStats>,
    /// Share of the node's dispatched jobs the straggler's replica took (none when no replica of
    /// that name).
    pub straggler_share: Option<f64>,
    /// What went wrong: errors by class, requests not answered once, jobs not answered once at
    /// the parity node. Empty when the set-up is clean.
    pub failures: Vec<String>,
}

impl Measured {
    /// The (p99.9 − p50) gap, ms.
    pub fn gap_ms(&self) -> f64 {
        self.latency_ms[2] - self.latency_ms[0]
    }
}

/// Runs the graph in `graph` (its model node `node`, its straggling replica `straggler_replica`)
/// under `load`, with `straggler` on `host` while the warm-up and the measured requests run.
pub(crate) fn run_setup(
    graph: &Path,
    node: &str,
    load: &Load,
    straggler: Option<(&Straggler, &Host)>,
    straggler_replica: &str,
) -> Result<Measured> {
    let loaded = load_graph(graph).map_err(|e| anyhow!("{e}"))?;
    let (workload, label_output) = match &load.requests_from {
        Requests::Random => (Workload::random(&loaded.plan, 8, 7), None),
        Requests::Labelled { path, label_output } => (
            Workload::labelled_csv(&loaded.plan, path)?,
            Some(label_output.clone()),
        ),
    };
    let running = start(loaded.plan, RuntimeOptions::default())?;
    let spec = |requests: usize, seed: u64| LoadSpec {
        requests,
        warmup: 0,
        arrival: Arrival::Poisson { rate: load.rate },
        seed,
        label_output: label_output.clone(),
        progress: false,
    };
    let (warm, report, before, after) = {
        let _straggling =
            straggler.map(|(s, host)| s.start(host.process.pid(), host.proxy.clone()));
        let warm = run_load(
            running.runtime(),
            &workload,
            &spec(load.warmup, load.seed + 1),
        );
        let before = Counters::read(&running, node, straggler_replica);
        let report = run_load(
            running.runtime(),
            &workload,
            &spec(load.requests, load.seed),
        );
        let after = Counters::settled(&running, node, straggler_replica, &before, report.sent);
        (warm, report, before, after)
    };
    running.shutdown();
    let mut measured = measure(&report, &before, &after);
    measured.failures.extend(
        answer_failures(&warm)
            .into_iter()
            .map(|f| format!("warm-up: {f}")),
    );
    Ok(measured)
}

/// How long the counters may lag the last answer.
const SETTLE: std::time::Duration = std::time::Duration::from_secs(2);

/// Counters read from the running graph.
struct Counters {
    parity: Option<ParityStats>,
    /// (straggler's replica, all replicas) jobs dispatched.
    dispatched: Option<(u64, u64)>,
}

impl Counters {
    /// [`Counters::read`] once the parity node has counted `sent` more answers than `before`
    /// (a node may count a job just after answering it), or after [`SETTLE`] if it never does.
    fn settled(
        running: &RunningGraph,
        node: &str,
        straggler_replica: &str,
        before: &Counters,
        sent: usize,
    ) -> Counters {
        let answered = |c: &Counters| {
            c.parity
                .as_ref()
                .map_or(0, |p| p.real + p.reconstructed + p.unrecovered)
        };
        let want = answered(before) + sent as u64;
        let deadline = std::time::Instant::now() + SETTLE;
        loop {
            let now = Counters::read(running, node, straggler_replica);
            if now.parity.is_none()
                || answered(&now) >= want
                || std::time::Instant::now() > deadline
            {
                return now;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    fn read(running: &RunningGraph, node: &str, straggler_replica: &str) -> Counters {
        let parity = running
            .parity_services()
            .into_iter()
            .find(|(n, _)| n == node)
            .map(|(_, s)| s.stats());
        let dispatched = running
            .replica_pools()
            .into_iter()
            .find(|(n, _)| n == node)
            .map(|(_, pool)| {
                let states = pool.replica_states();
                let of = |name: &str| {
                    states
                        .iter()
                        .filter(|s| s.0 == name)
                        .map(|s| s.3)
                        .sum::<u64>()
                };
                (of(straggler_replica), states.iter().map(|s| s.3).sum())
            });
        Counters { parity, dispatched }
    }
}

/// Requests answered with an error, and requests not answered once.
fn answer_failures(report: &LoadReport) -> Vec<String> {
    let mut failures: Vec<String> = report
        .errors
        .iter()
        .map(|(class, (n, example))| format!("{n} answered with {class} errors, e.g. `{example}`"))
        .collect();
    let answered = report.ok + report.error_count();
    if answered != report.sent {
        failures.push(format!(
            "{} requests sent, {answered} answered",
            report.sent
        ));
    }
    failures
}

fn measure(report: &LoadReport, before: &Counters, after: &Counters) -> Measured {
    let mut failures = answer_failures(report);
    let parity = match (&before.parity, &after.parity) {
        (Some(b), Some(a)) => Some(stats_delta(b, a)),
        _ => None,
    };
    if let Some(p) = &parity {
        let at_node = p.real + p.reconstructed + p.unrecovered;
        if at_node != report.sent as u64 {
            failures.push(format!(
                "{} requests sent, the parity node answered {at_node} jobs ({} real, {} reconstructed, {} unrecovered)",
                report.sent, p.real, p.reconstructed, p.unrecovered
            ));
        }
    }
    let straggler_share = match (before.dispatched, after.dispatched) {
        (Some((bs, ba)), Some((s, a))) if a > ba => Some((s - bs.min(s)) as f64 / (a - ba) as f64),
        _ => None,
    };
    Measured {
        latency_ms: [
            report.latency_ms(0.5),
            report.latency_ms(0.99),
            report.latency_ms(0.999),
            report.latency_ms(1.0),
        ],
        sent: report.sent,
        accuracy: report.accuracy,
        parity,
        straggler_share,
        failures,
    }
}

/// The counters' change from `b` to `a`.
fn stats_delta(b: &ParityStats, a: &ParityStats) -> ParityStats {
    let d = |x: u64, y: u64| y.saturating_sub(x);
    ParityStats {
        groups: d(b.groups, a.groups),
        parity_dispatched: d(b.parity_dispatched, a.parity_dispatched),
        reconstructed: d(b.reconstructed, a.reconstructed),
        reconstructed_late: d(b.reconstructed_late, a.reconstructed_late),
        reconstructed_failed: d(b.reconstructed_failed, a.reconstructed_failed),
        real: d(b.real, a.real),
        unrecovered: d(b.unrecovered, a.unrecovered),
        late_real: d(b.late_real, a.late_real),
    }
}

/// How long a set-up's graph file lives: written, loaded, removed.
pub(crate) struct GraphFile(PathBuf);

impl GraphFile {
    /// Writes `yaml` to a temporary file named after `tag`.
    pub(crate) fn write(yaml: &str, tag: &str) -> Result<GraphFile> {
        let path =
            std::env::temp_dir().join(format!("weir-bench-{tag}-{}.yaml", std::process::id()));
        std::fs::write(&path, yaml)?;
        Ok(GraphFile(path))
    }

    /// Its path.
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for GraphFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
