//! The overhead experiment: what weir's dataflow path costs over calling ONNX Runtime directly, for one model:
//! saturated throughput with the thread layout that maximises it on 2 cores (2 sessions × 1
//! intra-op thread), and latency at concurrency 1 with the layout that minimises it (1 session × 2
//! threads). Bare ORT and weir use the same library, model, inputs and session settings, and take
//! turns (chunks for throughput, single calls for latency) so both see the same noisy machine.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use ort::session::Session;
use ort::value::TensorRef;
use weir_engine::onnx::{read_metadata, TensorInfo};
use weir_engine::spec::{ExecutorSpec, GraphSpec, ModelBuilder};
use weir_engine::tensor::DType;
use weir_operators::model::OrtRuntime;

use weir::loadgen::{latency_histogram, run_load, Arrival, LoadSpec};
use weir::workload::Workload;
use weir::{plan_spec, start, RunningGraph, RuntimeOptions};

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
    /// Requests per throughput chunk.
    pub requests: usize,
    /// Latency call pairs per repeat.
    pub latency_requests: usize,
    /// Throughput chunks per side; latency pairs are `latency_requests × repeats`.
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
    /// p50 latency at concurrency 1, bare ORT, ms.
    pub bare_p50_ms: f64,
    /// p50 latency at concurrency 1, weir, ms.
    pub weir_p50_ms: f64,
    /// Median over call pairs of weir's latency minus bare ORT's, µs.
    pub added_p50_us: f64,
    /// Median over call pairs of "bare ORT behind one thread hop" minus bare ORT, µs: what handing
    /// a request to another thread and back costs, without any of weir.
    pub hop_added_us: f64,
    /// Mean latency at concurrency 1, bare ORT, ms.
    pub bare_mean_ms: f64,
    /// Mean latency at concurrency 1, weir, ms.
    pub weir_mean_ms: f64,
    /// Mean time weir's executor spent inside ONNX Runtime per call in the latency runs, ms.
    pub weir_ort_mean_ms: f64,
    /// p99 latency at concurrency 1, bare ORT, ms.
    pub bare_p99_ms: f64,
    /// p99 latency at concurrency 1, weir, ms.
    pub weir_p99_ms: f64,
}

pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        0.0
    } else {
        v[v.len() / 2]
    }
}

/// `median [min–max]` of `values` with `digits` decimals: how the tables of repeated runs give a
/// figure and its spread.
pub(crate) fn spread(values: &[f64], digits: usize) -> String {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!(
        "{:.digits$} [{min:.digits$}–{max:.digits$}]",
        median(values.to_vec())
    )
}

/// The file name of the model at `path`, as a report's first line names it (`?` when it has
/// none that is text).
pub(crate) fn model_file_name(path: &Path) -> &str {
    path.file_name().and_then(|f| f.to_str()).unwrap_or("?")
}

/// The first input and first output of the model at `path`, as its file declares them.
pub(crate) fn first_input_output(path: &Path) -> Result<(TensorInfo, TensorInfo)> {
    let mut meta = read_metadata(path)?;
    if meta.inputs.is_empty() {
        return Err(anyhow!("{} has no input", path.display()));
    }
    if meta.outputs.is_empty() {
        return Err(anyhow!("{} has no output", path.display()));
    }
    Ok((meta.inputs.swap_remove(0), meta.outputs.swap_remove(0)))
}

/// The per-request input shape of the image models this experiment runs.
pub(crate) const IMAGE: [usize; 3] = [3, 224, 224];

/// A model's first input's shape without its batch dimension (every other dimension fixed).
pub(crate) fn row_shape(path: &Path) -> Result<Vec<usize>> {
    let (input, _) = first_input_output(path)?;
    input
        .dims
        .iter()
        .skip(1)
        .map(|d| match d {
            weir_engine::tensor::Dim::Fixed(n) => Ok(*n),
            weir_engine::tensor::Dim::Dynamic => Err(anyhow!(
                "{}: input `{}` has a dimension only known per request",
                path.display(),
                input.name
            )),
        })
        .collect()
}

pub(crate) fn model_input(path: &Path) -> Result<(String, String)> {
    let (input, output) = first_input_output(path)?;
    Ok((input.name, output.name))
}

/// Runs `requests` bare ORT calls spread over `sessions` (one thread each); returns the wall time.
pub(crate) fn bare_chunk(
    sessions: &mut [Session],
    input: &str,
    shape: &[usize],
    data: &[f32],
    requests: usize,
) -> Result<Duration> {
    let per = requests.div_ceil(sessions.len());
    let started = Instant::now();
    std::thread::scope(|s| {
        let handles: Vec<_> = sessions
            .iter_mut()
            .map(|session| {
                s.spawn(move || {
                    (0..per).try_for_each(|_| bare_call(session, input, shape, data).map(drop))
                })
            })
            .collect();
        handles
            .into_iter()
            .try_for_each(|h| h.join().map_err(|_| anyhow!("bare ORT thread panicked"))?)
    })?;
    Ok(started.elapsed())
}

