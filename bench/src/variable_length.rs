//! The variable-length experiment: requests whose sequence length is drawn per request, served
//! with padded batching against no batching and against batching only requests of one length.
//!
//! The graph is `seq_pool.onnx` (`input_ids`/`attention_mask` on a symbolic `seq` → per-token
//! features and a pooled vector) behind two graph inputs declared `[seq]`. Lengths are uniform
//! integers in `[min_len, max_len]`, drawn once per request of a seeded pool that the load cycles
//! through. Four batching set-ups, everything else equal (one session, one intra-op thread):
//! *none* (`max_size: 1`), *same length* (`max_size`, `max_delay_us`; only requests of one length
//! share a call, so with lengths spread this wide almost none do), *padded* (the same, plus
//! `pad: {dim: seq, value: 0}`: a batch of mixed lengths shares one call padded to the longest
//! only where the node's measured cost of calls predicts it cheaper than calls of nearer lengths)
//! and *padded always* (`pad.when: always`: every batch is one padded call). Each set-up is measured under closed-loop clients (throughput) and Poisson arrivals
//! at fixed rates (latency at an offered load), `repeats` times in turn; medians are reported, with
//! the calls' mean rows and duration from the executor's counters.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Result};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use weir::loadgen::{run_load, Arrival, LoadSpec};
use weir::workload::{WorkItem, Workload};
use weir::{
    plan_spec, start, DType, GraphSpec, ModelBuilder, NamedTensor, PadWhen, RuntimeOptions, Tensor,
};

use crate::conditions::Probe;
use crate::overhead::median;
use crate::threads::{ThreadSample, ThreadTotals};

/// How the model node batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Batching {
    /// One request per call.
    None,
    /// Requests of one length share a call.
    SameLength,
    /// Requests of different lengths share a padded call when it is predicted cheaper.
    Padded,
    /// Every batch is one padded call.
    PaddedAlways,
}

impl Batching {
    /// Every set-up, in the order tables list them.
    pub const ALL: [Batching; 4] = [
        Batching::None,
        Batching::SameLength,
        Batching::Padded,
        Batching::PaddedAlways,
    ];

    /// The name tables and plots use.
    pub fn name(self) -> &'static str {
        match self {
            Batching::None => "no batching",
            Batching::SameLength => "same length only",
            Batching::Padded => "padded when cheaper",
            Batching::PaddedAlways => "padded always",
        }
    }
}

/// How requests arrive in one measurement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Load {
    /// Closed loop with this many clients.
    Clients(usize),
    /// Poisson arrivals at this many requests per second.
    Rate(f64),
}

impl std::fmt::Display for Load {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Load::Clients(c) => write!(f, "{c} clients"),
            Load::Rate(r) => write!(f, "Poisson {r:.0}/s"),
        }
    }
}

/// The experiment's settings.
#[derive(Debug, Clone)]
pub struct VariableLengthConfig {
    /// `seq_pool.onnx`.
    pub model: PathBuf,
    /// Shortest and longest sequence (uniform in between, both included).
    pub lengths: (usize, usize),
    /// Requests per measurement.
    pub requests: usize,
    /// Closed-loop client counts.
    pub clients: Vec<usize>,
    /// Poisson rates, requests per second.
    pub rates: Vec<f64>,
    /// Most requests per call when batching.
    pub max_size: usize,
    /// Longest a request waits for others, µs, when batching.
    pub max_delay_us: u64,
    /// Measurements of each set-up and load; medians are reported.
    pub repeats: usize,
    /// Seed of the request pool.
    pub seed: u64,
    /// The set-ups to run (all of [`Batching::ALL`] unless narrowed, to profile one).
    pub setups: Vec<Batching>,
}

/// One set-up under one load: medians over the repeats.
#[derive(Debug, Clone)]
pub struct VariableLengthRow {
    /// The batching set-up.
    pub batching: Batching,
    /// The load.
    pub load: Load,
    /// Answers per second.
    pub throughput: f64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 99th-percentile latency, ms.
    pub p99_ms: f64,
    /// Mean requests per ONNX Runtime call.
    pub rows_per_call: f64,
    /// Mean duration of a call, ms.
    pub ms_per_call: f64,
    /// Share of the batches of mixed lengths that ran split into several calls (NaN when none
    /// were mixed).
    pub split_share: f64,
    /// Per kind of thread, CPU time and voluntary context switches per request (the last repeat's).
    pub threads: BTreeMap<String, ThreadTotals>,
}

