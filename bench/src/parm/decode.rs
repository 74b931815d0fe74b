//! ParM's trade in one run ("Parity Models", §4.1, §6.2, §7): the digits MLP, with and without a
//! straggler, under the same open-loop Poisson load of the labelled digits test set, set up four
//! ways on the same resources:
//!
//! - **equal resources** (the paper's baseline): the deployed model on three replicas — one
//!   in-process, two `weir executor` processes (`e0`, `e1`);
//! - **ParM, r = 1**, once per decode rule (`first_available`, weir's default `p99`, ...): the
//!   deployed model on the in-process replica and `e0`, its k = 2 parity model on `e1` where the
//!   third deployed replica was;
//! - **ParM, r = 2** (§7): the same with two parity models on `e1` (one session more).
//!
//! The straggler is always `e0`, reached through a fault proxy in every set-up (so the path is the
//! same with and without it); [`super::Straggler`] says what it does. Per set-up and straggler
//! state: latency to the first answer, real or reconstructed (p50, p99, p99.9 and the gap between
//! p99.9 and p50, as medians over repeats), the gap of equal resources over the set-up's, the
//! fraction of answers reconstructed and the accuracy of all answers against the labels. Equal
//! resources answers only with the deployed model, so its accuracy is the reference. Repeats
//! run every set-up once in turn before the next repeat, so drift on a shared machine spreads
//! over all of them.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{bail, Result};
use weir_engine::plan::parity_node_id;

use super::setup::{run_setup, GraphFile, Host, Load, Measured, Requests};
use super::straggler::Straggler;
use crate::overhead::median;

/// The node the experiment codes.
const NODE: &str = "mlp";
/// The straggling replica.
const STRAGGLER: &str = "e0";

/// The experiment's settings.
#[derive(Debug, Clone)]
pub struct DecodeBenchConfig {
    /// The deployed model (digits MLP).
    pub model: PathBuf,
    /// Its k = 2 parity models by index (`weir parity train --index t`): the first for r = 1,
    /// both for r = 2.
    pub parity_models: Vec<PathBuf>,
    /// The labelled data set (CSV: 64 pixels then the label).
    pub dataset: PathBuf,
    /// The decode rules of the r = 1 set-ups, as `decode.after` takes them.
    pub rules: Vec<String>,
    /// The decode rule of the r = 2 set-up (none: no r = 2 set-up).
    pub r2_rule: Option<String>,
    /// Poisson arrivals per second.
    pub rate: f64,
    /// Measured requests per set-up and repeat.
    pub requests: usize,
    /// Warm-up requests before them.
    pub warmup: usize,
    /// Repeats of every set-up.
    pub repeats: usize,
    /// What the straggler does.
    pub straggler: Straggler,
}

/// How one set-up deploys the node.
#[derive(Debug, Clone, PartialEq)]
pub enum Arm {
    /// Three replicas of the deployed model.
    EqualResources,
    /// Two deployed replicas and `r` parity models on the third host.
    Parm {
        /// The decode rule.
        rule: String,
        /// Parity models.
        r: usize,
    },
}

impl Arm {
    /// The set-up's name in the table.
    pub fn name(&self) -> String {
        match self {
            Arm::EqualResources => "equal resources".into(),
            Arm::Parm { rule, r } => format!("ParM r={r}, {rule}"),
        }
    }

    /// Sessions (one core each) the set-up runs: in-process, `e0`, and the third host's.
    pub fn sessions(&self) -> usize {
        match self {
            Arm::EqualResources => 3,
            Arm::Parm { r, .. } => 2 + r,
        }
    }
}

/// One set-up's repeats, with or without the straggler.
#[derive(Debug, Clone)]
pub struct DecodeRow {
    /// How the node was deployed.
    pub arm: Arm,
    /// Whether `e0` straggled.
    pub straggler: bool,
    /// Every repeat.
    pub runs: Vec<Measured>,
}

impl DecodeRow {
    /// The set-up and straggler state, as the table and plot name them.
    pub fn label(&self) -> String {
        format!(
            "{}, {}",
            self.arm.name(),
            if self.straggler {
                "straggler"
            } else {
                "no straggler"
            }
        )
    }

    /// Median over repeats of p50, p99, p99.9 and max, ms.
    pub fn latency_ms(&self) -> [f64; 4] {
        std::array::from_fn(|i| median(self.runs.iter().map(|m| m.latency_ms[i]).collect()))
    }

