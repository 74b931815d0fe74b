//! The ParM tail-latency experiment: a model node on two replicas (in-process and one `weir
//! executor` process) whose remote host hiccups — frozen with SIGSTOP for `freeze_ms` every
//! `period_ms`, then SIGCONT — under open-loop Poisson load. Three set-ups, same model, same load,
//! same hiccups, run in turn:
//!
//! - **baseline**: the two replicas, no parity;
//! - **equal resources** (paper's baseline): the two replicas with one more in-process session,
//!   the instance ParM would spend on the parity model;
//! - **ParM k**: the two replicas plus parity coding (parity model on that extra session).
//!
//! Latency runs from submission to the answer, real or reconstructed, whichever comes first. The
//! parity model here is the deployed model itself (same architecture and cost): this experiment
//! measures latency, not accuracy (degraded-mode accuracy is `benchmarks/parm_accuracy`).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};

use super::setup::{run_setup, Host, Load, Requests};
use super::Straggler;
use crate::remote::one_node_graph;

/// The experiment's settings.
#[derive(Debug, Clone)]
pub struct ParmBenchConfig {
    /// The deployed model (also used as its own parity model: same cost).
    pub model: PathBuf,
    /// Coding-group size.
    pub k: usize,
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
pub struct ParmRow {
    /// Set-up name.
    pub setup: String,
    /// Latency percentiles, ms: p50, p99, p99.9, max.
    pub latency_ms: [f64; 4],
    /// Requests answered by reconstruction.
    pub reconstructed: u64,
}

/// Runs the three set-ups. Refuses (naming them) when a request failed or was not answered once.
pub fn parm(config: &ParmBenchConfig) -> Result<Vec<ParmRow>> {
    let model = std::fs::canonicalize(&config.model)?;
    let parity = format!(
        "      resilience: {{parity: {{k: {}, parity_model: \"{}\"}}}}\n",
        config.k,
        model.display()
    );
    let setups: [(&str, usize, &str); 3] = [
        ("baseline (2 replicas)", 1, ""),
        ("equal resources (+1 session)", 2, ""),
        ("ParM", 1, parity.as_str()),
    ];
    let straggler = Straggler::Freeze {
        freeze: Duration::from_millis(config.freeze_ms),
        period: Duration::from_millis(config.period_ms),
    };
    let load = Load {
        rate: config.rate,
        requests: config.requests,
        warmup: 20,
        seed: 11,
        requests_from: Requests::Random,
    };
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for (name, instances, extra) in setups {
        let host = Host::start("e0", &[("model", model.as_path())], 1, false)?;
        let graph = one_node_graph(
            &model,
            instances,
            &[host.endpoint().to_string()],
            true,
            extra,
            "parm",
        )?;
        let measured = run_setup(&graph, "model", &load, Some((&straggler, &host)), "e0");
        let _ = std::fs::remove_file(&graph);
        let measured = measured?;
        let setup = if extra.is_empty() {
            name.to_string()
        } else {
            format!("{name} k={}", config.k)
        };
        failures.extend(measured.failures.iter().map(|f| format!("{setup}: {f}")));
        rows.push(ParmRow {
            setup,
            latency_ms: measured.latency_ms,
            reconstructed: measured.parity.map_or(0, |p| p.reconstructed),
        });
    }
    if !failures.is_empty() {
        bail!(
            "requests failed or were not answered once:\n{}",
            failures.join("\n")
        );
    }
    Ok(rows)
}

/// The table, with each set-up's tail against the baseline's, then the coding costs
/// ([`coding_costs`]).
pub fn parm_table(
    rows: &[ParmRow],
    costs: &[(usize, f64, f64)],
    config: &ParmBenchConfig,
) -> Result<String> {
    let base = rows.first().ok_or_else(|| anyhow!("no rows"))?;
    let mut s = format!(
        "model {}, {} requests per set-up at {} req/s (Poisson); the remote replica frozen {} ms every {} ms\n\n",
        crate::overhead::model_file_name(&config.model),
        config.requests,
        config.rate,
        config.freeze_ms,
        config.period_ms
    );
    s.push_str("| set-up | p50 ms | p99 ms | p99.9 ms | max ms | p99 / baseline | (p99.9 − p50) gap | baseline gap / gap | reconstructed |\n|---|---|---|---|---|---|---|---|---|\n");
    let gap = |r: &ParmRow| r.latency_ms[2] - r.latency_ms[0];
    for r in rows {
        s.push_str(&format!(
            "| {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.3} | {:.2} | {:.2} | {} |\n",
            r.setup,
            r.latency_ms[0],
            r.latency_ms[1],
            r.latency_ms[2],
            r.latency_ms[3],
            r.latency_ms[1] / base.latency_ms[1].max(1e-9),
            gap(r),
            gap(base) / gap(r).max(1e-9),
            r.reconstructed
        ));
    }
    s.push_str(
        "\nencoder and decoder cost (sum encoder, one query per member; paper: 93–193 µs encode, \
         8–19 µs decode)\n\n| k | encode µs per group | decode µs per reconstruction |\n|---|---|---|\n",
    );
    for (k, encode, decode) in costs {
        s.push_str(&format!("| {k} | {encode:.1} | {decode:.2} |\n"));
    }
    Ok(s)
}

/// [`coding_cost`] for k = 2, 3 and 4: `(k, encode µs, decode µs)`.
pub fn coding_costs(config: &ParmBenchConfig) -> Result<Vec<(usize, f64, f64)>> {
    (2..=4)
        .map(|k| {
            let (e, d) = coding_cost(&ParmBenchConfig {
                k,
                ..config.clone()
            })?;
            Ok((k, e, d))
        })
        .collect()
}

/// Mean time of the sum encoder over a group of `k` single-query jobs of the model's input shape,
/// and of the subtraction decoder over its output shape, in microseconds.
pub fn coding_cost(config: &ParmBenchConfig) -> Result<(f64, f64)> {
    use weir_engine::batch::TensorColumn;
    use weir_engine::tensor::TensorData;
    use weir_operators::parity::{decode_subtract, encode_group, Encoder};
    let meta = weir_engine::onnx::read_metadata(&config.model)?;
    let column = |shape: Vec<usize>, seed: f32| -> Result<TensorColumn> {
        let n: usize = shape.iter().product();
        let data = (0..n).map(|i| (i as f32 * 0.001 + seed).sin()).collect();
        Ok(TensorColumn::from_data(
            "c",
            shape,
            1,
            TensorData::F32(data),
        )?)
    };
    let input = meta.inputs.first().ok_or_else(|| anyhow!("no input"))?;
    let output = meta.outputs.first().ok_or_else(|| anyhow!("no output"))?;
    let members: Vec<Vec<TensorColumn>> = (0..config.k)
        .map(|i| Ok(vec![column(input.synthetic_shape(true), i as f32)?]))
        .collect::<Result<_>>()?;
    let refs: Vec<&[TensorColumn]> = members.iter().map(|m| &m[..]).collect();
    let outputs: Vec<Vec<TensorColumn>> = (0..config.k)
        .map(|i| Ok(vec![column(output.synthetic_shape(true), i as f32)?]))
        .collect::<Result<_>>()?;
    let others: Vec<&[TensorColumn]> = outputs[1..].iter().map(|m| &m[..]).collect();
    let iterations = 300;
    let started = std::time::Instant::now();
    for _ in 0..iterations {
        std::hint::black_box(encode_group(Encoder::Sum, std::hint::black_box(&refs)));
    }
    let encode = started.elapsed().as_secs_f64() * 1e6 / f64::from(iterations);
    let parity = &outputs[0];
    let started = std::time::Instant::now();
    for _ in 0..iterations {
        std::hint::black_box(decode_subtract(parity, std::hint::black_box(&others), 1));
    }
    let decode = started.elapsed().as_secs_f64() * 1e6 / f64::from(iterations);
    Ok((encode, decode))
}