/// The request pool: `n` requests with lengths uniform in `config.lengths`, ids below the model's
/// vocabulary (50), masks all ones.
fn workload(config: &VariableLengthConfig, n: usize) -> Result<Workload> {
    let (min, max) = config.lengths;
    if min == 0 || min > max {
        bail!("lengths must satisfy 1 ≤ min ≤ max, got {min}..{max}");
    }
    let mut rng = StdRng::seed_from_u64(config.seed);
    let items = (0..n)
        .map(|_| {
            let len = rng.random_range(min..=max);
            let ids = (0..len).map(|_| rng.random_range(0..50)).collect();
            WorkItem {
                inputs: vec![
                    NamedTensor {
                        name: "input_ids".into(),
                        tensor: Tensor::i64(vec![len], ids),
                    },
                    NamedTensor {
                        name: "attention_mask".into(),
                        tensor: Tensor::i64(vec![len], vec![1; len]),
                    },
                ],
                label: None,
            }
        })
        .collect();
    Workload::from_items(items).ok_or_else(|| anyhow::anyhow!("an empty request pool"))
}

/// The graph for `batching`.
fn graph(config: &VariableLengthConfig, batching: Batching) -> GraphSpec {
    let mut node = ModelBuilder::new("encoder", &config.model)
        .input("input_ids", "input_ids")
        .input("attention_mask", "attention_mask");
    node = match batching {
        Batching::None => node.batching(1, 0),
        Batching::SameLength => node.batching(config.max_size, config.max_delay_us),
        Batching::Padded => node
            .batching(config.max_size, config.max_delay_us)
            .pad("seq", 0.0)
            .pad_when(PadWhen::Cheaper),
        Batching::PaddedAlways => node
            .batching(config.max_size, config.max_delay_us)
            .pad("seq", 0.0)
            .pad_when(PadWhen::Always),
    };
    GraphSpec::builder("variable_length")
        .input_dims("input_ids", DType::I64, vec!["seq".into()])
        .input_dims("attention_mask", DType::I64, vec!["seq".into()])
        .model(node)
        .output("pooled", "encoder.pooled")
        .output("tokens", "encoder.tokens")
        .build()
}

/// One measurement of `batching` under `load`.
fn measure(
    config: &VariableLengthConfig,
    workload: &Workload,
    batching: Batching,
    load: Load,
) -> Result<VariableLengthRow> {
    let planned = plan_spec(&graph(config, batching), std::path::Path::new("."))
        .map_err(|d| anyhow::anyhow!("{d}"))?;
    let running = start(planned.plan, RuntimeOptions::default())?;
    let arrival = match load {
        Load::Clients(concurrency) => Arrival::Closed { concurrency },
        Load::Rate(rate) => Arrival::Poisson { rate },
    };
    let spec = LoadSpec {
        requests: config.requests,
        warmup: config.requests / 10,
        arrival,
        seed: config.seed,
        label_output: None,
        progress: false,
    };
    // The warm-up runs inside `run_load`; the probe covers it too, a tenth of the calls.
    let probe = Probe::start(&running);
    let before = ThreadSample::read();
    let report = run_load(running.runtime(), workload, &spec);
    let threads = before.per_request(&ThreadSample::read(), spec.requests + spec.warmup);
    let conditions = probe.finish(&running);
    let (padded, split) = running
        .executor_stats()
        .iter()
        .fold((0, 0), |(p, s), (_, snapshot)| {
            (p + snapshot.padded_batches, s + snapshot.split_batches)
        });
    running.shutdown();
    if report.error_count() > 0 || report.ok != report.sent {
        bail!(
            "{} under {load}: {} of {} answered, errors {:?}",
            batching.name(),
            report.ok,
            report.sent,
            report.errors
        );
    }
    Ok(VariableLengthRow {
        batching,
        load,
        throughput: report.throughput(),
        p50_ms: report.latency_ms(0.5),
        p99_ms: report.latency_ms(0.99),
        rows_per_call: conditions.rows_per_call(),
        ms_per_call: conditions.ms_per_call(),
        split_share: if padded + split == 0 {
            f64::NAN
        } else {
            split as f64 / (padded + split) as f64
        },
        threads,
    })
}

