//! The tracing experiment's figure: per client concurrency, each setting's throughput and p50
//! latency over tracing off's (medians of the per-repeat ratios), the settings along the x axis.

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;

use super::{ratios, TracingRow};
use crate::overhead::median;
use crate::plot::{draw_legend, draw_line_with_points, PALETTE};
use crate::tls::Measured;

/// Two panels, req/s over off and p50 over off, one line per client concurrency.
///
/// # Errors
/// When the image cannot be drawn or written (no usable font, say).
pub fn plot_tracing(rows: &[TracingRow], path: &Path) -> Result<()> {
    let root = BitMapBackend::new(path, (1000, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let panels = root.split_evenly((1, 2));
    let labels: Vec<String> = rows
        .first()
        .map(|r| r.columns.iter().map(|c| c.setting.label()).collect())
        .unwrap_or_default();
    type Pick = fn(&Measured) -> f64;
    let figures: [(&str, Pick); 2] = [
        ("throughput over tracing off", |m| m.0),
        ("p50 latency over tracing off", |m| m.1),
    ];
    let n = labels.len().max(1) as f64;
    for (area, (title, pick)) in panels.iter().zip(figures) {
        let series: Vec<(usize, Vec<(f64, f64)>)> = rows
            .iter()
            .map(|row| {
                let points = row
                    .columns
                    .iter()
                    .enumerate()
                    .map(|(i, col)| (i as f64, median(ratios(row, col, pick))))
                    .collect();
                (row.concurrency, points)
            })
            .collect();
        let (low, high) = series
            .iter()
            .flat_map(|(_, p)| p.iter().map(|(_, y)| *y))
            .fold((1.0f64, 1.0f64), |(lo, hi), y| (lo.min(y), hi.max(y)));
        let pad = ((high - low) * 0.25).max(0.05);
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(-0.5..n - 0.5, (low - pad)..(high + pad))
            .map_err(|e| anyhow!("{e}"))?;
        chart
            .configure_mesh()
            .x_desc("tracing (sampling ratio)")
            .x_labels(labels.len().max(1))
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 1e-6 && i >= 0.0 {
                    labels.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .light_line_style(WHITE)
            .draw()
            .map_err(|e| anyhow!("{e}"))?;
        for (k, (concurrency, points)) in series.into_iter().enumerate() {
            let color = PALETTE[k % PALETTE.len()];
            let name = format!(
                "{concurrency} client{}",
                if concurrency == 1 { "" } else { "s" }
            );
            draw_line_with_points(&mut chart, points, color, name)?;
        }
        draw_legend(&mut chart)?;
    }
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}
