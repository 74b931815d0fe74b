//! The JPEG draft experiment: an image classifier graph (`decode_image` → `resize` to 224 × 224
//! → `cast` → `transpose` → `normalize` → squeezenet) served in-process, decoding each photo
//! whole against decoding it with `draft: {height: 224, width: 224}` (the JPEG reduced in its
//! inverse DCT to the smallest of 1/8, 1/4 and 1/2 still at least 224 on both sides), the two
//! graphs taking turns repeat by repeat. Per photo and side: the request's latency at one client
//! (median over the repeat's requests) and the process's CPU time per request; and how far each
//! side's 224 × 224 model input (the same decode and resize functions the graph runs) is from
//! the photo box-averaged to that size, a downscale without aliasing, in levels of the `u8`
//! pixels. (The zoo's squeezenet is the `light` build, without trained weights, so a top class
//! would say nothing; the input is what a trained model would see.)

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, Context, Result};
use plotters::prelude::*;
use weir::{plan_spec, start, GraphSpec, NamedTensor, RunningGraph, RuntimeOptions, Tensor};
use weir_engine::batch::TensorColumn;
use weir_engine::spec::{ImageSize, Interpolation};
use weir_engine::tensor::TensorData;

use crate::overhead::{median, spread};
use crate::plot::PALETTE;
use crate::process::cpu_seconds;

/// The classifier's input side, and the draft size.
pub const SIDE: usize = 224;

/// Settings of the draft experiment.
#[derive(Debug, Clone)]
pub struct DraftConfig {
    /// The classifier (an ImageNet model reading `[1, 3, 224, 224]`: the zoo's squeezenet).
    pub model: PathBuf,
    /// The JPEG photos.
    pub photos: Vec<PathBuf>,
    /// Requests per photo, side and repeat.
    pub requests: usize,
    /// Repeats; each alternates which side goes first.
    pub repeats: usize,
}

/// One photo's figures.
#[derive(Debug, Clone)]
pub struct DraftRow {
    /// The file's name.
    pub photo: String,
    /// Its size, width × height.
    pub size: (usize, usize),
    /// The size drafting decodes it at, width × height.
    pub drafted: (usize, usize),
    /// Median latency per request over the repeats, ms: whole, drafted.
    pub latency_ms: (f64, f64),
    /// The repeats' latencies, ms: whole, drafted.
    pub repeats_ms: (Vec<f64>, Vec<f64>),
    /// CPU time of the process per request (every thread), median over the repeats, ms.
    pub cpu_ms: (f64, f64),
    /// Mean absolute difference of the model's 224 × 224 input from the photo box-averaged to
    /// that size (each output pixel the mean of the source pixels it covers: a downscale without
    /// aliasing), in levels: whole, drafted.
    pub from_box: (f64, f64),
    /// Mean absolute difference between the two sides' inputs, in levels.
    pub between: f64,
}

/// The graph: one JPEG in, the ImageNet scores out; `draft` decodes at a reduced DCT scale.
fn graph(model: &Path, draft: bool) -> Result<RunningGraph> {
    let draft = if draft {
        format!(", draft: {{height: {SIDE}, width: {SIDE}}}")
    } else {
        String::new()
    };
    // ImageNet's channel means and deviations, in levels (the zoo's models are trained on them).
    let yaml = format!(
        "name: classify
inputs:
  - {{name: photo, dtype: bytes, shape: [1]}}
nodes:
  - decode_image: {{id: decoded, input: photo{draft}}}
  - resize: {{id: small, input: decoded, height: {SIDE}, width: {SIDE}, interpolation: bilinear}}
  - cast: {{id: floats, input: small, to: f32}}
  - transpose: {{id: chw, input: floats, perm: [2, 0, 1]}}
  - normalize: {{id: x, input: chw, mean: [123.675, 116.28, 103.53], std: [58.395, 57.12, 57.375]}}
  - model: {{id: net, path: {}, inputs: {{data_0: x}}, executor: {{instances: 1, intra_op_threads: 1}}}}
outputs:
  - {{name: scores, from: net}}
",
        model.display()
    );
    let spec = GraphSpec::from_yaml(&yaml, "classify.yaml").map_err(|d| anyhow!("{d}"))?;
    let planned = plan_spec(&spec, Path::new(".")).map_err(|d| anyhow!("{d}"))?;
    Ok(start(planned.plan, RuntimeOptions::default())?)
}

