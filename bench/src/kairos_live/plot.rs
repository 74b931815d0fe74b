//! The experiment's figure: median p99 against offered rate per set-up, the target as a line.

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;

use super::results::{SetupResult, Trial};
use super::setup::Policy;
use super::KairosLiveConfig;

/// Median p99 over the trials against offered rate per set-up (the bars span the trials), with
/// the QoS target as a line; the heterogeneous pool solid, homogeneous pools thinner.
///
/// # Errors
/// When the image cannot be drawn or written.
pub fn plot_kairos_live(
    config: &KairosLiveConfig,
    results: &[SetupResult],
    path: &Path,
) -> Result<()> {
    let root = BitMapBackend::new(path, (1000, 620)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let top = config.qos_ms * 3.0;
    let cap = |v: f64| v.min(top);
    let right = results
        .iter()
        .flat_map(|r| r.points.iter().map(|p| p.rate))
        .fold(1.0, f64::max)
        * 1.05;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Kairos live: median p99 over {} trials vs offered load (budget ${}/h)",
                config.trials, config.budget_per_hour
            ),
            ("sans-serif", 20),
        )
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..right, 0.0..top)
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_desc("offered rate, queries/s (Poisson; 10..1000 rows each)")
        .y_desc("p99 latency, ms (capped at 3× QoS)")
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .draw_series(LineSeries::new(
            vec![(0.0, config.qos_ms), (right, config.qos_ms)],
            ShapeStyle::from(BLACK).stroke_width(1),
        ))
        .map_err(|e| anyhow!("{e}"))?
        .label(format!("p99 target {} ms", config.qos_ms))
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK));
    let pool_colors = [
        RED,
        BLUE,
        RGBColor(0, 150, 0),
        RGBColor(255, 140, 0),
        MAGENTA,
        CYAN,
    ];
    let mut pools: Vec<&Vec<usize>> = Vec::new();
    for r in results {
        if !pools.contains(&&r.setup.pool) {
            pools.push(&r.setup.pool);
        }
    }
    for r in results {
        let pi = pools.iter().position(|p| **p == r.setup.pool).unwrap_or(0);
        let color = pool_colors[pi % pool_colors.len()];
        let width = if r.setup.homogeneous() { 1 } else { 3 };
        let style = ShapeStyle::from(color).stroke_width(width);
        let pts: Vec<(f64, f64)> = r
            .points
            .iter()
            .map(|p| (p.rate, cap(p.median_p99())))
            .collect();
        let label = format!(
            "{} (max {:.1}/s, goodput {:.1}/s)",
            r.setup.label(),
            r.max_rate,
            r.median_goodput()
        );
        // Policy by marker: Kairos circles (filled when it batches), least outstanding
        // triangles, round robin crosses.
        match r.setup.policy {
            Policy::Kairos | Policy::KairosOnePerCall => {
                let marker = if r.setup.policy == Policy::Kairos {
                    style.filled()
                } else {
                    style
                };
                chart
                    .draw_series(LineSeries::new(pts.clone(), style))
                    .map_err(|e| anyhow!("{e}"))?
                    .label(label)
                    .legend(move |(x, y)| Circle::new((x + 9, y), 4, marker));
                chart
                    .draw_series(pts.iter().map(|&p| Circle::new(p, 4, marker)))
                    .map_err(|e| anyhow!("{e}"))?;
            }
            Policy::LeastOutstanding => {
                chart
                    .draw_series(DashedLineSeries::new(pts.clone(), 8, 4, style))
                    .map_err(|e| anyhow!("{e}"))?
                    .label(label)
                    .legend(move |(x, y)| TriangleMarker::new((x + 9, y), 5, style.filled()));
                chart
                    .draw_series(
                        pts.iter()
                            .map(|&p| TriangleMarker::new(p, 5, style.filled())),
                    )
                    .map_err(|e| anyhow!("{e}"))?;
            }
            Policy::RoundRobin => {
                chart
                    .draw_series(DashedLineSeries::new(pts.clone(), 2, 4, style))
                    .map_err(|e| anyhow!("{e}"))?
                    .label(label)
                    .legend(move |(x, y)| Cross::new((x + 9, y), 4, style));
                chart
                    .draw_series(pts.iter().map(|&p| Cross::new(p, 4, style)))
                    .map_err(|e| anyhow!("{e}"))?;
            }
        }
        // The trials' range at each rate.
        chart
            .draw_series(r.points.iter().map(|p| {
                let lo = p
                    .trials
                    .iter()
                    .map(Trial::judged_p99)
                    .fold(f64::INFINITY, f64::min);
                let hi = p
                    .trials
                    .iter()
                    .map(Trial::judged_p99)
                    .fold(f64::NEG_INFINITY, f64::max);
                PathElement::new(
                    vec![(p.rate, cap(lo)), (p.rate, cap(hi))],
                    ShapeStyle::from(color.mix(0.4)).stroke_width(1),
                )
            }))
            .map_err(|e| anyhow!("{e}"))?;
    }
    crate::plot::draw_legend(&mut chart)?;
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}
