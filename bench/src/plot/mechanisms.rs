//! The mechanisms' figures: ParM's tail latency and coding cost, HAMS's batch sweep, divergence
//! and lineage cost.

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;

use super::{draw_legend, draw_line_with_points, line_plot, plot_latency_panels};

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
