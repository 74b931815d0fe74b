//! The warm-up experiment: the first request's latency once `weir serve` says a repository model
//! is ready, with and without the model's `model_warmup` (Triton's warm-up: zero-filled requests
//! run through the model's graph before the version serves). Each measurement starts a fresh
//! `weir serve --model-repository` (this binary's `serve`) over a repository of one model, one
//! session of one intra-op thread, its configuration otherwise auto-completed; it times the
//! spawn to the model's readiness (`GET /v2/models/<name>/ready` answering 200), then the first
//! binary inference request on a keep-alive connection opened beforehand, then the median of the
//! next requests on it as the warm reference. Each repeat measures both repositories, the order
//! alternating from repeat to repeat.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use plotters::prelude::*;

use crate::client::{Client, Prepared};
use crate::overhead::{first_input_output, median, quantile_ms, spread};
use crate::process::{serve_command, ServeProcess};

/// Settings of the warm-up experiment.
#[derive(Debug, Clone)]
pub struct WarmupBenchConfig {
    /// The model: its name in the repository and its file (fixed input dimensions).
    pub model: (String, PathBuf),
    /// Repetitions.
    pub repeats: usize,
    /// Warm-up runs (`model_warmup`'s `count`).
    pub runs: usize,
    /// Requests after the first, for the warm reference.
    pub steady: usize,
}

/// One server's figures, ms: spawn to ready, the first request, the median of the next ones.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sample {
    /// From the spawn to the model's readiness.
    pub ready_ms: f64,
    /// The first inference request.
    pub first_ms: f64,
    /// The median of the requests after it.
    pub steady_ms: f64,
}

/// One repeat: the model without and with `model_warmup`.
#[derive(Debug, Clone, Copy)]
pub struct WarmupRepeat {
    /// Without warm-up.
    pub cold: Sample,
    /// With warm-up.
    pub warmed: Sample,
}

