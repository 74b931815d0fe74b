//! The batch-growth experiment: PP-OCRv4's text recogniser (one 48×320 text line a request) on
//! one CPU session of one intra-op thread under closed-loop clients, with `batching.grow:
//! while_cheaper` (the default: a call grows to more lines only while the node's calls measured
//! lines cheaper per row in larger calls) against `to_max_size` (each call takes up to
//! `max_size` queued lines). The reference is bare ONNX Runtime on the same settings: calls of
//! 1, 2, 4, 8 and 16 lines back to back on one thread, lines per second at each size, measured in
//! the same run; a loaded node can at best serve the lines/s of its cheapest size.
//!
//! The two set-ups alternate within each repeat; each measurement warms its graph with enough
//! requests for a cold node to measure every batch size up to `max_size` (`row_cost.rs` in the
//! executor) before the measured requests start.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use ort::value::TensorRef;
use weir::loadgen::{run_load, Arrival, LoadSpec};
use weir::workload::{WorkItem, Workload};
use weir::{
    plan_spec, start, BatchGrow, DType, ExecutorSpec, GraphSpec, ModelBuilder, NamedTensor,
    OrtRuntime, RuntimeOptions, Tensor,
};

use weir_operators::model::executor::{batch_bucket_bound, batch_bucket_of, BATCH_BUCKET_BOUNDS};

use crate::conditions::Probe;
use crate::overhead::median;

/// A text line's shape: channels, height, width.
pub const LINE: [usize; 3] = [3, 48, 320];

/// The batch sizes bare ONNX Runtime is timed at.
pub const BARE_SIZES: [usize; 5] = [1, 2, 4, 8, 16];

/// The experiment's settings.
#[derive(Debug, Clone)]
pub struct BatchGrowthConfig {
    /// The recogniser (`ch_PP-OCRv4_rec_infer.onnx`).
    pub model: PathBuf,
    /// Closed-loop client counts.
    pub clients: Vec<usize>,
    /// Measured requests (lines) per measurement.
    pub requests: usize,
    /// Most lines per call.
    pub max_size: usize,
    /// Measurements of each set-up; medians are reported.
    pub repeats: usize,
    /// How long bare ONNX Runtime is timed at each batch size, per repeat.
    pub bare_seconds: f64,
}

/// One set-up under one client count: medians over the repeats.
#[derive(Debug, Clone)]
pub struct GrowthRow {
    /// The set-up.
    pub grow: BatchGrow,
    /// Closed-loop clients.
    pub clients: usize,
    /// Lines answered per second.
    pub lines_per_s: f64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 99th-percentile latency, ms.
    pub p99_ms: f64,
    /// Mean lines per ONNX Runtime call.
    pub rows_per_call: f64,
    /// The largest call the node preferred at the end (the last repeat's; `None`: up to
    /// `max_size`).
    pub preferred: Option<usize>,
}

/// Bare ONNX Runtime at one batch size: medians over the repeats.
#[derive(Debug, Clone, Copy)]
pub struct BareRow {
    /// Lines per call.
    pub batch: usize,
    /// Lines per second, calls back to back on one thread.
    pub lines_per_s: f64,
    /// Wall time per line, ms.
    pub ms_per_line: f64,
}

/// Everything one run measured, with what the node measured of its own calls.
#[derive(Debug, Clone)]
pub struct GrowthResults {
    /// weir, by client count then set-up.
    pub rows: Vec<GrowthRow>,
    /// Bare ONNX Runtime by batch size.
    pub bare: Vec<BareRow>,
    /// The `while_cheaper` node's measured CPU time per line by batch-size bucket (bound, ms),
    /// the last measurement's.
    pub node_cost: Vec<(usize, f64)>,
}

/// The name tables and plots give a set-up.
pub fn grow_name(grow: BatchGrow) -> &'static str {
    match grow {
        BatchGrow::WhileCheaper => "while_cheaper",
        BatchGrow::ToMaxSize => "to_max_size",
    }
}

/// Line `i`'s pixels: a smooth pattern of its own in [-1, 1] (the recogniser's cost does not
/// depend on what the line says).
fn line(i: usize) -> Vec<f32> {
    let n: usize = LINE.iter().product();
    (0..n)
        .map(|k| (k as f32 * 0.013 + i as f32 * 1.7).sin() * 0.9)
        .collect()
}

fn workload() -> Result<Workload> {
    let items = (0..16)
        .map(|i| WorkItem {
            inputs: vec![NamedTensor {
                name: "x".into(),
                tensor: Tensor::f32(LINE.to_vec(), line(i)),
            }],
            label: None,
        })
        .collect();
    Workload::from_items(items).ok_or_else(|| anyhow!("an empty request pool"))
}

