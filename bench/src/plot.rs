//! PNG plots of benchmark sweeps (plotters, bitmap backend; fonts come from the system's
//! fontconfig, loaded at run time).

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::coord::CoordTranslate;
use plotters::prelude::*;

use crate::grpc::GrpcRow;
use crate::http::HttpRow;

/// The colours of the figures with one line per configuration or set-up, in the order they are
/// handed out.
pub(crate) const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
];

/// Tick values for a logarithmic axis from `bottom` to `top`: every `m·10^k` (m = 1..9) inside,
/// or only m = 1, 2, 5 where that gives more than twelve. plotters labels a log axis at powers of
/// ten only, so a range within one decade (latencies of 4–12 ms) would show no number at all.
pub(super) fn log_ticks(bottom: f64, top: f64) -> Vec<f64> {
    if !(bottom.is_finite() && top.is_finite() && bottom > 0.0 && top > bottom) {
        return Vec::new();
    }
    let within = |mantissas: &[f64]| -> Vec<f64> {
        let first = bottom.log10().floor() as i32;
        let last = top.log10().ceil() as i32;
        (first..=last)
            .flat_map(|k| mantissas.iter().map(move |m| m * 10f64.powi(k)))
            .filter(|v| *v >= bottom && *v <= top)
            .collect()
    };
    let all = within(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
    if all.len() > 12 {
        within(&[1.0, 2.0, 5.0])
    } else {
        all
    }
}

/// Draws `points` as a line with a dot on each point, labelled `label` in the legend.
pub(crate) fn draw_line_with_points<'a, DB, CT>(
    chart: &mut ChartContext<'a, DB, CT>,
    points: Vec<(f64, f64)>,
    color: RGBColor,
    label: String,
) -> Result<()>
where
    DB: DrawingBackend + 'a,
    CT: CoordTranslate<From = (f64, f64)>,
{
    let style = ShapeStyle::from(color).stroke_width(2);
    draw_labelled_line(chart, points.clone(), style, label)?;
    chart
        .draw_series(
            points
                .into_iter()
                .map(|p| Circle::new(p, 4, style.filled())),
        )
        .map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

/// Draws `points` as a line of `style`, labelled `label` in the legend.
pub(crate) fn draw_labelled_line<'a, DB, CT>(
    chart: &mut ChartContext<'a, DB, CT>,
    points: impl IntoIterator<Item = (f64, f64)>,
    style: ShapeStyle,
    label: impl Into<String>,
) -> Result<()>
where
    DB: DrawingBackend + 'a,
    CT: CoordTranslate<From = (f64, f64)>,
{
    chart
        .draw_series(LineSeries::new(points, style))
        .map_err(|e| anyhow!("{e}"))?
        .label(label)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
    Ok(())
}

