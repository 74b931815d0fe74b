//! PNG plots of benchmark sweeps (plotters, bitmap backend; fonts come from the system's
//! fontconfig, loaded at run time).
//!
//! This module holds what every figure shares: the palette, log-axis ticks, lines with points,
//! the legend, a plain line chart and latency-percentile panels. The figures themselves are
//! grouped by what they show: `serving` (the protocol and pipeline sweeps), `mechanisms` (ParM's
//! and HAMS's experiments).

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::coord::CoordTranslate;
use plotters::prelude::*;

mod mechanisms;
mod serving;

pub use mechanisms::{
    plot_coding_cost, plot_hams_batch_sweep, plot_hams_divergence, plot_lineage_cost, plot_parm,
    plot_parm_decode,
};
pub use serving::{
    plot_batch_growth, plot_grpc, plot_http, plot_perf_analyzer, plot_pipeline, plot_remote,
    plot_variable_length,
};

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