fn graph(config: &BatchGrowthConfig, grow: BatchGrow) -> GraphSpec {
    let dims: Vec<i64> = LINE.iter().map(|&d| d as i64).collect();
    GraphSpec::builder("batch_growth")
        .input("x", DType::F32, &dims)
        .model(
            ModelBuilder::new("rec", &config.model)
                .input("x", "x")
                .batching(config.max_size, 2000)
                .batch_grow(grow)
                .executor(ExecutorSpec {
                    instances: 1,
                    intra_op_threads: 1,
                    ..ExecutorSpec::default()
                }),
        )
        .output("probs", "rec.softmax_11.tmp_0")
        .build()
}

/// One measurement of `grow` under `clients` closed-loop clients; with the node's measured cost
/// per line by bucket.
fn measure(
    config: &BatchGrowthConfig,
    workload: &Workload,
    grow: BatchGrow,
    clients: usize,
) -> Result<(GrowthRow, Vec<(usize, f64)>)> {
    let planned = plan_spec(&graph(config, grow), Path::new(".")).map_err(|d| anyhow!("{d}"))?;
    let running = start(planned.plan, RuntimeOptions::default())?;
    // A cold node measures each size up to max_size three times: about 2 × 3 × max_size lines.
    let warmup = (6 * config.max_size).max(config.requests / 10);
    let spec = LoadSpec {
        requests: config.requests,
        warmup,
        arrival: Arrival::Closed {
            concurrency: clients,
        },
        seed: 7,
        label_output: None,
        progress: false,
    };
    let probe = Probe::start(&running);
    let report = run_load(running.runtime(), workload, &spec);
    let conditions = probe.finish(&running);
    let snapshot = running
        .executor_stats()
        .into_iter()
        .find(|(node, _)| node == "rec")
        .map(|(_, s)| s);
    running.shutdown();
    if report.error_count() > 0 || report.ok != report.sent {
        bail!(
            "{} with {clients} clients: {} of {} answered, errors {:?}",
            grow_name(grow),
            report.ok,
            report.sent,
            report.errors
        );
    }
    let cost = snapshot.as_ref().and_then(|s| s.row_cost.clone());
    let node_cost = cost
        .as_ref()
        .map(|c| {
            c.per_row
                .iter()
                .zip(BATCH_BUCKET_BOUNDS)
                .filter_map(|(d, bound)| d.map(|d| (bound, d.as_secs_f64() * 1e3)))
                .collect()
        })
        .unwrap_or_default();
    let row = GrowthRow {
        grow,
        clients,
        lines_per_s: report.throughput(),
        p50_ms: report.latency_ms(0.5),
        p99_ms: report.latency_ms(0.99),
        rows_per_call: conditions.rows_per_call(),
        preferred: cost.and_then(|c| c.preferred),
    };
    Ok((row, node_cost))
}

/// Bare ONNX Runtime's lines/s at `batch` lines a call, calls back to back for `seconds`.
fn bare(session: &mut ort::session::Session, batch: usize, seconds: f64) -> Result<BareRow> {
    let data: Vec<f32> = (0..batch).flat_map(line).collect();
    let shape: Vec<usize> = std::iter::once(batch).chain(LINE).collect();
    let call = |session: &mut ort::session::Session| -> Result<()> {
        let value = TensorRef::from_array_view((shape.clone(), data.as_slice()))?;
        drop(session.run(vec![("x", value)])?);
        Ok(())
    };
    call(session)?;
    let started = Instant::now();
    let mut lines = 0usize;
    while started.elapsed() < Duration::from_secs_f64(seconds) || lines == 0 {
        call(session)?;
        lines += batch;
    }
    let elapsed = started.elapsed().as_secs_f64();
    Ok(BareRow {
        batch,
        lines_per_s: lines as f64 / elapsed,
        ms_per_line: elapsed * 1e3 / lines as f64,
    })
}

