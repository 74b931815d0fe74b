//! The warm-up experiment: the first request's latency once `weir serve` says a model is ready,
//! with and without warm-up, both ways a model is served: a repository model with and without
//! its `model_warmup` (Triton's warm-up: zero-filled requests run on every session before the
//! version serves), and a graph's model node with and without `warmup: {runs: N}`. Each
//! measurement starts a fresh `weir serve` (this binary's `serve`) over a repository of one model
//! (`--model-repository`) or a graph file of one model node, one session of one intra-op thread
//! either way (the repository's configuration otherwise auto-completed); it times the
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

/// One repeat: the model without and with warm-up, from a repository and as a graph's node.
#[derive(Debug, Clone, Copy)]
pub struct WarmupRepeat {
    /// Repository model without `model_warmup`.
    pub cold: Sample,
    /// Repository model with `model_warmup`.
    pub warmed: Sample,
    /// Graph model node without `warmup:`.
    pub graph_cold: Sample,
    /// Graph model node with `warmup:`.
    pub graph_warmed: Sample,
}

/// What one measurement serves.
enum Served<'a> {
    /// A repository of the model, with this text added to its configuration when given.
    Repository(Option<&'a str>),
    /// This graph file's text.
    Graph(&'a str),
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

/// Starts `weir serve` over `served` (a repository of `name` in `dir`, or a graph serving it as
/// `name`) and measures it.
fn measure(
    dir: &Path,
    (name, file): (&str, &Path),
    served: Served<'_>,
    request: &dyn Fn(&str) -> Prepared,
    steady: usize,
) -> Result<Sample> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    let mut cmd = serve_command()?;
    match served {
        Served::Repository(warmup) => {
            let root = dir.join("models");
            crate::perf_analyzer::repository(&root, name, file, 1)?;
            if let Some(extra) = warmup {
                let config = root.join(name).join("config.pbtxt");
                let mut text = std::fs::read_to_string(&config)?;
                text.push_str(extra);
                std::fs::write(&config, text)?;
            }
            cmd.arg("--model-repository").arg(&root);
        }
        Served::Graph(yaml) => {
            let graph = dir.join("graph.yaml");
            std::fs::write(&graph, yaml)?;
            cmd.arg(&graph);
        }
    }
    cmd.args(["--http", "127.0.0.1:0", "--no-ui"]);
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
    // A graph input's shape is per request: without the model's batch dimension.
    let request_shape = &shape[1.min(shape.len())..];
    let graph_header = format!(
        r#"{{"inputs":[{{"name":"{input}","shape":[{}],"datatype":"FP32","parameters":{{"binary_data_size":{}}}}}],"outputs":[{{"name":"{output}","parameters":{{"binary_data":true}}}}]}}"#,
        request_shape.join(","),
        values.len()
    );
    let graph_request = |addr: &str| Prepared::infer(addr, name, &graph_header, &values);
    // The graph file lives in a temporary folder: its model path must not be relative.
    let absolute =
        std::fs::canonicalize(file).with_context(|| format!("resolving {}", file.display()))?;
    let graph = |warmup: &str| {
        format!(
            "name: {name}\ninputs:\n  - {{name: {input}, dtype: f32, shape: [{}]}}\nnodes:\n  - model: {{id: m, path: {}, inputs: {{{input}: {input}}}, executor: {{instances: 1, intra_op_threads: 1}}{warmup}}}\noutputs:\n  - {{name: {output}, from: m.{output}}}\n",
            request_shape.join(", "),
            absolute.display()
        )
    };
    let graph_cold = graph("");
    let graph_warmed = graph(&format!(", warmup: {{runs: {}}}", config.runs.max(1)));
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
            let served = Served::Repository(extra);
            measure(&dir, (name, file), served, &request, config.steady)
        };
        let node = |warm: bool| {
            let served = Served::Graph(if warm { &graph_warmed } else { &graph_cold });
            measure(&dir, (name, file), served, &graph_request, config.steady)
        };
        let (cold, warmed, graph_cold, graph_warmed) = if r % 2 == 0 {
            let (c, gc) = (one(false)?, node(false)?);
            (c, one(true)?, gc, node(true)?)
        } else {
            let (w, gw) = (one(true)?, node(true)?);
            (one(false)?, w, node(false)?, gw)
        };
        eprintln!(
            "repeat {}/{}: first request {:.2} ms cold, {:.2} ms warmed (repository); {:.2} / {:.2} ms (graph node)",
            r + 1,
            config.repeats,
            cold.first_ms,
            warmed.first_ms,
            graph_cold.first_ms,
            graph_warmed.first_ms
        );
        repeats.push(WarmupRepeat {
            cold,
            warmed,
            graph_cold,
            graph_warmed,
        });
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(repeats)
}

/// The warm-up table as Markdown: the repository model's rows, then the graph node's.
pub fn warmup_table(repeats: &[WarmupRepeat]) -> String {
    let mut s =
        String::from("| | without warm-up | with warm-up | with / without |\n|---|---|---|---|\n");
    type Pick = fn(&WarmupRepeat) -> &Sample;
    let ways: [(&str, Pick, Pick); 2] = [
        ("repository `model_warmup`", |r| &r.cold, |r| &r.warmed),
        (
            "graph node `warmup:`",
            |r| &r.graph_cold,
            |r| &r.graph_warmed,
        ),
    ];
    type Figure = (&'static str, fn(&Sample) -> f64, usize);
    let figures: [Figure; 3] = [
        ("first request, ms", |s| s.first_ms, 2),
        ("later requests (median), ms", |s| s.steady_ms, 2),
        ("spawn to ready, ms", |s| s.ready_ms, 0),
    ];
    for (way, cold_of, warmed_of) in ways {
        for (label, f, digits) in figures {
            let cold: Vec<f64> = repeats.iter().map(|r| f(cold_of(r))).collect();
            let warmed: Vec<f64> = repeats.iter().map(|r| f(warmed_of(r))).collect();
            let ratio: Vec<f64> = warmed
                .iter()
                .zip(&cold)
                .map(|(w, c)| w / c.max(1e-9))
                .collect();
            s.push_str(&format!(
                "| {way}: {label} | {} | {} | {} |\n",
                spread(&cold, digits),
                spread(&warmed, digits),
                spread(&ratio, 3)
            ));
        }
        let first_over_steady = |f: Pick| {
            repeats
                .iter()
                .map(|r| f(r).first_ms / f(r).steady_ms.max(1e-9))
                .collect::<Vec<_>>()
        };
        s.push_str(&format!(
            "| {way}: first / later requests | {} | {} | |\n",
            spread(&first_over_steady(cold_of), 2),
            spread(&first_over_steady(warmed_of), 2)
        ));
    }
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
        .map(|r| {
            [r.cold, r.warmed, r.graph_cold, r.graph_warmed]
                .iter()
                .map(|s| s.first_ms)
                .fold(0.0, f64::max)
        })
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
    let series: [(&str, RGBColor, Pick); 4] = [
        ("repository, without", crate::plot::PALETTE[1], |r| &r.cold),
        ("repository, with", crate::plot::PALETTE[0], |r| &r.warmed),
        ("graph node, without", crate::plot::PALETTE[3], |r| {
            &r.graph_cold
        }),
        ("graph node, with", crate::plot::PALETTE[2], |r| {
            &r.graph_warmed
        }),
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
