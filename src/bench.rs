//! Benchmark experiments that run inside the `weir` binary (`weir bench ...`), so they measure the
//! same code and the same ONNX Runtime library as `weir run`, with the reference in the same process.
//!
//! `overhead`: what weir's dataflow path costs over calling ONNX Runtime directly, for one model:
//! saturated throughput with the thread layout that maximises it here (2 sessions × 1 intra-op
//! thread on 2 cores), and latency at concurrency 1 with the layout that minimises it (1 session × 2
//! threads). Bare ORT and weir use the same library, model, inputs and session settings; runs
//! alternate and repeat, and the table reports medians.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use ort::session::Session;
use ort::value::TensorRef;
use weir_engine::onnx::read_metadata;
use weir_engine::spec::{ExecutorSpec, GraphSpec, ModelBuilder};
use weir_engine::tensor::DType;
use weir_operators::model::OrtRuntime;

use crate::loadgen::{latency_histogram, run_load, Arrival, LoadSpec};
use crate::workload::Workload;
use crate::{plan_spec, start, RuntimeOptions};

/// A thread layout: sessions running at once × intra-op threads each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Sessions (one thread each).
    pub instances: usize,
    /// Intra-op threads per session.
    pub threads: usize,
}

/// The overhead experiment's settings.
#[derive(Debug, Clone)]
pub struct OverheadConfig {
    /// Models to measure: display name and file.
    pub models: Vec<(String, PathBuf)>,
    /// Requests per saturated measurement.
    pub requests: usize,
    /// Requests per latency measurement.
    pub latency_requests: usize,
    /// Alternating repetitions (medians reported).
    pub repeats: usize,
    /// Layout for the throughput runs.
    pub throughput_layout: Layout,
    /// Layout for the latency runs.
    pub latency_layout: Layout,
}

/// One row of the overhead table.
#[derive(Debug, Clone)]
pub struct OverheadRow {
    /// Model.
    pub model: String,
    /// Saturated throughput, bare ORT, requests/s (median).
    pub bare_throughput: f64,
    /// Saturated throughput, weir, requests/s (median).
    pub weir_throughput: f64,
    /// p50 latency at concurrency 1, bare ORT, ms (median over repeats).
    pub bare_p50_ms: f64,
    /// p50 latency at concurrency 1, weir, ms (median over repeats).
    pub weir_p50_ms: f64,
    /// p99 latency at concurrency 1, bare ORT, ms (median over repeats).
    pub bare_p99_ms: f64,
    /// p99 latency at concurrency 1, weir, ms (median over repeats).
    pub weir_p99_ms: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        0.0
    } else {
        v[v.len() / 2]
    }
}

fn model_input(path: &Path) -> Result<(String, String)> {
    let meta = read_metadata(path)?;
    let input = meta
        .inputs
        .first()
        .ok_or_else(|| anyhow!("{} has no input", path.display()))?;
    let output = meta
        .outputs
        .first()
        .ok_or_else(|| anyhow!("{} has no output", path.display()))?;
    Ok((input.name.clone(), output.name.clone()))
}