fn request(bytes: &[u8]) -> Vec<NamedTensor> {
    vec![NamedTensor {
        name: "photo".into(),
        tensor: Tensor::bytes(vec![1], vec![bytes.to_vec()]),
    }]
}

/// `requests` requests of `bytes` one after another: median latency and CPU per request, ms.
fn measure(graph: &RunningGraph, bytes: &[u8], requests: usize) -> Result<(f64, f64)> {
    let mut latencies = Vec::with_capacity(requests);
    let cpu = cpu_seconds(std::process::id());
    for _ in 0..requests {
        let t = Instant::now();
        graph
            .runtime()
            .infer(request(bytes))
            .map_err(|e| anyhow!("request failed: {e}"))?;
        latencies.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let cpu_ms = (cpu_seconds(std::process::id()) - cpu) * 1e3 / requests as f64;
    Ok((median(latencies), cpu_ms))
}

/// `bytes` decoded as the graph's `decode_image` decodes them (with `draft`, if any).
fn decode_photo(bytes: &[u8], draft: Option<ImageSize>) -> Result<TensorColumn> {
    let column = TensorColumn::from_data("x", vec![1], 1, TensorData::Bytes(vec![bytes.to_vec()]))?;
    weir_operators::image::decode(&column, u64::MAX, draft).map_err(|e| anyhow!(e))
}

/// The 224 × 224 `u8` input the graph's resize makes of a `decoded` photo, and that photo's size
/// (width, height).
fn model_input(decoded: &TensorColumn) -> Result<(Vec<u8>, (usize, usize))> {
    let shape = decoded.row_shape(0);
    let small = weir_operators::image::resize(decoded, SIDE, SIDE, Interpolation::Bilinear)
        .map_err(|e| anyhow!(e))?;
    let values = small.values::<u8>().context("u8 pixels")?.to_vec();
    Ok((values, (shape[1], shape[0])))
}

/// The `whole`-decoded photo box-averaged to 224 × 224 (`u8`, rounded): output pixel `(x, y)`
/// is the mean of the source pixels whose indices fall in `[x·W/224, (x+1)·W/224)` and
/// `[y·H/224, (y+1)·H/224)` (at least one each way).
fn box_average(whole: &TensorColumn) -> Result<Vec<u8>> {
    let shape = whole.row_shape(0);
    let (h, w) = (shape[0], shape[1]);
    let pixels = whole.values::<u8>().context("u8 pixels")?;
    let span = |i: usize, n: usize| {
        let start = i * n / SIDE;
        (start, ((i + 1) * n / SIDE).max(start + 1).min(n))
    };
    let mut out = Vec::with_capacity(SIDE * SIDE * 3);
    for y in 0..SIDE {
        let (y0, y1) = span(y, h);
        for x in 0..SIDE {
            let (x0, x1) = span(x, w);
            for c in 0..3 {
                let mut sum = 0u64;
                for sy in y0..y1 {
                    for sx in x0..x1 {
                        sum += u64::from(pixels[(sy * w + sx) * 3 + c]);
                    }
                }
                let count = ((y1 - y0) * (x1 - x0)) as f64;
                out.push((sum as f64 / count).round() as u8);
            }
        }
    }
    Ok(out)
}

fn mean_difference(a: &[u8], b: &[u8]) -> f64 {
    let total: u64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| u64::from(x.abs_diff(*y)))
        .sum();
    total as f64 / a.len().max(1) as f64
}