    /// Median over repeats of the (p99.9 − p50) gap, ms.
    pub fn gap_ms(&self) -> f64 {
        median(self.runs.iter().map(Measured::gap_ms).collect())
    }

    /// (reconstructed, answered at the node) over every repeat; none without parity.
    pub fn reconstructed(&self) -> Option<(u64, u64)> {
        self.runs.iter().try_fold((0, 0), |(r, n), m| {
            let p = m.parity.as_ref()?;
            Some((r + p.reconstructed, n + p.real + p.reconstructed))
        })
    }

    /// (correct, labelled) over every repeat.
    pub fn accuracy(&self) -> (usize, usize) {
        self.runs
            .iter()
            .filter_map(|m| m.accuracy)
            .fold((0, 0), |(c, n), (c2, n2)| (c + c2, n + n2))
    }

    /// Mean share of the node's jobs `e0` took.
    pub fn straggler_share(&self) -> f64 {
        let shares: Vec<f64> = self.runs.iter().filter_map(|m| m.straggler_share).collect();
        shares.iter().sum::<f64>() / shares.len().max(1) as f64
    }
}

fn graph_yaml(config: &DecodeBenchConfig, arm: &Arm, e0: &str, e1: &str) -> Result<String> {
    let model = std::fs::canonicalize(&config.model)?;
    let (replicas, resilience) = match arm {
        Arm::EqualResources => ("local, e0, e1", String::new()),
        Arm::Parm { rule, r } => {
            let parity = parity_files(config, *r)?
                .iter()
                .map(|p| format!("\"{}\"", p.display()))
                .collect::<Vec<_>>()
                .join(", ");
            (
                "local, e0",
                format!("      resilience: {{parity: {{k: 2, parity_models: [{parity}], decode: {{after: {rule}}}, replicas: [e1]}}}}\n"),
            )
        }
    };
    Ok(format!(
        "name: parm_decode\ninputs:\n  - {{name: pixels, dtype: f32, shape: [64]}}\nexecutors:\n  - {{name: e0, endpoint: \"{e0}\"}}\n  - {{name: e1, endpoint: \"{e1}\"}}\nnodes:\n  - normalize: {{id: scaled, input: pixels, mean: [0.0], std: [16.0]}}\n  - model:\n      id: {NODE}\n      path: \"{}\"\n      inputs: {{x: scaled}}\n      replicas: [{replicas}]\n      executor: {{instances: 1, timeout_ms: 5000}}\n{resilience}  - argmax: {{id: class, input: {NODE}.probs}}\noutputs:\n  - {{name: class, from: class}}\n",
        model.display(),
    ))
}

/// The first `r` parity models, made absolute.
fn parity_files(config: &DecodeBenchConfig, r: usize) -> Result<Vec<PathBuf>> {
    if config.parity_models.len() < r {
        bail!(
            "r = {r} needs {r} parity models, {} given (--parity-models)",
            config.parity_models.len()
        );
    }
    config.parity_models[..r]
        .iter()
        .map(|p| {
            std::fs::canonicalize(p).map_err(|e| {
                anyhow::anyhow!(
                    "parity model {}: {e} (benchmarks/parm_decode/README.md says how to make it)",
                    p.display()
                )
            })
        })
        .collect()
}

/// The set-ups, in the order they run and print.
pub fn arms(config: &DecodeBenchConfig) -> Vec<Arm> {
    let mut arms = vec![Arm::EqualResources];
    arms.extend(config.rules.iter().map(|rule| Arm::Parm {
        rule: rule.clone(),
        r: 1,
    }));
    if let Some(rule) = &config.r2_rule {
        arms.push(Arm::Parm {
            rule: rule.clone(),
            r: 2,
        });
    }
    arms
}