/// Bare ORT on its own thread, called through a channel: the smallest thing any server that keeps
/// inference off the caller's thread must do. Its cost over a direct call is the floor for weir's.
struct HopReference {
    requests: Option<crossbeam_channel::Sender<(Vec<f32>, crossbeam_channel::Sender<()>)>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HopReference {
    fn start(mut session: Session, input: String) -> HopReference {
        let (tx, rx) = crossbeam_channel::bounded::<(Vec<f32>, crossbeam_channel::Sender<()>)>(1);
        let thread = std::thread::spawn(move || {
            for (data, reply) in rx {
                if bare_call(&mut session, &input, &IMAGE, &data).is_ok() {
                    let _ = reply.send(());
                }
            }
        });
        HopReference {
            requests: Some(tx),
            thread: Some(thread),
        }
    }

    fn call(&self, data: Vec<f32>) -> Result<Duration> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let t = Instant::now();
        self.requests
            .as_ref()
            .ok_or_else(|| anyhow!("hop thread gone"))?
            .send((data, tx))?;
        rx.recv()?;
        Ok(t.elapsed())
    }
}

impl Drop for HopReference {
    fn drop(&mut self) {
        self.requests = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One bare ORT call; returns its latency.
pub(crate) fn bare_call(
    session: &mut Session,
    input: &str,
    shape: &[usize],
    data: &[f32],
) -> Result<Duration> {
    let full: Vec<usize> = std::iter::once(1).chain(shape.iter().copied()).collect();
    let t = Instant::now();
    let value = TensorRef::from_array_view((full, data))?;
    drop(session.run(vec![(input, value)])?);
    Ok(t.elapsed())
}

/// A running one-model graph with `layout`, and its input workload.
pub(crate) fn weir_graph(
    path: &Path,
    input: &str,
    output: &str,
    shape: &[usize],
    layout: Layout,
) -> Result<(RunningGraph, Workload)> {
    weir_graph_with(
        path,
        input,
        output,
        shape,
        layout,
        RuntimeOptions::default(),
    )
}

/// [`weir_graph`] started with `options`.
pub(crate) fn weir_graph_with(
    path: &Path,
    input: &str,
    output: &str,
    shape: &[usize],
    layout: Layout,
    options: RuntimeOptions,
) -> Result<(RunningGraph, Workload)> {
    let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
    let spec = GraphSpec::builder("overhead")
        .input("x", DType::F32, &dims)
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
    Ok((start(graph.plan, options)?, workload))
}

/// The f32 elements of the workload's first request's first input (what bare ORT is fed).
pub(crate) fn first_input(workload: &Workload) -> Vec<f32> {
    workload.item(0).inputs[0]
        .tensor
        .as_f32()
        .map(<[f32]>::to_vec)
        .unwrap_or_default()
}

pub(crate) fn sessions(runtime: &OrtRuntime, path: &Path, layout: Layout) -> Result<Vec<Session>> {
    (0..layout.instances)
        .map(|_| Ok(runtime.session("bare", path, layout.threads, false)?))
        .collect()
}

pub(crate) fn quantile_ms(samples: &[Duration], q: f64) -> Result<f64> {
    let mut hist = latency_histogram();
    for d in samples {
        hist.record((d.as_micros() as u64).max(1))?;
    }
    Ok(hist.value_at_quantile(q) as f64 / 1000.0)
}

/// Runs the overhead experiment. Throughput: bare and weir alternate in chunks of
/// `config.requests`, `config.repeats` times each, and each side's median chunk throughput is
/// reported. Latency: bare and weir alternate call by call at concurrency 1, so both see the same
/// machine; the added latency is the median of the paired differences.
///
/// # Errors
/// When the runtime or a model cannot be loaded, or a run fails.
pub fn overhead(config: &OverheadConfig) -> Result<Vec<OverheadRow>> {
    let runtime = OrtRuntime::get()?;
    let mut rows = Vec::new();
    for (name, path) in &config.models {
        let (input, output) =
            model_input(path).with_context(|| format!("reading {}", path.display()))?;

        let tl = config.throughput_layout;
        let (graph, workload) = weir_graph(path, &input, &output, &IMAGE, tl)?;
        let data = first_input(&workload);
        let mut bare = sessions(&runtime, path, tl)?;
        bare_chunk(&mut bare, &input, &IMAGE, &data, 20)?;
        let load = |requests| LoadSpec {
            requests,
            warmup: 0,
            arrival: Arrival::Closed {
                concurrency: tl.instances * 2,
            },
            seed: 1,
            label_output: None,
            progress: false,
        };
        run_load(graph.runtime(), &workload, &load(20));
        let (mut bt, mut wt) = (Vec::new(), Vec::new());
        for r in 0..config.repeats {
            eprintln!("{name}: throughput chunk {}/{}", r + 1, config.repeats);
            let elapsed = bare_chunk(&mut bare, &input, &IMAGE, &data, config.requests)?;
            bt.push(
                (config.requests.div_ceil(tl.instances) * tl.instances) as f64
                    / elapsed.as_secs_f64(),
            );
            let report = run_load(graph.runtime(), &workload, &load(config.requests));
            if report.error_count() > 0 {
                return Err(anyhow!("weir run had errors: {:?}", report.errors));
            }
            wt.push(report.throughput());
        }
        drop(bare);
        graph.shutdown();

        let ll = config.latency_layout;
        let (graph, workload) = weir_graph(path, &input, &output, &IMAGE, ll)?;
        let mut bare = sessions(&runtime, path, ll)?;
        let session = bare.first_mut().ok_or_else(|| anyhow!("no session"))?;
        let hop = HopReference::start(
            runtime.session("hop", path, ll.threads, false)?,
            input.clone(),
        );
        let (mut bl, mut wl, mut diff, mut hop_diff) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let calls = config.latency_requests * config.repeats;
        eprintln!("{name}: {calls} alternating latency calls");
        for i in 0..calls + 10 {
            // Each side gets its input as a fresh buffer, as a request from a client would arrive.
            let fresh = data.clone();
            let b = bare_call(session, &input, &IMAGE, &fresh)?;
            drop(fresh);
            let h = hop.call(data.clone())?;
            let inputs = workload.item(0).inputs;
            let t = Instant::now();
            graph
                .runtime()
                .infer(inputs)
                .map_err(|e| anyhow!("weir request failed: {e}"))?;
            let w = t.elapsed();
            if i >= 10 {
                bl.push(b);
                wl.push(w);
                diff.push(w.as_secs_f64() - b.as_secs_f64());
                hop_diff.push(h.as_secs_f64() - b.as_secs_f64());
            }
        }
        let ort_per_call = graph
            .executor_stats()
            .first()
            .map(|(_, s)| s.busy.as_secs_f64() / s.runs.max(1) as f64)
            .unwrap_or(0.0);
        let mean = |v: &[Duration]| {
            v.iter().map(Duration::as_secs_f64).sum::<f64>() / v.len().max(1) as f64
        };
        graph.shutdown();
        rows.push(OverheadRow {
            bare_mean_ms: mean(&bl) * 1e3,
            weir_mean_ms: mean(&wl) * 1e3,
            weir_ort_mean_ms: ort_per_call * 1e3,
            model: name.clone(),
            bare_throughput: median(bt),
            weir_throughput: median(wt),
            bare_p50_ms: quantile_ms(&bl, 0.5)?,
            weir_p50_ms: quantile_ms(&wl, 0.5)?,
            added_p50_us: median(diff) * 1e6,
            hop_added_us: median(hop_diff) * 1e6,
            bare_p99_ms: quantile_ms(&bl, 0.99)?,
            weir_p99_ms: quantile_ms(&wl, 0.99)?,
        });
    }
    Ok(rows)
}

/// The overhead table as Markdown.
pub fn overhead_table(rows: &[OverheadRow], config: &OverheadConfig) -> String {
    let tl = config.throughput_layout;
    let ll = config.latency_layout;
    let mut s = format!(
        "| model | bare ORT req/s ({}×{}) | weir req/s | ratio | bare ORT p50 ms ({}×{}, c=1) | weir p50 ms | added latency µs (median of pairs) | one thread hop µs (reference) | bare p99 ms | weir p99 ms |\n|---|---|---|---|---|---|---|---|---|---|\n",
        tl.instances, tl.threads, ll.instances, ll.threads
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {:.1} | {:.1} | {:.3} | {:.3} | {:.3} | {:+.0} | {:+.0} | {:.3} | {:.3} |\n",
            r.model,
            r.bare_throughput,
            r.weir_throughput,
            r.weir_throughput / r.bare_throughput.max(1e-9),
            r.bare_p50_ms,
            r.weir_p50_ms,
            r.added_p50_us,
            r.hop_added_us,
            r.bare_p99_ms,
            r.weir_p99_ms
        ));
    }
    s.push_str("\nWhere weir's latency goes at concurrency 1 (means):\n\n| model | bare ORT call ms | weir request ms | of which inside ORT ms | weir outside ORT µs |\n|---|---|---|---|---|\n");
    for r in rows {
        s.push_str(&format!(
            "| {} | {:.3} | {:.3} | {:.3} | {:.0} |\n",
            r.model,
            r.bare_mean_ms,
            r.weir_mean_ms,
            r.weir_ort_mean_ms,
            (r.weir_mean_ms - r.weir_ort_mean_ms) * 1000.0
        ));
    }
    s
}
