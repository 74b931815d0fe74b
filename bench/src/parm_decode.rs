//! When ParM decodes, measured: the digits MLP on two replicas (in-process and one `weir
//! executor` process) with its trained parity model (k = 2), under open-loop Poisson load of the
//! labelled digits test set. Four set-ups in one run, in turn: the paper's `first_available`
//! rule and weir's default (`p99` deadline), each without a straggler and with the remote host
//! frozen (SIGSTOP) for `freeze_ms` every `period_ms`. Per set-up: latency percentiles to the first
//! answer (real or reconstructed), the fraction of answers reconstructed, and the accuracy of all
//! answers against the labels — the trade ParM's decode rule makes.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use weir::loadgen::{run_load, Arrival, LoadSpec};
use weir::workload::Workload;
use weir::{load_graph, start, RuntimeOptions};

use crate::parm::{Hiccups, ParmRow};
use crate::process::free_endpoint;
use crate::remote::ExecutorProcess;

/// The experiment's settings.
#[derive(Debug, Clone)]
pub struct DecodeBenchConfig {
    /// The deployed model (digits MLP).
    pub model: PathBuf,
    /// Its parity model for k = 2.
    pub parity_model: PathBuf,
    /// The labelled data set (CSV: 64 pixels then the label).
    pub dataset: PathBuf,
    /// Poisson arrivals per second.
    pub rate: f64,
    /// Requests per set-up.
    pub requests: usize,
    /// How long each hiccup freezes the remote host.
    pub freeze_ms: u64,
    /// Time between hiccups.
    pub period_ms: u64,
}

/// One set-up's result.
#[derive(Debug, Clone)]
pub struct DecodeRow {
    /// Latency and reconstructions, as the latency experiment reports them.
    pub latency: ParmRow,
    /// Answers reconstructed / all answers of the node.
    pub reconstructed_fraction: f64,
    /// (correct, labelled) over all answers.
    pub accuracy: (usize, usize),
}

fn graph_yaml(config: &DecodeBenchConfig, endpoint: &str, rule: &str) -> Result<String> {
    let model = std::fs::canonicalize(&config.model)?;
    let parity = std::fs::canonicalize(&config.parity_model)?;
    Ok(format!(
        "name: parm_decode\ninputs:\n  - {{name: pixels, dtype: f32, shape: [64]}}\nexecutors:\n  - {{name: e0, endpoint: \"{endpoint}\"}}\nnodes:\n  - normalize: {{id: scaled, input: pixels, mean: [0.0], std: [16.0]}}\n  - model:\n      id: mlp\n      path: {}\n      inputs: {{x: scaled}}\n      replicas: [local, e0]\n      executor: {{instances: 1, timeout_ms: 5000}}\n      resilience: {{parity: {{k: 2, parity_model: {}, decode: {{after: {rule}}}}}}}\n  - argmax: {{id: class, input: mlp.probs}}\noutputs:\n  - {{name: class, from: class}}\n",
        model.display(),
        parity.display()
    ))
}

/// Runs the four set-ups.
pub fn parm_decode(config: &DecodeBenchConfig) -> Result<Vec<DecodeRow>> {
    let setups = [
        ("first_available", false),
        ("p99", false),
        ("first_available", true),
        ("p99", true),
    ];
    let mut rows = Vec::new();
    for (rule, straggler) in setups {
        let endpoint = free_endpoint()?;
        let executor = ExecutorProcess::spawn("e0", &endpoint, &config.model, 1)?;
        let path = std::env::temp_dir().join(format!(
            "weir-bench-parm-decode-{}.yaml",
            std::process::id()
        ));
        std::fs::write(&path, graph_yaml(config, &endpoint, rule)?)?;
        let graph = load_graph(&path).map_err(|e| anyhow!("{e}"));
        let _ = std::fs::remove_file(&path);
        let graph = graph?;
        let workload = Workload::labelled_csv(&graph.plan, &config.dataset)?;
        let running = start(graph.plan, RuntimeOptions::default())?;
        let report = {
            let _hiccups = straggler.then(|| {
                Hiccups::start(
                    executor.pid(),
                    Duration::from_millis(config.freeze_ms),
                    Duration::from_millis(config.period_ms),
                )
            });
            run_load(
                running.runtime(),
                &workload,
                &LoadSpec {
                    requests: config.requests,
                    warmup: 50,
                    arrival: Arrival::Poisson { rate: config.rate },
                    seed: 11,
                    label_output: Some("class".into()),
                    progress: false,
                },
            )
        };
        let stats = running
            .parity_services()
            .first()
            .map(|(_, s)| s.stats())
            .unwrap_or_default();
        for (class, (n, example)) in &report.errors {
            eprintln!("{rule}, straggler {straggler}: {n} {class} errors, e.g. {example}");
        }
        running.shutdown();
        drop(executor);
        rows.push(DecodeRow {
            latency: ParmRow {
                setup: format!(
                    "{rule}, {}",
                    if straggler {
                        "straggler"
                    } else {
                        "no straggler"
                    }
                ),
                latency_ms: [
                    report.latency_ms(0.5),
                    report.latency_ms(0.99),
                    report.latency_ms(0.999),
                    report.latency_ms(1.0),
                ],
                reconstructed: stats.reconstructed,
                errors: report.error_count(),
            },
            reconstructed_fraction: stats.reconstructed_fraction(),
            accuracy: report.accuracy.unwrap_or((0, 0)),
        });
    }
    if rows.iter().any(|r| r.latency.errors > 0) {
        bail!("requests failed: {rows:?}");
    }
    Ok(rows)
}

/// The table: latency, the (p99.9 − p50) gap, the fraction reconstructed and the accuracy.
pub fn parm_decode_table(rows: &[DecodeRow], config: &DecodeBenchConfig) -> String {
    let mut s = format!(
        "digits MLP on two replicas (in-process, one executor process) + its k = 2 parity model; {} requests per set-up at {} req/s (Poisson) from {}; straggler: the remote replica frozen {} ms every {} ms\n\n",
        config.requests,
        config.rate,
        config.dataset.display(),
        config.freeze_ms,
        config.period_ms
    );
    s.push_str("| decode rule, load | p50 ms | p99 ms | p99.9 ms | (p99.9 − p50) gap ms | reconstructed | fraction reconstructed | accuracy of all answers |\n|---|---|---|---|---|---|---|---|\n");
    for r in rows {
        let l = &r.latency;
        let (right, labelled) = r.accuracy;
        s.push_str(&format!(
            "| {} | {:.2} | {:.2} | {:.2} | {:.2} | {} | {:.2} % | {:.2} % ({right}/{labelled}) |\n",
            l.setup,
            l.latency_ms[0],
            l.latency_ms[1],
            l.latency_ms[2],
            l.latency_ms[2] - l.latency_ms[0],
            l.reconstructed,
            100.0 * r.reconstructed_fraction,
            100.0 * right as f64 / labelled.max(1) as f64,
        ));
    }
    s
}