/// The model's input: its name and full dimensions (the model cannot batch, so `model_warmup`
/// and requests give every dimension).
fn fixed_input(file: &Path) -> Result<(String, Vec<usize>, String)> {
    let (input, output) = first_input_output(file)?;
    let dims = input
        .dims
        .iter()
        .map(|d| match d {
            weir_engine::tensor::Dim::Fixed(n) => Ok(*n),
            weir_engine::tensor::Dim::Dynamic => bail!(
                "{}: input `{}` has a dynamic dimension; the warm-up experiment needs fixed ones",
                file.display(),
                input.name
            ),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((input.name, dims, output.name))
}

/// Starts `weir serve` over a repository of `name` in `dir` (with `warmup` added to its
/// configuration when given) and measures it.
fn measure(
    dir: &Path,
    (name, file): (&str, &Path),
    warmup: Option<&str>,
    request: &dyn Fn(&str) -> Prepared,
    steady: usize,
) -> Result<Sample> {
    let _ = std::fs::remove_dir_all(dir);
    let root = dir.join("models");
    crate::perf_analyzer::repository(&root, name, file, 1)?;
    if let Some(extra) = warmup {
        let config = root.join(name).join("config.pbtxt");
        let mut text = std::fs::read_to_string(&config)?;
        text.push_str(extra);
        std::fs::write(&config, text)?;
    }
    let mut cmd = serve_command()?;
    cmd.arg("--model-repository")
        .arg(&root)
        .args(["--http", "127.0.0.1:0", "--no-ui"]);
    let log = std::fs::File::create(dir.join("serve.log"))?;
    let started = Instant::now();
    let server = ServeProcess::start(&mut cmd, log, Duration::from_secs(120))?;
    let ready = format!("/v2/models/{name}/ready");
    let mut probe = Client::connect(&server.addr)?;
    let give_up = Instant::now() + Duration::from_secs(120);
    while probe.get(&server.addr, &ready)?.0 != 200 {
        if Instant::now() > give_up {
            bail!(
                "model {name} not ready within 120 s (see {})",
                dir.display()
            );
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let ready_ms = started.elapsed().as_secs_f64() * 1e3;
    let prepared = request(&server.addr);
    let mut client = Client::connect(&server.addr)?;
    let mut post = || -> Result<Duration> {
        let t = Instant::now();
        let status = client.post(&prepared.head, &prepared.body)?;
        if status != 200 {
            bail!("HTTP {status} (see {})", dir.display());
        }
        Ok(t.elapsed())
    };
    let first = post()?;
    let rest = (0..steady.max(1))
        .map(|_| post())
        .collect::<Result<Vec<_>>>()?;
    Ok(Sample {
        ready_ms,
        first_ms: first.as_secs_f64() * 1e3,
        steady_ms: quantile_ms(&rest, 0.5)?,
    })
}

/// Runs the warm-up experiment.
///
/// # Errors
/// When the model has dynamic input dimensions, a server does not start or get ready, or a
/// request is not answered 200.
pub fn warmup(config: &WarmupBenchConfig) -> Result<Vec<WarmupRepeat>> {
    let (name, file) = &config.model;
    let (input, dims, output) =
        fixed_input(file).with_context(|| format!("reading {}", file.display()))?;
    let elements: usize = dims.iter().product();
    let values: Vec<u8> = (0..elements)
        .flat_map(|i| ((i % 255) as f32 / 255.0).to_le_bytes())
        .collect();
    let shape: Vec<String> = dims.iter().map(usize::to_string).collect();
    let header = format!(
        r#"{{"inputs":[{{"name":"{input}","shape":[{}],"datatype":"FP32","parameters":{{"binary_data_size":{}}}}}],"outputs":[{{"name":"{output}","parameters":{{"binary_data":true}}}}]}}"#,
        shape.join(","),
        values.len()
    );
    let request = |addr: &str| Prepared::infer(addr, name, &header, &values);
    let extra = format!(
        "model_warmup [ {{ name: \"zeros\" batch_size: 1 count: {} inputs {{ key: \"{input}\" value: {{ data_type: TYPE_FP32 dims: [ {} ] zero_data: true }} }} }} ]\n",
        config.runs.max(1),
        shape.join(", ")
    );
    let dir = std::env::temp_dir().join(format!("weir-bench-warmup-{}", std::process::id()));
    let mut repeats = Vec::new();
    for r in 0..config.repeats {
        let one = |warm: bool| {
            let extra = warm.then_some(extra.as_str());
            measure(&dir, (name, file), extra, &request, config.steady)
        };
        let (cold, warmed) = if r % 2 == 0 {
            let c = one(false)?;
            (c, one(true)?)
        } else {
            let w = one(true)?;
            (one(false)?, w)
        };
        eprintln!(
            "repeat {}/{}: first request {:.2} ms cold, {:.2} ms warmed",
            r + 1,
            config.repeats,
            cold.first_ms,
            warmed.first_ms
        );
        repeats.push(WarmupRepeat { cold, warmed });
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(repeats)
}

/// The warm-up table as Markdown.
pub fn warmup_table(repeats: &[WarmupRepeat]) -> String {
    let mut s =
        String::from("| | without warm-up | with warm-up | with / without |\n|---|---|---|---|\n");
    type Figure = (&'static str, fn(&Sample) -> f64, usize);
    let figures: [Figure; 3] = [
        ("first request, ms", |s| s.first_ms, 2),
        ("later requests (median), ms", |s| s.steady_ms, 2),
        ("spawn to ready, ms", |s| s.ready_ms, 0),
    ];
    for (label, f, digits) in figures {
        let cold: Vec<f64> = repeats.iter().map(|r| f(&r.cold)).collect();
        let warmed: Vec<f64> = repeats.iter().map(|r| f(&r.warmed)).collect();
        let ratio: Vec<f64> = warmed
            .iter()
            .zip(&cold)
            .map(|(w, c)| w / c.max(1e-9))
            .collect();
        s.push_str(&format!(
            "| {label} | {} | {} | {} |\n",
            spread(&cold, digits),
            spread(&warmed, digits),
            spread(&ratio, 3)
        ));
    }
    let first_over_steady = |f: fn(&WarmupRepeat) -> &Sample| {
        repeats
            .iter()
            .map(|r| f(r).first_ms / f(r).steady_ms.max(1e-9))
            .collect::<Vec<_>>()
    };
    s.push_str(&format!(
        "| first / later requests | {} | {} | |\n",
        spread(&first_over_steady(|r| &r.cold), 2),
        spread(&first_over_steady(|r| &r.warmed), 2)
    ));
    s
}

/// The first request's latency per repeat, without and with warm-up, and the later requests'
/// median of each as a thin line.
///
/// # Errors
/// When the image cannot be drawn or written.
pub fn plot_warmup(repeats: &[WarmupRepeat], path: &Path) -> Result<()> {
    use anyhow::anyhow;
    let root = BitMapBackend::new(path, (640, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let top = repeats
        .iter()
        .map(|r| r.cold.first_ms.max(r.warmed.first_ms))
        .fold(1.0, f64::max)
        * 1.25;
    let n = repeats.len().max(1) as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption("First request after ready", ("sans-serif", 20))
        .margin(14)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d(0.5f64..n + 0.5, 0.0..top)
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_desc("repeat")
        .y_desc("latency, ms")
        .x_labels(repeats.len().max(1))
        .x_label_formatter(&|x| format!("{}", x.round() as u64))
        .light_line_style(WHITE)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    type Pick = fn(&WarmupRepeat) -> &Sample;
    let series: [(&str, RGBColor, Pick); 2] = [
        ("without warm-up", crate::plot::PALETTE[1], |r| &r.cold),
        ("with warm-up", crate::plot::PALETTE[0], |r| &r.warmed),
    ];
    for (name, color, pick) in series {
        let points: Vec<(f64, f64)> = repeats
            .iter()
            .enumerate()
            .map(|(i, r)| (i as f64 + 1.0, pick(r).first_ms))
            .collect();
        crate::plot::draw_line_with_points(&mut chart, points, color, format!("{name}: first"))?;
        let later = median(repeats.iter().map(|r| pick(r).steady_ms).collect());
        crate::plot::draw_labelled_line(
            &mut chart,
            [(0.5, later), (n + 0.5, later)],
            ShapeStyle::from(color).stroke_width(1),
            format!("{name}: later (median)"),
        )?;
    }
    crate::plot::draw_legend(&mut chart)?;
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}