/// Runs the experiment: per repeat, bare ONNX Runtime at every size, then each client count with
/// the two set-ups in turn (the first set-up alternating between repeats).
///
/// # Errors
/// When the model is missing, a graph does not start, or a request is lost or fails.
pub fn batch_growth(config: &BatchGrowthConfig) -> Result<GrowthResults> {
    if !config.model.is_file() {
        bail!(
            "{} is missing (scripts/setup.sh fetches PP-OCRv4's models)",
            config.model.display()
        );
    }
    let workload = workload()?;
    let mut session = OrtRuntime::get()?.session("bare", &config.model, 1, false)?;
    let setups = [BatchGrow::WhileCheaper, BatchGrow::ToMaxSize];
    let mut bare_runs: Vec<Vec<BareRow>> = vec![Vec::new(); BARE_SIZES.len()];
    let mut runs: Vec<Vec<GrowthRow>> = vec![Vec::new(); config.clients.len() * setups.len()];
    let mut node_cost = Vec::new();
    for repeat in 0..config.repeats.max(1) {
        for (i, &batch) in BARE_SIZES.iter().enumerate() {
            bare_runs[i].push(bare(&mut session, batch, config.bare_seconds)?);
        }
        for (c, &clients) in config.clients.iter().enumerate() {
            for k in 0..setups.len() {
                let s = (k + repeat) % setups.len();
                let (row, cost) = measure(config, &workload, setups[s], clients)?;
                if setups[s] == BatchGrow::WhileCheaper && !cost.is_empty() {
                    node_cost = cost;
                }
                eprintln!(
                    "repeat {}: {} clients, {}: {:.1} lines/s",
                    repeat + 1,
                    clients,
                    grow_name(row.grow),
                    row.lines_per_s
                );
                runs[c * setups.len() + s].push(row);
            }
        }
    }
    let bare = bare_runs
        .into_iter()
        .map(|runs| BareRow {
            batch: runs[0].batch,
            lines_per_s: median(runs.iter().map(|r| r.lines_per_s).collect()),
            ms_per_line: median(runs.iter().map(|r| r.ms_per_line).collect()),
        })
        .collect();
    let rows = runs
        .into_iter()
        .map(|runs| {
            let pick = |f: fn(&GrowthRow) -> f64| median(runs.iter().map(f).collect());
            GrowthRow {
                grow: runs[0].grow,
                clients: runs[0].clients,
                lines_per_s: pick(|r| r.lines_per_s),
                p50_ms: pick(|r| r.p50_ms),
                p99_ms: pick(|r| r.p99_ms),
                rows_per_call: pick(|r| r.rows_per_call),
                preferred: runs[runs.len() - 1].preferred,
            }
        })
        .collect();
    Ok(GrowthResults {
        rows,
        bare,
        node_cost,
    })
}

/// The results as two Markdown tables: weir by clients and set-up (against `to_max_size` and
/// against bare ONNX Runtime's best size), and the cost per line by batch size (bare ONNX
/// Runtime's wall time, the node's measured CPU time).
pub fn batch_growth_tables(results: &GrowthResults) -> String {
    let best = results
        .bare
        .iter()
        .map(|b| b.lines_per_s)
        .fold(f64::NAN, f64::max);
    let mut out = String::from(
        "| clients | grow | lines/s | × to_max_size | × bare ORT, best size | p50 ms | p99 ms | lines per call | preferred size |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in &results.rows {
        let reference = results
            .rows
            .iter()
            .find(|o| o.clients == r.clients && o.grow == BatchGrow::ToMaxSize)
            .map_or(f64::NAN, |o| r.lines_per_s / o.lines_per_s);
        out.push_str(&format!(
            "| {} | {} | {:.1} | {:.2} | {:.2} | {:.1} | {:.1} | {:.2} | {} |\n",
            r.clients,
            grow_name(r.grow),
            r.lines_per_s,
            reference,
            r.lines_per_s / best,
            r.p50_ms,
            r.p99_ms,
            r.rows_per_call,
            r.preferred
                .map_or_else(|| "–".to_string(), |p| format!("≤ {p}"))
        ));
    }
    out.push_str(
        "\n| lines per call | bare ORT lines/s | bare ORT ms per line | node's CPU ms per line (its bucket) |\n|---|---|---|---|\n",
    );
    for b in &results.bare {
        let bucket = batch_bucket_bound(batch_bucket_of(b.batch));
        let node = results
            .node_cost
            .iter()
            .find(|(bound, _)| *bound == bucket)
            .map_or_else(|| "–".to_string(), |(_, ms)| format!("{ms:.1}"));
        out.push_str(&format!(
            "| {} | {:.1} | {:.1} | {} |\n",
            b.batch, b.lines_per_s, b.ms_per_line, node
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_graphs_validate() {
        let config = BatchGrowthConfig {
            model: std::env::var_os("WEIR_HOME")
                .map_or_else(
                    || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.weir"),
                    PathBuf::from,
                )
                .join("models/pretrained/ch_PP-OCRv4_rec_infer.onnx"),
            clients: vec![1],
            requests: 10,
            max_size: 16,
            repeats: 1,
            bare_seconds: 0.1,
        };
        for grow in [BatchGrow::WhileCheaper, BatchGrow::ToMaxSize] {
            plan_spec(&graph(&config, grow), Path::new(".")).unwrap();
        }
        assert_eq!(line(3).len(), LINE.iter().product::<usize>());
    }
}
