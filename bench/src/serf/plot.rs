//! The experiment's figure: predicted against measured mean latency per configuration and load.

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;
use weir_serf::config::Config;

use super::{SerfModelResult, SerfPoint};
use crate::plot::PALETTE;

/// Predicted (line) and measured (dots) mean latency against load, one colour per configuration,
/// one panel per model.
///
/// # Errors
/// When the image cannot be drawn or written.
pub fn plot_serf(results: &[SerfModelResult], path: &Path) -> Result<()> {
    let e = |e: &dyn std::fmt::Display| anyhow!("{e}");
    let root =
        BitMapBackend::new(path, (640 * results.len().max(1) as u32, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let panels = root.split_evenly((1, results.len().max(1)));
    for (r, area) in results.iter().zip(&panels) {
        let right = r.points.iter().map(|p| p.lambda).fold(1.0, f64::max) * 1.05;
        let top = r
            .points
            .iter()
            .map(|p| p.predicted_ms.max(p.measured_ms))
            .fold(1.0, f64::max)
            * 1.1;
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("{}: mean latency, SERF prediction vs measured", r.model),
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..right, 0.0..top)
            .map_err(|x| e(&x))?;
        chart
            .configure_mesh()
            .x_desc("arrival rate λ (requests/s)")
            .y_desc("ms")
            .light_line_style(WHITE)
            .draw()
            .map_err(|x| e(&x))?;
        let mut configs: Vec<Config> = r.points.iter().map(|p| p.config).collect();
        configs.dedup();
        for (i, config) in configs.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let mine: Vec<&SerfPoint> = r.points.iter().filter(|p| p.config == *config).collect();
            chart
                .draw_series(LineSeries::new(
                    mine.iter().map(|p| (p.lambda, p.predicted_ms)),
                    color.stroke_width(2),
                ))
                .map_err(|x| e(&x))?
                .label(format!("{config}: predicted (line), measured (dots)"))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                });
            chart
                .draw_series(
                    mine.iter()
                        .map(|p| Circle::new((p.lambda, p.measured_ms), 4, color.filled())),
                )
                .map_err(|x| e(&x))?;
        }
        crate::plot::draw_legend(&mut chart)?;
    }
    root.present().map_err(|x| e(&x))?;
    Ok(())
}
