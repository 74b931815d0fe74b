//! The experiment's figures: per pattern, the paper's Figure 6 panels over time (served
//! throughput against the offered load, SLO violations per window, cost per second, instances
//! held); per sweep,
//! violations and cost against the knob.

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;

use super::drive::Sample;
use super::report::{windows, Summary, THROUGHPUT_WINDOW_S, VIOLATION_WINDOW_S};
use super::{Run, System};
use crate::plot::{draw_labelled_line, draw_legend};

const COLOURS: [RGBColor; 5] = [
    RGBColor(200, 30, 30),
    RGBColor(30, 90, 200),
    RGBColor(30, 150, 60),
    RGBColor(140, 60, 170),
    RGBColor(220, 130, 20),
];

fn colour(system: System) -> RGBColor {
    let i = System::ALL.iter().position(|s| *s == system).unwrap_or(0);
    COLOURS[i % COLOURS.len()]
}

/// Answered requests per window of `width` s, by completion time.
fn served(run: &Run, width: f64) -> Vec<(f64, f64)> {
    let n = (run.pattern.seconds() / width).ceil().max(1.0) as usize;
    let mut counts = vec![0usize; n];
    for o in run.recorded.outcomes.iter().filter(|o| o.ok) {
        let done = o.at_s + o.latency_ms / 1e3;
        if let Some(c) = counts.get_mut((done / width) as usize) {
            *c += 1;
        }
    }
    counts
        .into_iter()
        .enumerate()
        .map(|(i, c)| ((i as f64 + 0.5) * width, c as f64 / width))
        .collect()
}

/// One sampled quantity over time: `read` of the front end's samples when the system
/// autoscales, or `fixed` throughout for a fixed pool (which runs no autoscaler to sample).
fn over_time(run: &Run, read: fn(&Sample) -> f64, fixed: f64) -> Vec<(f64, f64)> {
    match run.system.fixed_instances() {
        0 => run
            .recorded
            .samples
            .iter()
            .map(|s| (s.at_s, read(s)))
            .collect(),
        _ => vec![(0.0, fixed), (run.pattern.seconds(), fixed)],
    }
}

/// Price per second over time.
fn cost_rate(run: &Run) -> Vec<(f64, f64)> {
    over_time(run, |s| s.cost_per_s, run.cost / run.pattern.seconds())
}

/// Instances serving over time.
fn instances(run: &Run) -> Vec<(f64, f64)> {
    over_time(run, |s| s.instances, run.system.fixed_instances() as f64)
}

/// A quantity of a run over time.
type OverTime = fn(&Run) -> Vec<(f64, f64)>;

/// Each system's points over time.
type Lines = [(System, Vec<(f64, f64)>)];

/// One panel of per-system lines over `seconds`, titled `caption`, its y axis from 0 to just
/// above the highest value.
fn step_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    caption: &str,
    y_desc: &str,
    x_desc: Option<&str>,
    (seconds, series): (f64, &Lines),
) -> Result<()> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("{e}");
    let top = series
        .iter()
        .flat_map(|(_, s)| s.iter().map(|p| p.1))
        .fold(1.0, f64::max)
        * 1.15;
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(if x_desc.is_some() { 36 } else { 30 })
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..seconds, 0.0..top)
        .map_err(e)?;
    let mut mesh = chart.configure_mesh();
    mesh.y_desc(y_desc);
    if let Some(x) = x_desc {
        mesh.x_desc(x);
    }
    mesh.draw().map_err(e)?;
    for (system, points) in series {
        let c = colour(*system);
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                ShapeStyle::from(c).stroke_width(2),
            ))
            .map_err(e)?;
    }
    Ok(())
}

