//! The variant profiles of model-less serving ("INFaaS: Automated Model-less Inference Serving",
//! §3.3, Table 2): the variants of one task differ in latency and accuracy, so choosing among
//! them is worth it.
//!
//! Registers one task's architectures (the digits MLPs, or the `text_orientation` image models)
//! into a temporary repository with `weir model register`'s own code (real ONNX Runtime, int8 by
//! ONNX Runtime's `quantize_dynamic`), then reads the profiles back: per architecture, int8
//! against fp32 latency at batch 1 and 32 and accuracy (the ratio int8/fp32 is the same-run
//! reference), and latency by batch for each variant family (architecture × precision, dynamic
//! batch, graph level `all`, one intra-op thread).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};
use plotters::prelude::*;
use weir::cli::model::{register, RegisterArgs, RepositoryArg};
use weir_infaas::repository::Repository;
use weir_infaas::variant::{GraphLevel, Precision, Variant};

use crate::plot::{draw_legend, draw_line_with_points};

/// What to register and how long to time each batch size.
#[derive(Debug, Clone)]
pub struct InfaasProfilesConfig {
    /// The task the architectures are registered under.
    pub task: String,
    /// (name, ONNX file) of each architecture of the task.
    pub models: Vec<(String, PathBuf)>,
    /// The validation set.
    pub validation: PathBuf,
    /// Timed calls per batch size (the median is kept).
    pub runs: usize,
}

/// One architecture's row.
#[derive(Debug, Clone)]
pub struct ArchRow {
    /// The architecture.
    pub model: String,
    /// fp32 and int8 (dynamic batch, level all, 1 thread): latency at batch 1 and 32 (ms), and
    /// accuracy.
    pub fp32: (f64, f64, f64),
    /// As `fp32`, for int8.
    pub int8: (f64, f64, f64),
    /// fp32 with the batch fixed to 1 and to 32: latency at its batch (ms).
    pub fixed: (f64, f64),
    /// Latency by batch for each family: (family label, [(batch, ms)]).
    pub curves: Vec<(String, Vec<(u32, f64)>)>,
}

fn pick<'a>(
    repo: &'a Repository,
    model: &str,
    precision: Precision,
    fixed: Option<u32>,
) -> Result<&'a Variant> {
    repo.variants()
        .find(|v| {
            v.model == model
                && v.config.precision == precision
                && v.config.fixed_batch == fixed
                && v.config.graph_level == GraphLevel::All
                && v.config.intra_threads == 1
        })
        .ok_or_else(|| anyhow!("{model}: no {precision:?} variant with batch {fixed:?}"))
}

fn at(v: &Variant, b: u32) -> f64 {
    v.profile.inference_ms(b).unwrap_or(f64::NAN)
}

/// Registers `models` as task `task` into `repository` (one thread, level `all`, the dynamic
/// batch and `batches`; int8 when asked), timing `runs` calls per batch size.
///
/// # Errors
/// When a registration fails.
pub fn register_task(
    task: &str,
    models: &[(String, PathBuf)],
    validation: &Path,
    repository: &Path,
    int8: bool,
    batches: Vec<u32>,
    runs: usize,
) -> Result<()> {
    for (name, onnx) in models {
        register(&RegisterArgs {
            name: name.clone(),
            task: task.to_string(),
            onnx: onnx.clone(),
            validation: validation.to_path_buf(),
            repository: RepositoryArg {
                repository: repository.to_path_buf(),
            },
            hardware: None,
            int8: None,
            no_int8: !int8,
            threads: vec![1],
            levels: vec!["all".into()],
            batches: batches.clone(),
            runs,
        })?;
    }
    Ok(())
}

/// Registers every model and reads back one row per architecture.
///
/// # Errors
/// When a registration fails.
pub fn infaas_profiles(config: &InfaasProfilesConfig, repository: &Path) -> Result<Vec<ArchRow>> {
    register_task(
        &config.task,
        &config.models,
        &config.validation,
        repository,
        true,
        vec![1, 32],
        config.runs,
    )?;
    let repo = Repository::open(repository)?;
    let mut rows = Vec::new();
    for (name, _) in &config.models {
        let fp32 = pick(&repo, name, Precision::Fp32, None)?;
        let int8 = pick(&repo, name, Precision::Int8, None)?;
        let curve = |v: &Variant| {
            v.profile
                .latency_ms
                .iter()
                .map(|(b, ms)| (*b, *ms))
                .collect()
        };
        rows.push(ArchRow {
            model: name.clone(),
            fp32: (at(fp32, 1), at(fp32, 32), fp32.accuracy),
            int8: (at(int8, 1), at(int8, 32), int8.accuracy),
            fixed: (
                at(pick(&repo, name, Precision::Fp32, Some(1))?, 1),
                at(pick(&repo, name, Precision::Fp32, Some(32))?, 32),
            ),
            curves: vec![
                (format!("{name} fp32"), curve(fp32)),
                (format!("{name} int8"), curve(int8)),
            ],
        });
    }
    Ok(rows)
}

