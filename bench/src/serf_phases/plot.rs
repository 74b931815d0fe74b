//! The comparison's figure: mean latency over time per set-up, phase boundaries marked.

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;

use super::runs::PhasesRun;
use crate::plot::PALETTE;

/// The palette's first five colours with the first two swapped: SERF, first, in red.
const COLORS: [RGBColor; 5] = [PALETTE[1], PALETTE[0], PALETTE[2], PALETTE[3], PALETTE[4]];

/// Mean latency per time bin against send time, one line per set-up (SERF thick), phase
/// boundaries as vertical lines.
///
/// # Errors
/// When the image cannot be drawn or written.
pub fn plot_phases(run: &PhasesRun, bin_seconds: f64, path: &Path) -> Result<()> {
    let e = |e: &dyn std::fmt::Display| anyhow!("{e}");
    let end = run.phases.last().map_or(1.0, |p| p.2);
    let bins = (end / bin_seconds).ceil().max(1.0) as usize;
    let series: Vec<(String, Vec<(f64, f64)>)> = run
        .setups
        .iter()
        .map(|s| {
            let points = (0..bins)
                .filter_map(|b| {
                    let (from, to) = (b as f64 * bin_seconds, (b + 1) as f64 * bin_seconds);
                    let m = s.mean_between(from, to);
                    m.is_finite().then_some(((from + to) / 2.0, m))
                })
                .collect();
            (s.setup.to_string(), points)
        })
        .collect();
    // Logarithmic: a fixed configuration that collapses under moderate load queues to seconds,
    // and on a linear axis SERF and the configuration it tracks would be one flat line.
    let ys = || series.iter().flat_map(|(_, p)| p.iter().map(|(_, y)| *y));
    let top = ys().fold(1.0, f64::max) * 1.2;
    let bottom = ys().filter(|y| *y > 0.0).fold(top, f64::min) * 0.8;
    let root = BitMapBackend::new(path, (1000, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "{}: mean latency per {bin_seconds:.0} s, moderate → low → moderate load",
                run.profile.label.as_deref().unwrap_or("model")
            ),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(
            0.0..end,
            (bottom..top)
                .log_scale()
                .with_key_points(crate::plot::log_ticks(bottom, top)),
        )
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc("mean latency (ms, log scale)")
        .y_label_formatter(&|v| format!("{}", (v * 1000.0).round() / 1000.0))
        .light_line_style(WHITE)
        .draw()
        .map_err(|x| e(&x))?;
    for (_, a, _) in run.phases.iter().skip(1) {
        chart
            .draw_series(LineSeries::new(
                vec![(*a, bottom), (*a, top)],
                BLACK.mix(0.4).stroke_width(1),
            ))
            .map_err(|x| e(&x))?;
    }
    for (i, (label, points)) in series.into_iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let width = if i == 0 { 3 } else { 1 };
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(width)))
            .map_err(|x| e(&x))?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(width))
            });
    }
    crate::plot::draw_legend(&mut chart)?;
    root.present().map_err(|x| e(&x))?;
    Ok(())
}