/// The four panels of one pattern's runs.
///
/// # Errors
/// When the image cannot be drawn or written.
pub fn plot_pattern(
    runs: &[Run],
    rate: &dyn Fn(f64) -> f64,
    slo_ms: f64,
    path: &Path,
) -> Result<()> {
    let Some(first) = runs.first() else {
        return Ok(());
    };
    let seconds = first.pattern.seconds();
    let root = BitMapBackend::new(path, (1000, 1150)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let panels = root.split_evenly((4, 1));
    let e = |e: DrawingAreaErrorKind<_>| anyhow!("{e}");

    // Throughput against the offered load.
    let series: Vec<(System, Vec<(f64, f64)>)> = runs
        .iter()
        .map(|r| (r.system, served(r, THROUGHPUT_WINDOW_S)))
        .collect();
    let offered: Vec<(f64, f64)> = (0..=400)
        .map(|i| {
            let t = seconds * f64::from(i) / 400.0;
            (t, rate(t))
        })
        .collect();
    let top = series
        .iter()
        .flat_map(|(_, s)| s.iter().map(|p| p.1))
        .chain(offered.iter().map(|p| p.1))
        .fold(1.0, f64::max)
        * 1.15;
    let mut chart = ChartBuilder::on(&panels[0])
        .caption(
            format!(
                "{}: served throughput per {THROUGHPUT_WINDOW_S} s",
                first.pattern.name()
            ),
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..seconds, 0.0..top)
        .map_err(e)?;
    chart
        .configure_mesh()
        .y_desc("queries/s")
        .draw()
        .map_err(e)?;
    let thin = ShapeStyle::from(BLACK).stroke_width(1);
    draw_labelled_line(&mut chart, offered, thin, "offered")?;
    for (system, points) in series {
        let style = ShapeStyle::from(colour(system)).stroke_width(2);
        draw_labelled_line(&mut chart, points, style, system.name())?;
    }
    draw_legend(&mut chart)?;

    // SLO violations per window.
    let mut chart = ChartBuilder::on(&panels[1])
        .caption(
            format!("SLO ({slo_ms} ms) violations per {VIOLATION_WINDOW_S} s window"),
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..seconds, 0.0..105.0)
        .map_err(e)?;
    chart
        .configure_mesh()
        .y_desc("% of queries")
        .draw()
        .map_err(e)?;
    for run in runs {
        let points: Vec<(f64, f64)> = windows(run, slo_ms, VIOLATION_WINDOW_S)
            .into_iter()
            .enumerate()
            .map(|(i, (v, n))| {
                let share = if n == 0 {
                    0.0
                } else {
                    100.0 * v as f64 / n as f64
                };
                ((i as f64 + 0.5) * VIOLATION_WINDOW_S, share)
            })
            .collect();
        let c = colour(run.system);
        chart
            .draw_series(LineSeries::new(points, ShapeStyle::from(c).stroke_width(2)))
            .map_err(e)?;
    }

    // What each system held: the price per second, and the instances.
    let held: [(&str, &str, OverTime); 2] = [
        (
            "price of the instances held, per second",
            "cost / s",
            cost_rate,
        ),
        (
            "instances serving (Active, Overloaded or Interfered)",
            "instances",
            instances,
        ),
    ];
    for (k, (caption, y_desc, read)) in held.into_iter().enumerate() {
        let series: Vec<(System, Vec<(f64, f64)>)> =
            runs.iter().map(|r| (r.system, read(r))).collect();
        let last = k + 1 == held.len();
        let x_desc = last.then_some("seconds into the run");
        step_panel(&panels[2 + k], caption, y_desc, x_desc, (seconds, &series))?;
    }
    root.present().map_err(e)?;
    Ok(())
}

/// A sweep: violations and cost against one knob's values.
///
/// # Errors
/// When the image cannot be drawn or written.
pub fn plot_sweep(knob: &str, rows: &[(f64, Summary)], path: &Path) -> Result<()> {
    let root = BitMapBackend::new(path, (900, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let e = |e: DrawingAreaErrorKind<_>| anyhow!("{e}");
    let panels = root.split_evenly((2, 1));
    let left = rows.iter().map(|r| r.0).fold(f64::INFINITY, f64::min);
    let right = rows.iter().map(|r| r.0).fold(f64::NEG_INFINITY, f64::max);
    let pad = ((right - left) * 0.05).max(1e-3);
    let x = (left - pad)..(right + pad);
    for (panel, (title, value)) in panels.iter().zip([
        (
            "SLO violations, % of queries",
            (|s: &Summary| 100.0 * s.violations) as fn(&Summary) -> f64,
        ),
        ("cost over the run", |s: &Summary| s.cost),
    ]) {
        let points: Vec<(f64, f64)> = rows.iter().map(|(k, s)| (*k, value(s))).collect();
        let top = points.iter().map(|p| p.1).fold(1e-9, f64::max) * 1.2;
        let mut chart = ChartBuilder::on(panel)
            .caption(
                format!("INFaaS, fluctuating load: {title} by {knob}"),
                ("sans-serif", 18),
            )
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(x.clone(), 0.0..top)
            .map_err(e)?;
        chart.configure_mesh().x_desc(knob).draw().map_err(e)?;
        chart
            .draw_series(LineSeries::new(
                points.clone(),
                ShapeStyle::from(BLUE).stroke_width(2),
            ))
            .map_err(e)?;
        chart
            .draw_series(points.into_iter().map(|p| Circle::new(p, 4, BLUE.filled())))
            .map_err(e)?;
    }
    root.present().map_err(e)?;
    Ok(())
}