/// Runs one set-up once.
fn run_once(config: &DecodeBenchConfig, arm: &Arm, straggling: bool) -> Result<Measured> {
    let e0 = Host::start(
        "e0",
        &[(NODE, config.model.as_path())],
        1,
        config.straggler.needs_proxy(),
    )?;
    let third: Vec<(String, PathBuf)> = match arm {
        Arm::EqualResources => vec![(NODE.to_string(), config.model.clone())],
        Arm::Parm { r, .. } => parity_files(config, *r)?
            .into_iter()
            .enumerate()
            .map(|(t, p)| (parity_node_id(NODE, t), p))
            .collect(),
    };
    let third: Vec<(&str, &std::path::Path)> = third
        .iter()
        .map(|(n, p)| (n.as_str(), p.as_path()))
        .collect();
    let e1 = Host::start("e1", &third, 1, false)?;
    let graph = GraphFile::write(
        &graph_yaml(config, arm, e0.endpoint(), e1.endpoint())?,
        "parm-decode",
    )?;
    let load = Load {
        rate: config.rate,
        requests: config.requests,
        warmup: config.warmup,
        seed: 11,
        requests_from: Requests::Labelled {
            path: config.dataset.clone(),
            label_output: "class".into(),
        },
    };
    let straggler = straggling.then_some((&config.straggler, &e0));
    run_setup(graph.path(), NODE, &load, straggler, STRAGGLER)
}

/// Runs every set-up with and without the straggler, `repeats` times in turn. Refuses (naming
/// them) when any run had a failure.
pub fn parm_decode(config: &DecodeBenchConfig) -> Result<Vec<DecodeRow>> {
    let mut rows: Vec<DecodeRow> = [false, true]
        .into_iter()
        .flat_map(|straggler| {
            arms(config).into_iter().map(move |arm| DecodeRow {
                arm,
                straggler,
                runs: Vec::new(),
            })
        })
        .collect();
    for repeat in 0..config.repeats.max(1) {
        for row in &mut rows {
            let measured = run_once(config, &row.arm, row.straggler)?;
            eprintln!(
                "repeat {}: {}: p50 {:.2} p99 {:.2} p99.9 {:.2} ms, {} failures",
                repeat + 1,
                row.label(),
                measured.latency_ms[0],
                measured.latency_ms[1],
                measured.latency_ms[2],
                measured.failures.len()
            );
            row.runs.push(measured);
        }
    }
    let failures: Vec<String> = rows
        .iter()
        .flat_map(|row| {
            row.runs.iter().enumerate().flat_map(move |(i, m)| {
                m.failures
                    .iter()
                    .map(move |f| format!("{} (repeat {}): {f}", row.label(), i + 1))
            })
        })
        .collect();
    if !failures.is_empty() {
        bail!(
            "not every request was answered once without an error; no table:\n{}",
            failures.join("\n")
        );
    }
    Ok(rows)
}

/// The table: per set-up and straggler state, latency, the gap and its ratio to equal
/// resources', the fraction reconstructed and the accuracy of all answers.
pub fn parm_decode_table(rows: &[DecodeRow], config: &DecodeBenchConfig) -> String {
    let mut s = format!(
        "digits MLP, k = 2; {} requests per set-up and repeat ({} warm-up) at {} req/s (Poisson) from {}; straggler: replica e0, {}; medians of {} repeats, counts summed over them\n\n",
        config.requests,
        config.warmup,
        config.rate,
        config.dataset.display(),
        config.straggler.describe(),
        config.repeats.max(1),
    );
    s.push_str("| set-up, load | sessions | e0's share of jobs | p50 ms | p99 ms | p99.9 ms | (p99.9 − p50) gap ms | gap: equal resources / set-up | reconstructed | accuracy of all answers |\n|---|---|---|---|---|---|---|---|---|---|\n");
    for row in rows {
        let l = row.latency_ms();
        let reference = rows
            .iter()
            .find(|r| r.arm == Arm::EqualResources && r.straggler == row.straggler);
        let ratio = match reference {
            Some(r) if r.arm != row.arm => format!("{:.2}×", r.gap_ms() / row.gap_ms().max(1e-9)),
            _ => "(reference)".into(),
        };
        let reconstructed = match row.reconstructed() {
            Some((r, n)) => format!("{:.2} % ({r}/{n})", 100.0 * r as f64 / n.max(1) as f64),
            None => "—".into(),
        };
        let (right, labelled) = row.accuracy();
        let _ = writeln!(
            s,
            "| {} | {} | {:.1} % | {:.2} | {:.2} | {:.2} | {:.2} | {ratio} | {reconstructed} | {:.2} % ({right}/{labelled}) |",
            row.label(),
            row.arm.sessions(),
            100.0 * row.straggler_share(),
            l[0],
            l[1],
            l[2],
            row.gap_ms(),
            100.0 * right as f64 / labelled.max(1) as f64,
        );
    }
    s
}