/// The markdown table of `rows`.
pub fn infaas_profiles_table(rows: &[ArchRow]) -> String {
    let mut out = String::from(
        "| architecture | fp32 acc | int8 acc | fp32 b1 ms | int8 b1 ms | int8/fp32 b1 | fp32 b32 ms | int8 b32 ms | int8/fp32 b32 | fixed-b1 ms | fixed-b32 ms |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for r in rows {
        let _ = writeln!(
            out,
            "| {} | {:.4} | {:.4} | {:.4} | {:.4} | {:.2} | {:.4} | {:.4} | {:.2} | {:.4} | {:.4} |",
            r.model,
            r.fp32.2,
            r.int8.2,
            r.fp32.0,
            r.int8.0,
            r.int8.0 / r.fp32.0,
            r.fp32.1,
            r.int8.1,
            r.int8.1 / r.fp32.1,
            r.fixed.0,
            r.fixed.1
        );
    }
    out
}

/// A latency tick label: two significant digits, trailing zeros dropped (0.0031, 0.02, 40).
fn ms_label(v: f64) -> String {
    if !(v.is_finite() && v > 0.0) {
        return format!("{v}");
    }
    let decimals = (1.0 - v.log10().floor()).max(0.0) as usize;
    let label = format!("{v:.decimals$}");
    if label.contains('.') {
        label
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    } else {
        label
    }
}

/// Latency against batch size (log₂ axis), one line per variant family, on a logarithmic latency
/// axis: the image task's architectures are three decades apart.
///
/// # Errors
/// When the image cannot be drawn or written.
pub fn plot_infaas_profiles(task: &str, rows: &[ArchRow], path: &Path) -> Result<()> {
    let curves: Vec<&(String, Vec<(u32, f64)>)> = rows.iter().flat_map(|r| &r.curves).collect();
    let ys = || {
        curves
            .iter()
            .flat_map(|c| c.1.iter().map(|p| p.1))
            .filter(|ms| ms.is_finite() && *ms > 0.0)
    };
    let top = ys().fold(0.001, f64::max) * 1.3;
    let bottom = ys().fold(top, f64::min) / 1.3;
    let max_batch = curves
        .iter()
        .flat_map(|c| c.1.iter().map(|p| p.0))
        .max()
        .unwrap_or(2)
        .max(2);
    let root = BitMapBackend::new(path, (720, 460)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{task} variants: median latency by batch"),
            ("sans-serif", 20),
        )
        .margin(14)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d(
            -0.3f64..f64::from(max_batch).log2() + 0.3,
            (bottom..top)
                .log_scale()
                .with_key_points(crate::plot::log_ticks(bottom, top)),
        )
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_desc("rows per call (log2)")
        .y_desc("median latency (ms, log scale)")
        .x_label_formatter(&|x| format!("{}", 2f64.powf(x.round()) as u64))
        .y_label_formatter(&|v| ms_label(*v))
        .light_line_style(WHITE)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    let colors = [BLUE, RED, GREEN, MAGENTA, CYAN, BLACK];
    for (i, (label, points)) in curves.iter().enumerate() {
        let color = colors[i % colors.len()];
        let pts = points
            .iter()
            .filter(|(_, ms)| ms.is_finite() && *ms > 0.0)
            .map(|(b, ms)| (f64::from(*b).log2(), *ms))
            .collect();
        draw_line_with_points(&mut chart, pts, color, label.clone())?;
    }
    draw_legend(&mut chart)?;
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::ms_label;

    #[test]
    fn latency_labels_keep_two_significant_digits_without_trailing_zeros() {
        assert_eq!(ms_label(0.003), "0.003");
        assert_eq!(ms_label(0.0031), "0.0031");
        assert_eq!(ms_label(0.25), "0.25");
        assert_eq!(ms_label(2.0), "2");
        assert_eq!(ms_label(40.0), "40");
        assert_eq!(ms_label(500.0), "500");
    }
}