/// Draws the series labels in a box at the upper left.
pub(crate) fn draw_legend<'a, DB, CT>(chart: &mut ChartContext<'a, DB, CT>) -> Result<()>
where
    DB: DrawingBackend + 'a,
    CT: CoordTranslate,
{
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

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
    let latency: [Line<HttpRow>; 4] = [
        ("bare ORT", BLACK, |r| {
            (r.concurrency <= 1).then_some(r.bare.1)
        }),
        ("in-process", BLUE, |r| Some(r.in_process.1)),
        ("HTTP JSON", RED, |r| Some(r.json.1)),
        ("HTTP binary", GREEN, |r| Some(r.binary.1)),
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

/// Requests/s of each setting per repeat (x: the repeat), one line per `(label, values)` of
/// `series`: how the experiments that compare settings on one server over repeats draw them.
///
/// # Errors
/// When the image cannot be drawn or written (no usable font, say).
pub fn plot_per_repeat(title: &str, series: &[(String, Vec<f64>)], path: &Path) -> Result<()> {
    let root = BitMapBackend::new(path, (640, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let top = series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .fold(1.0, f64::max)
        * 1.25;
    let repeats = series
        .iter()
        .map(|(_, v)| v.len())
        .max()
        .unwrap_or(0)
        .max(1);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(14)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d(0.5f64..repeats as f64 + 0.5, 0.0..top)
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_desc("repeat")
        .y_desc("requests/s")
        .x_labels(repeats)
        .x_label_formatter(&|x| format!("{}", x.round() as u64))
        .light_line_style(WHITE)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    for (i, (label, values)) in series.iter().enumerate() {
        let points: Vec<(f64, f64)> = values
            .iter()
            .enumerate()
            .map(|(r, &v)| (r as f64 + 1.0, v))
            .collect();
        let color = PALETTE[i % PALETTE.len()];
        draw_line_with_points(&mut chart, points, color, label.clone())?;
    }
    draw_legend(&mut chart)?;
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
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

/// ParM tail latency: latency (ms, log scale) at p50, p99, p99.9 and max, one line per set-up
/// (baseline, equal resources, ParM).
///
/// # Errors
/// When the image cannot be drawn or written (no usable font, say).
pub fn plot_parm(rows: &[crate::parm::squeezenet::ParmRow], path: &Path) -> Result<()> {
    let lines: Vec<(String, [f64; 4])> = rows
        .iter()
        .map(|r| (r.setup.clone(), r.latency_ms))
        .collect();
    plot_latency_panels(
        &[("ParM: latency with a hiccuping replica".to_string(), lines)],
        (720, 480),
        path,
    )
}

/// ParM against equal resources on the digits MLP: one panel without the straggler, one with
/// it; in each, latency (ms, log scale) at p50, p99, p99.9 and max, one line per set-up (the
/// medians over repeats).
///
/// # Errors
/// When the image cannot be drawn or written (no usable font, say).
pub fn plot_parm_decode(rows: &[crate::parm::decode::DecodeRow], path: &Path) -> Result<()> {
    let panel = |straggler: bool, title: &str| {
        let lines = rows
            .iter()
            .filter(|r| r.straggler == straggler)
            .map(|r| (r.arm.name(), r.latency_ms()))
            .collect::<Vec<_>>();
        (title.to_string(), lines)
    };
    plot_latency_panels(
        &[panel(false, "no straggler"), panel(true, "straggler on e0")],
        (1200, 480),
        path,
    )
}

/// A panel's title and its lines: set-up name, latency at p50, p99, p99.9 and max (ms).
type LatencyPanel = (String, Vec<(String, [f64; 4])>);

/// Panels side by side, one y scale for all: latency (ms, log) at p50, p99, p99.9 and max, one
/// line per named set-up.
fn plot_latency_panels(panels: &[LatencyPanel], size: (u32, u32), path: &Path) -> Result<()> {
    let root = BitMapBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let all = || {
        panels
            .iter()
            .flat_map(|(_, lines)| lines.iter().flat_map(|l| l.1))
    };
    let top = all().fold(1.0, f64::max) * 1.5;
    let bottom = all().fold(f64::INFINITY, f64::min).max(0.1) / 1.5;
    let labels = ["p50", "p99", "p99.9", "max"];
    let areas = root.split_evenly((1, panels.len().max(1)));
    for ((title, lines), area) in panels.iter().zip(areas.iter()) {
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 20))
            .margin(14)
            .x_label_area_size(36)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.2f64..3.2f64, (bottom..top).log_scale())
            .map_err(|e| anyhow!("{e}"))?;
        chart
            .configure_mesh()
            .x_labels(4)
            .x_label_formatter(&|x| {
                labels
                    .get(x.round().max(0.0) as usize)
                    .copied()
                    .unwrap_or("")
                    .to_string()
            })
            .y_desc("latency, ms (log)")
            .light_line_style(WHITE)
            .draw()
            .map_err(|e| anyhow!("{e}"))?;
        let colors = [BLACK, BLUE, RED, GREEN, MAGENTA];
        for ((name, latency), color) in lines.iter().zip(colors.iter().cycle()) {
            let points: Vec<(f64, f64)> = latency
                .iter()
                .enumerate()
                .map(|(i, v)| (i as f64, v.max(bottom)))
                .collect();
            draw_line_with_points(&mut chart, points, *color, name.clone())?;
        }
        draw_legend(&mut chart)?;
    }
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

/// ParM's encoder (per group) and decoder (per reconstruction) cost against k, in µs.
///
/// # Errors
/// When the image cannot be drawn or written.
pub fn plot_coding_cost(costs: &[(usize, f64, f64)], path: &Path) -> Result<()> {
    let root = BitMapBackend::new(path, (640, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let top = costs.iter().map(|c| c.1.max(c.2)).fold(1.0, f64::max) * 1.2;
    let mut chart = ChartBuilder::on(&root)
        .caption("ParM coding cost", ("sans-serif", 20))
        .margin(14)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(1.8f64..4.2f64, 0.0..top)
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_desc("k (queries per coding group)")
        .y_desc("µs")
        .x_labels(3)
        .x_label_formatter(&|x| format!("{}", x.round() as u64))
        .light_line_style(WHITE)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    type Pick = fn(&(usize, f64, f64)) -> f64;
    let series: [(&str, RGBColor, Pick); 2] = [
        ("encode, per group", BLUE, |c| c.1),
        ("decode, per reconstruction", RED, |c| c.2),
    ];
    for (name, color, pick) in series {
        let points: Vec<(f64, f64)> = costs.iter().map(|c| (c.0 as f64, pick(c))).collect();
        draw_line_with_points(&mut chart, points, color, name.to_string())?;
    }
    draw_legend(&mut chart)?;
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

/// HAMS's normal-case p50 overhead over no replication against the batch size (log₂ axis), one
/// line per protocol. `rows` are (batch, protocol, overhead %).
///
/// # Errors
/// When the image cannot be drawn or written.
pub fn plot_hams_batch_sweep(rows: &[(usize, &str, f64)], title: &str, path: &Path) -> Result<()> {
    let root = BitMapBackend::new(path, (640, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let top = rows.iter().map(|r| r.2).fold(10.0, f64::max) * 1.15;
    let bottom = rows.iter().map(|r| r.2).fold(0.0, f64::min).min(0.0) * 1.15;
    let max_batch = rows.iter().map(|r| r.0).max().unwrap_or(1).max(2) as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(14)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(-0.3f64..max_batch.log2() + 0.3, bottom..top)
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_desc("rows per batch (log2)")
        .y_desc("p50 overhead vs no backup (%)")
        .x_label_formatter(&|x| format!("{}", 2f64.powf(x.round()) as u64))
        .light_line_style(WHITE)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    for (name, color) in [("nspb", BLUE), ("remus", RED), ("checkpoint", GREEN)] {
        let points: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.1 == name)
            .map(|r| ((r.0 as f64).log2(), r.2))
            .collect();
        if !points.is_empty() {
            draw_line_with_points(&mut chart, points, color, name.to_string())?;
        }
    }
    draw_legend(&mut chart)?;
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

/// Released rows a checkpoint replay contradicts against the checkpoint interval. `points`
/// are (interval, median rows differing bitwise, at 8 bits, by label).
///
/// # Errors
/// When the image cannot be drawn or written.
pub fn plot_hams_divergence(points: &[(u64, f64, f64, f64)], path: &Path) -> Result<()> {
    let x = |p: &(u64, f64, f64, f64)| p.0 as f64;
    let series = vec![
        (
            "differ bitwise",
            BLUE,
            points.iter().map(|p| (x(p), p.1)).collect(),
        ),
        (
            "differ at 8 bits",
            RED,
            points.iter().map(|p| (x(p), p.2)).collect(),
        ),
        (
            "label flipped",
            GREEN,
            points.iter().map(|p| (x(p), p.3)).collect(),
        ),
    ];
    line_plot(
        path,
        "Checkpoint replay: released outputs contradicted",
        (
            "checkpoint every N batches",
            "released rows per failover (median)",
        ),
        series,
    )
}

/// HAMS lineage cost per batch (µs) against the number of hops on the request path.
///
/// # Errors
/// When the image cannot be drawn or written.
pub fn plot_lineage_cost(points: &[(usize, f64, f64)], path: &Path) -> Result<()> {
    let line = points.iter().map(|p| (p.0 as f64, p.1)).collect();
    line_plot(
        path,
        "HAMS lineage per batch of 64 rows",
        ("hops on the request's path", "µs per batch"),
        vec![("append one hop + dependency scan", BLUE, line)],
    )
}

/// One line of a [`line_plot`]: its legend, colour and points.
type Series<'a> = (&'a str, RGBColor, Vec<(f64, f64)>);

/// A 640 × 420 chart of lines with points, both axes from zero, legend at the top left.
pub(crate) fn line_plot(
    path: &Path,
    caption: &str,
    (x_desc, y_desc): (&str, &str),
    series: Vec<Series<'_>>,
) -> Result<()> {
    let root = BitMapBackend::new(path, (640, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let all = || series.iter().flat_map(|s| s.2.iter());
    let top = all().map(|p| p.1).fold(1.0, f64::max) * 1.2;
    let right = all().map(|p| p.0).fold(1.0, f64::max) * 1.05 + 1.0;
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 20))
        .margin(14)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0f64..right, 0.0..top)
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .light_line_style(WHITE)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    for (name, color, line) in series {
        draw_line_with_points(&mut chart, line, color, name.to_string())?;
    }
    draw_legend(&mut chart)?;
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

#[cfg(test)]
mod tests {
    use super::log_ticks;

    #[test]
    fn a_log_axis_within_one_decade_still_gets_numbers() {
        let close = |a: &[f64], b: &[f64]| {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9)
        };
        let ticks = log_ticks(3.5, 12.5);
        assert!(
            close(&ticks, &[4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]),
            "{ticks:?}"
        );
        // Over several decades only 1, 2 and 5 of each.
        let ticks = log_ticks(0.9, 1100.0);
        assert!(
            close(
                &ticks,
                &[1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0]
            ),
            "{ticks:?}"
        );
        assert!(log_ticks(0.0, 5.0).is_empty());
        assert!(log_ticks(5.0, 5.0).is_empty());
    }
}
