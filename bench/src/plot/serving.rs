//! The serving sweeps' figures: the protocols (HTTP, gRPC, remote executors, Triton's
//! `perf_analyzer`) against client concurrency, variable-length batching and the OCR pipeline.

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;

use super::{draw_legend, draw_line_with_points, PALETTE};
use crate::grpc::GrpcRow;
use crate::http::HttpRow;

/// Throughput (top) and p50 latency (bottom) against client concurrency, one column per model,
/// one line per path (bare ORT, in-process, HTTP JSON, HTTP binary). Concurrency is on a log₂ axis.
///
/// # Errors
/// When the image cannot be drawn or written (no usable font, say).
pub fn plot_http(rows: &[HttpRow], path: &Path) -> Result<()> {
    let throughput: [Line<HttpRow>; 4] = [
        ("bare ORT", BLACK, |r| Some(r.bare.0)),
        ("in-process", BLUE, |r| Some(r.in_process.0)),
        ("HTTP JSON", RED, |r| Some(r.json.0)),
        ("HTTP binary", GREEN, |r| Some(r.binary.0)),
    ];
    let latency: [Line<HttpRow>; 5] = [
        ("bare ORT", BLACK, |r| {
            (r.concurrency <= 1).then_some(r.bare.1)
        }),
        ("in-process", BLUE, |r| Some(r.in_process.1)),
        ("HTTP JSON", RED, |r| Some(r.json.1)),
        ("HTTP binary", GREEN, |r| Some(r.binary.1)),
        // Read call by call at one client only.
        ("HTTP, tensors in shared memory", PALETTE[4], |r| {
            r.interleaved.as_ref().map(|i| i.shm_p50_ms)
        }),
    ];
    let sweep = Sweep {
        model: |r: &HttpRow| r.model.as_str(),
        concurrency: |r: &HttpRow| r.concurrency,
    };
    plot_sweep(rows, &sweep, &throughput, &latency, path)
}

/// Throughput (top) and p50 latency (bottom) against client concurrency, one column per model:
/// gRPC against HTTP binary and bare ONNX Runtime.
///
/// # Errors
/// When the image cannot be drawn or written (no usable font, say).
pub fn plot_grpc(rows: &[GrpcRow], path: &Path) -> Result<()> {
    let throughput: [Line<GrpcRow>; 3] = [
        ("bare ORT", BLACK, |r| Some(r.bare.0)),
        ("HTTP binary", GREEN, |r| Some(r.http_binary.0)),
        ("gRPC", PALETTE[3], |r| Some(r.grpc.0)),
    ];
    let latency: [Line<GrpcRow>; 3] = [
        ("bare ORT", BLACK, |r| {
            (r.concurrency <= 1).then_some(r.bare.1)
        }),
        ("HTTP binary", GREEN, |r| Some(r.http_binary.1)),
        ("gRPC", PALETTE[3], |r| Some(r.grpc.1)),
    ];
    let sweep = Sweep {
        model: |r: &GrpcRow| r.model.as_str(),
        concurrency: |r: &GrpcRow| r.concurrency,
    };
    plot_sweep(rows, &sweep, &throughput, &latency, path)
}

/// Throughput (top) and p50 latency (bottom) against client concurrency: a model node on a
/// `weir executor` process over zenoh against the same node in-process.
///
/// # Errors
/// When the image cannot be drawn or written (no usable font, say).
pub fn plot_remote(model: &str, rows: &[crate::remote::RemoteRow], path: &Path) -> Result<()> {
    type Row<'a> = (&'a str, &'a crate::remote::RemoteRow);
    let rows: Vec<Row> = rows.iter().map(|r| (model, r)).collect();
    let throughput: [Line<Row>; 2] = [
        ("in-process", BLUE, |r| Some(r.1.local.0)),
        ("remote executor", PALETTE[3], |r| Some(r.1.remote.0)),
    ];
    let latency: [Line<Row>; 2] = [
        ("in-process", BLUE, |r| Some(r.1.local.1)),
        ("remote executor", PALETTE[3], |r| Some(r.1.remote.1)),
    ];
    let sweep = Sweep {
        model: |r: &Row| r.0,
        concurrency: |r: &Row| r.1.concurrency,
    };
    plot_sweep(&rows, &sweep, &throughput, &latency, path)
}