/// Bare ORT, closed loop: `layout.instances` threads each owning a session, calling it back to back.
/// Returns (throughput, p50 ms, p99 ms).
fn bare_run(
    runtime: &OrtRuntime,
    path: &Path,
    input: &str,
    data: &[f32],
    layout: Layout,
    requests: usize,
) -> Result<(f64, f64, f64)> {
    let mut sessions = Vec::new();
    for _ in 0..layout.instances {
        sessions.push(runtime.session("bare", path, layout.threads, false)?);
    }
    let per = requests.div_ceil(layout.instances);
    let started = Instant::now();
    let lat: Vec<Result<Vec<Duration>>> = std::thread::scope(|s| {
        let handles: Vec<_> = sessions
            .into_iter()
            .map(|mut session: Session| {
                s.spawn(move || -> Result<Vec<Duration>> {
                    let mut out = Vec::with_capacity(per);
                    for _ in 0..per {
                        let t = Instant::now();
                        let value = TensorRef::from_array_view(([1usize, 3, 224, 224], data))?;
                        let outputs = session.run(vec![(input, value)])?;
                        drop(outputs);
                        out.push(t.elapsed());
                    }
                    Ok(out)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| anyhow!("bare ORT thread panicked"))?)
            .collect()
    });
    let elapsed = started.elapsed();
    let mut hist = latency_histogram();
    let mut n = 0;
    for l in lat {
        for d in l? {
            hist.record((d.as_micros() as u64).max(1))?;
            n += 1;
        }
    }
    Ok((
        n as f64 / elapsed.as_secs_f64(),
        hist.value_at_quantile(0.5) as f64 / 1000.0,
        hist.value_at_quantile(0.99) as f64 / 1000.0,
    ))
}

/// weir, closed loop at `concurrency`, over a one-model graph with `layout`.
fn weir_run(
    path: &Path,
    input: &str,
    output: &str,
    layout: Layout,
    concurrency: usize,
    requests: usize,
) -> Result<(f64, f64, f64)> {
    let spec = GraphSpec::builder("overhead")
        .input("x", DType::F32, &[3, 224, 224])
        .model(
            ModelBuilder::new("model", path)
                .input(input, "x")
                .executor(ExecutorSpec {
                    instances: layout.instances,
                    intra_op_threads: layout.threads,
                    ..ExecutorSpec::default()
                }),
        )
        .output("y", &format!("model.{output}"))
        .build();
    let graph = plan_spec(&spec, Path::new(".")).map_err(|d| anyhow!("{d}"))?;
    let workload = Workload::random(&graph.plan, 1, 7);
    let running = start(graph.plan, RuntimeOptions::default())?;
    let load = LoadSpec {
        requests,
        warmup: 10,
        arrival: Arrival::Closed { concurrency },
        seed: 1,
        label_output: None,
        progress: false,
    };
    let report = run_load(running.runtime(), &workload, &load);
    running.shutdown();
    if report.error_count() > 0 {
        return Err(anyhow!("weir run had errors: {:?}", report.errors));
    }
    Ok((
        report.throughput(),
        report.latency_ms(0.5),
        report.latency_ms(0.99),
    ))
}

/// Runs the overhead experiment.
///
/// # Errors
/// When the runtime or a model cannot be loaded, or a run fails.
pub fn overhead(config: &OverheadConfig) -> Result<Vec<OverheadRow>> {
    let runtime = OrtRuntime::get()?;
    let mut rows = Vec::new();
    for (name, path) in &config.models {
        let (input, output) =
            model_input(path).with_context(|| format!("reading {}", path.display()))?;
        let data: Vec<f32> = Workload::random(
            &plan_spec(
                &GraphSpec::builder("x")
                    .input("x", DType::F32, &[3, 224, 224])
                    .model(ModelBuilder::new("m", path).input(&input, "x"))
                    .output("y", &format!("m.{output}"))
                    .build(),
                Path::new("."),
            )
            .map_err(|d| anyhow!("{d}"))?
            .plan,
            1,
            7,
        )
        .item(0)
        .inputs[0]
            .tensor
            .as_f32()
            .map(<[f32]>::to_vec)
            .unwrap_or_default();
        let (mut bt, mut wt, mut bl, mut wl, mut bl99, mut wl99) =
            (vec![], vec![], vec![], vec![], vec![], vec![]);
        // Warm both paths once (page cache, allocator, ORT's first-run work).
        bare_run(&runtime, path, &input, &data, config.latency_layout, 10)?;
        for r in 0..config.repeats {
            eprintln!("{name}: repeat {}/{}", r + 1, config.repeats);
            let tl = config.throughput_layout;
            bt.push(bare_run(&runtime, path, &input, &data, tl, config.requests)?.0);
            wt.push(weir_run(path, &input, &output, tl, tl.instances * 2, config.requests)?.0);
            let ll = config.latency_layout;
            let (_, p50, p99) =
                bare_run(&runtime, path, &input, &data, ll, config.latency_requests)?;
            bl.push(p50);
            bl99.push(p99);
            let (_, p50, p99) = weir_run(path, &input, &output, ll, 1, config.latency_requests)?;
            wl.push(p50);
            wl99.push(p99);
        }
        rows.push(OverheadRow {
            model: name.clone(),
            bare_throughput: median(bt),
            weir_throughput: median(wt),
            bare_p50_ms: median(bl),
            weir_p50_ms: median(wl),
            bare_p99_ms: median(bl99),
            weir_p99_ms: median(wl99),
        });
    }
    Ok(rows)
}

/// The overhead table as Markdown.
pub fn overhead_table(rows: &[OverheadRow], config: &OverheadConfig) -> String {
    let tl = config.throughput_layout;
    let ll = config.latency_layout;
    let mut s = format!(
        "| model | bare ORT req/s ({}×{}) | weir req/s | ratio | bare ORT p50 ms ({}×{}, c=1) | weir p50 ms | added p50 µs | bare p99 ms | weir p99 ms |\n|---|---|---|---|---|---|---|---|---|\n",
        tl.instances, tl.threads, ll.instances, ll.threads
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {:.1} | {:.1} | {:.3} | {:.3} | {:.3} | {:+.0} | {:.3} | {:.3} |\n",
            r.model,
            r.bare_throughput,
            r.weir_throughput,
            r.weir_throughput / r.bare_throughput.max(1e-9),
            r.bare_p50_ms,
            r.weir_p50_ms,
            (r.weir_p50_ms - r.bare_p50_ms) * 1000.0,
            r.bare_p99_ms,
            r.weir_p99_ms
        ));
    }
    s
}