/// Runs the experiment, printing progress to stderr.
///
/// # Errors
/// When a photo cannot be read or a graph does not start or answer.
pub fn draft(config: &DraftConfig) -> Result<Vec<DraftRow>> {
    let whole = graph(&config.model, false)?;
    let drafted = graph(&config.model, true)?;
    let mut rows = Vec::new();
    for path in &config.photos {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let whole_photo = decode_photo(&bytes, None)?;
        let (full_input, size) = model_input(&whole_photo)?;
        let draft = Some(ImageSize {
            height: SIDE,
            width: SIDE,
        });
        let (draft_input, drafted_size) = model_input(&decode_photo(&bytes, draft)?)?;
        let reference = box_average(&whole_photo)?;
        // One request each first: the sessions' first run and the allocator's warm-up.
        measure(&whole, &bytes, 1)?;
        measure(&drafted, &bytes, 1)?;
        let (mut lat, mut cpu) = ((Vec::new(), Vec::new()), (Vec::new(), Vec::new()));
        for r in 0..config.repeats {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            eprintln!("{name}: repeat {} of {}", r + 1, config.repeats);
            let order = if r % 2 == 0 {
                [false, true]
            } else {
                [true, false]
            };
            for is_draft in order {
                let g = if is_draft { &drafted } else { &whole };
                let (l, c) = measure(g, &bytes, config.requests)?;
                if is_draft {
                    lat.1.push(l);
                    cpu.1.push(c);
                } else {
                    lat.0.push(l);
                    cpu.0.push(c);
                }
            }
        }
        rows.push(DraftRow {
            photo: path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned(),
            size,
            drafted: drafted_size,
            latency_ms: (median(lat.0.clone()), median(lat.1.clone())),
            repeats_ms: lat,
            cpu_ms: (median(cpu.0), median(cpu.1)),
            from_box: (
                mean_difference(&full_input, &reference),
                mean_difference(&draft_input, &reference),
            ),
            between: mean_difference(&full_input, &draft_input),
        });
    }
    whole.shutdown();
    drafted.shutdown();
    Ok(rows)
}

/// The figures as a markdown table.
pub fn draft_table(rows: &[DraftRow]) -> String {
    let mut out = String::from(
        "| photo | size | drafted to | whole p50 ms | drafted p50 ms | drafted / whole latency, median [min–max] of the repeats | whole CPU ms/request | drafted CPU ms/request | input's difference from the box average, whole / drafted (levels) | between the two inputs (levels) |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let ratios: Vec<f64> = r
            .repeats_ms
            .0
            .iter()
            .zip(&r.repeats_ms.1)
            .map(|(whole, drafted)| drafted / whole)
            .collect();
        out.push_str(&format!(
            "| {} | {}×{} | {}×{} | {:.2} | {:.2} | {} | {:.1} | {:.1} | {:.2} / {:.2} | {:.2} |\n",
            r.photo,
            r.size.0,
            r.size.1,
            r.drafted.0,
            r.drafted.1,
            r.latency_ms.0,
            r.latency_ms.1,
            spread(&ratios, 3),
            r.cpu_ms.0,
            r.cpu_ms.1,
            r.from_box.0,
            r.from_box.1,
            r.between,
        ));
    }
    out
}

/// Latency per request by photo, whole against drafted, as paired bars.
///
/// # Errors
/// When the image cannot be drawn or written.
pub fn plot_draft(rows: &[DraftRow], path: &Path) -> Result<()> {
    let root = BitMapBackend::new(path, (720, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let top = rows
        .iter()
        .map(|r| r.latency_ms.0.max(r.latency_ms.1))
        .fold(1.0, f64::max)
        * 1.2;
    let n = rows.len().max(1);
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "JPEG classifier graph: request latency, whole decode vs draft",
            ("sans-serif", 18),
        )
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5f64..n as f64 - 0.5, 0f64..top)
        .map_err(|e| anyhow!("{e}"))?;
    let names: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{} ({}×{})",
                r.photo.trim_end_matches(".jpg"),
                r.size.0,
                r.size.1
            )
        })
        .collect();
    chart
        .configure_mesh()
        .x_labels(n)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 {
                names.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc("p50 ms per request (one client)")
        .light_line_style(WHITE)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    for (side, (label, color)) in [("whole decode", PALETTE[0]), ("draft 224×224", PALETTE[1])]
        .into_iter()
        .enumerate()
    {
        let bars = rows.iter().enumerate().map(move |(i, r)| {
            let v = if side == 0 {
                r.latency_ms.0
            } else {
                r.latency_ms.1
            };
            let x0 = i as f64 - 0.4 + side as f64 * 0.4;
            Rectangle::new([(x0, 0.0), (x0 + 0.38, v)], color.filled())
        });
        chart
            .draw_series(bars)
            .map_err(|e| anyhow!("{e}"))?
            .label(label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    crate::plot::draw_legend(&mut chart)?;
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}