/// Throughput (top) and p50 latency (bottom) against client concurrency: perf_analyzer's
/// figures for `weir serve` over HTTP and gRPC against bare ONNX Runtime.
///
/// # Errors
/// When the image cannot be drawn or written (no usable font, say).
pub fn plot_perf_analyzer(
    rows: &[crate::perf_analyzer::PerfAnalyzerRepeat],
    path: &Path,
) -> Result<()> {
    type Row = crate::perf_analyzer::PerfAnalyzerRepeat;
    let throughput: [Line<Row>; 3] = [
        ("bare ORT", BLACK, |r| Some(r.bare.0)),
        ("perf_analyzer HTTP", GREEN, |r| Some(r.http.0)),
        ("perf_analyzer gRPC", PALETTE[3], |r| Some(r.grpc.0)),
    ];
    let latency: [Line<Row>; 3] = [
        ("bare ORT", BLACK, |r| Some(r.bare.1)),
        ("perf_analyzer HTTP", GREEN, |r| Some(r.http.1)),
        ("perf_analyzer gRPC", PALETTE[3], |r| Some(r.grpc.1)),
    ];
    let sweep = Sweep {
        model: |r: &Row| r.model.as_str(),
        concurrency: |r: &Row| r.concurrency,
    };
    plot_sweep(rows, &sweep, &throughput, &latency, path)
}