/// Runs every set-up under every load, `repeats` times (set-ups in turn within each repeat, so
/// all see the same machine); returns the medians, by load then set-up.
///
/// # Errors
/// When the model is missing, a graph does not start, or a request is lost or fails.
pub fn variable_length(config: &VariableLengthConfig) -> Result<Vec<VariableLengthRow>> {
    let workload = workload(config, 1024)?;
    let loads: Vec<Load> = config
        .clients
        .iter()
        .map(|&c| Load::Clients(c))
        .chain(config.rates.iter().map(|&r| Load::Rate(r)))
        .collect();
    let setups = &config.setups;
    let mut samples: Vec<Vec<VariableLengthRow>> = vec![Vec::new(); loads.len() * setups.len()];
    for _ in 0..config.repeats.max(1) {
        for (l, load) in loads.iter().enumerate() {
            for (b, batching) in setups.iter().enumerate() {
                let row = measure(config, &workload, *batching, *load)?;
                samples[l * setups.len() + b].push(row);
            }
        }
    }
    Ok(samples
        .into_iter()
        .map(|runs| {
            let pick = |f: fn(&VariableLengthRow) -> f64| median(runs.iter().map(f).collect());
            VariableLengthRow {
                batching: runs[0].batching,
                load: runs[0].load,
                throughput: pick(|r| r.throughput),
                p50_ms: pick(|r| r.p50_ms),
                p99_ms: pick(|r| r.p99_ms),
                rows_per_call: pick(|r| r.rows_per_call),
                ms_per_call: pick(|r| r.ms_per_call),
                split_share: pick(|r| r.split_share),
                threads: runs[runs.len() - 1].threads.clone(),
            }
        })
        .collect())
}

/// The results as a Markdown table.
pub fn variable_length_table(rows: &[VariableLengthRow]) -> String {
    let mut out = String::from(
        "| load | batching | req/s | × no batching | p50 ms | p99 ms | requests per call | ms per call | µs per request in calls | mixed batches split |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let reference = rows
            .iter()
            .find(|n| n.load == r.load && n.batching == Batching::None)
            .map_or(f64::NAN, |n| r.throughput / n.throughput);
        let split = if r.split_share.is_nan() {
            "–".to_string()
        } else {
            format!("{:.0} %", r.split_share * 100.0)
        };
        out.push_str(&format!(
            "| {} | {} | {:.0} | {:.2} | {:.3} | {:.3} | {:.2} | {:.3} | {:.1} | {} |\n",
            r.load,
            r.batching.name(),
            r.throughput,
            reference,
            r.p50_ms,
            r.p99_ms,
            r.rows_per_call,
            r.ms_per_call,
            r.ms_per_call * 1e3 / r.rows_per_call,
            split
        ));
    }
    out
}

/// Per set-up and load, each kind of thread's CPU µs and voluntary context switches per request,
/// as a Markdown table (one column pair per thread group seen).
pub fn variable_length_thread_table(rows: &[VariableLengthRow]) -> String {
    let groups: std::collections::BTreeSet<&String> =
        rows.iter().flat_map(|r| r.threads.keys()).collect();
    let mut out = String::from("| load | batching |");
    for g in &groups {
        out.push_str(&format!(" {g} CPU µs | {g} switches |"));
    }
    out.push_str("\n|---|---|");
    out.push_str(&"---|---|".repeat(groups.len()));
    out.push('\n');
    for r in rows {
        out.push_str(&format!("| {} | {} |", r.load, r.batching.name()));
        for g in &groups {
            let t = r.threads.get(*g).copied().unwrap_or_default();
            if g.as_str() == crate::threads::ALL {
                // The process's switches are not counted (its ended threads' are lost).
                out.push_str(&format!(" {:.1} | – |", t.cpu_seconds * 1e6));
            } else {
                out.push_str(&format!(
                    " {:.1} | {:.2} |",
                    t.cpu_seconds * 1e6,
                    t.voluntary
                ));
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_draws_lengths_in_range_and_the_graphs_validate() {
        let config = VariableLengthConfig {
            model: std::env::var_os("WEIR_HOME")
                .map_or_else(
                    || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.weir"),
                    PathBuf::from,
                )
                .join("models/seq_pool.onnx"),
            lengths: (8, 128),
            requests: 10,
            clients: vec![1],
            rates: Vec::new(),
            max_size: 8,
            max_delay_us: 2000,
            repeats: 1,
            seed: 3,
            setups: Batching::ALL.to_vec(),
        };
        let pool = workload(&config, 200).unwrap();
        let lengths: Vec<usize> = (0..200)
            .map(|i| pool.item(i).inputs[0].tensor.shape[0])
            .collect();
        assert!(lengths.iter().all(|l| (8..=128).contains(l)));
        assert!(lengths.iter().any(|&l| l < 30) && lengths.iter().any(|&l| l > 100));
        for batching in Batching::ALL {
            plan_spec(&graph(&config, batching), std::path::Path::new(".")).unwrap();
        }
    }
}