/// One line of a sweep plot: its label, colour, and its value in a row (none: no point).
type Line<T> = (&'static str, RGBColor, fn(&T) -> Option<f64>);

/// How a sweep plot reads a row's model and client concurrency.
struct Sweep<T> {
    model: fn(&T) -> &str,
    concurrency: fn(&T) -> usize,
}

/// Throughput and latency lines against client concurrency (log₂ axis), one column per model.
fn plot_sweep<T>(
    rows: &[T],
    sweep: &Sweep<T>,
    throughput: &[Line<T>],
    latency: &[Line<T>],
    path: &Path,
) -> Result<()> {
    let mut models: Vec<&str> = rows.iter().map(|r| (sweep.model)(r)).collect();
    models.dedup();
    let root =
        BitMapBackend::new(path, (560 * models.len().max(1) as u32, 760)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let panels = root.split_evenly((2, models.len().max(1)));
    let log_c = |r: &T| ((sweep.concurrency)(r) as f64).log2();
    for (m, model) in models.iter().enumerate() {
        let mine: Vec<&T> = rows.iter().filter(|r| (sweep.model)(r) == *model).collect();
        for (p, (title, lines)) in [
            ("throughput, requests/s", throughput),
            ("p50 latency, ms", latency),
        ]
        .iter()
        .enumerate()
        {
            let area = &panels[p * models.len() + m];
            let points = |pick: fn(&T) -> Option<f64>| -> Vec<(f64, f64)> {
                mine.iter()
                    .filter_map(|r| pick(r).map(|v| (log_c(r), v)))
                    .collect()
            };
            let top = lines
                .iter()
                .flat_map(|(_, _, pick)| points(*pick))
                .map(|(_, y)| y)
                .fold(0.0, f64::max)
                * 1.15;
            let right = mine
                .iter()
                .map(|r| log_c(r))
                .fold(0.0, f64::max)
                .max(1.0)
                .ceil();
            let mut chart = ChartBuilder::on(area)
                .caption(format!("{model}: {title}"), ("sans-serif", 18))
                .margin(12)
                .x_label_area_size(36)
                .y_label_area_size(56)
                .build_cartesian_2d(-0.2..right + 0.2, 0.0..top.max(1.0))
                .map_err(|e| anyhow!("{e}"))?;
            chart
                .configure_mesh()
                .x_desc("clients")
                .x_labels(right as usize + 1)
                .x_label_formatter(&|x| format!("{}", 2f64.powf(x.round()) as u64))
                .light_line_style(WHITE)
                .draw()
                .map_err(|e| anyhow!("{e}"))?;
            for (name, color, pick) in lines.iter() {
                draw_line_with_points(&mut chart, points(*pick), *color, name.to_string())?;
            }
            draw_legend(&mut chart)?;
        }
    }
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

/// The variable-length experiment: throughput (left) and p99 latency (middle) against closed-loop
/// clients, and p99 latency at each Poisson rate (right), one line per batching set-up.
///
/// # Errors
/// When the image cannot be drawn or written (no usable font, say).
pub fn plot_variable_length(
    rows: &[crate::variable_length::VariableLengthRow],
    path: &Path,
) -> Result<()> {
    use crate::variable_length::{Batching, Load};
    let root = BitMapBackend::new(path, (1500, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let panels = root.split_evenly((1, 3));
    type Pick = fn(&crate::variable_length::VariableLengthRow) -> f64;
    let figures: [(&str, &str, bool, Pick); 3] = [
        ("throughput, requests/s", "clients", true, |r| r.throughput),
        ("p99 latency, ms", "clients", true, |r| r.p99_ms),
        (
            "p99 latency at a Poisson rate, ms",
            "requests/s offered",
            false,
            |r| r.p99_ms,
        ),
    ];
    for (area, (title, x_desc, closed, pick)) in panels.iter().zip(figures) {
        let x_of = |load: Load| match (load, closed) {
            (Load::Clients(c), true) => Some(c as f64),
            (Load::Rate(r), false) => Some(r),
            _ => None,
        };
        let series: Vec<(Batching, Vec<(f64, f64)>)> = Batching::ALL
            .into_iter()
            .map(|b| {
                let points = rows
                    .iter()
                    .filter(|r| r.batching == b)
                    .filter_map(|r| x_of(r.load).map(|x| (x, pick(r))))
                    .collect();
                (b, points)
            })
            .collect();
        let all = series.iter().flat_map(|(_, p)| p.iter().copied());
        let (left, right, top) = all.fold((f64::MAX, 0.0f64, 0.0f64), |(l, r, t), (x, y)| {
            (l.min(x), r.max(x), t.max(y))
        });
        if right <= 0.0 {
            continue;
        }
        let pad = ((right - left) * 0.08).max(0.5);
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d((left - pad)..(right + pad), 0.0..(top * 1.15).max(1e-3))
            .map_err(|e| anyhow!("{e}"))?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .light_line_style(WHITE)
            .draw()
            .map_err(|e| anyhow!("{e}"))?;
        for (i, (b, points)) in series.into_iter().enumerate() {
            draw_line_with_points(&mut chart, points, PALETTE[i], b.name().to_string())?;
        }
        draw_legend(&mut chart)?;
    }
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

/// The pipeline experiment: images per second (left) and p99 latency (right) against client
/// count, one line for `weir serve` and one for the Python pipeline.
///
/// # Errors
/// When the image cannot be drawn or written (no usable font, say).
pub fn plot_pipeline(rows: &[crate::pipeline::PipelineRow], path: &Path) -> Result<()> {
    use crate::pipeline::{Measured, PipelineRow};
    let root = BitMapBackend::new(path, (1000, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let panels = root.split_evenly((1, 2));
    type Pick = fn(&Measured) -> f64;
    type Side = fn(&PipelineRow) -> &Measured;
    let figures: [(&str, Pick); 2] = [
        ("throughput, images/s", |m| m.throughput),
        ("p99 latency per image, ms", |m| m.p99_ms),
    ];
    let sides: [(&str, Side); 3] = [
        ("weir serve (HTTP, binary)", |r| &r.weir),
        ("Python (Pillow, numpy, onnxruntime)", |r| &r.python),
        ("the three models alone (onnxruntime)", |r| &r.models),
    ];
    let right = rows.iter().map(|r| r.clients as f64).fold(1.0, f64::max);
    for (area, (title, pick)) in panels.iter().zip(figures) {
        let top = rows
            .iter()
            .flat_map(|r| sides.map(|(_, side)| pick(side(r))))
            .fold(0.0, f64::max);
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0.5..right + 0.5, 0.0..(top * 1.25).max(1e-3))
            .map_err(|e| anyhow!("{e}"))?;
        chart
            .configure_mesh()
            .x_desc("clients")
            .light_line_style(WHITE)
            .draw()
            .map_err(|e| anyhow!("{e}"))?;
        for (i, (name, side)) in sides.into_iter().enumerate() {
            let points = rows
                .iter()
                .map(|r| (r.clients as f64, pick(side(r))))
                .collect();
            draw_line_with_points(&mut chart, points, PALETTE[i], name.to_string())?;
        }
        draw_legend(&mut chart)?;
    }
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

/// A line of a figure whose legend is made at run time: legend, colour, points.
type OwnedSeries = (String, RGBColor, Vec<(f64, f64)>);

/// The batch-growth experiment: lines/s against client count for each set-up, with bare ONNX
/// Runtime's lines/s at one line a call and at the largest size as flat references.
///
/// # Errors
/// When the image cannot be drawn or written (no usable font, say).
pub fn plot_batch_growth(results: &crate::batch_growth::GrowthResults, path: &Path) -> Result<()> {
    use crate::batch_growth::grow_name;
    use weir::BatchGrow;
    let clients: Vec<f64> = {
        let mut c: Vec<f64> = results.rows.iter().map(|r| r.clients as f64).collect();
        c.dedup();
        c
    };
    let mut series: Vec<OwnedSeries> = [BatchGrow::WhileCheaper, BatchGrow::ToMaxSize]
        .into_iter()
        .enumerate()
        .map(|(i, grow)| {
            let points = results
                .rows
                .iter()
                .filter(|r| r.grow == grow)
                .map(|r| (r.clients as f64, r.lines_per_s))
                .collect();
            (
                format!("weir, grow: {}", grow_name(grow)),
                PALETTE[i],
                points,
            )
        })
        .collect();
    for (i, bare) in [results.bare.first(), results.bare.last()]
        .into_iter()
        .flatten()
        .enumerate()
    {
        let flat = clients.iter().map(|&c| (c, bare.lines_per_s)).collect();
        series.push((
            format!("bare ORT, {} line(s) a call", bare.batch),
            PALETTE[2 + i],
            flat,
        ));
    }
    super::line_plot(
        path,
        "PP-OCRv4 recogniser, one CPU session of one thread",
        ("clients", "lines/s"),
        series
            .iter()
            .map(|(name, color, points)| (name.as_str(), *color, points.clone()))
            .collect(),
    )
}
