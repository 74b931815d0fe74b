//! The pipeline experiment: a whole service graph against the same pipeline written in Python.
//!
//! weir's side is `weir serve graphs/ocr.yaml`, a real process, spoken to over loopback HTTP by
//! keep-alive clients of this process, each image a PNG in a BYTES tensor of the Open Inference
//! Protocol's binary extension: decoding, resizing, the detector, region finding, the per-line
//! fan-out, recogniser, orientation classifier, CTC decoding and the gather all run in the
//! server. Python's side is `bench/python/ocr_pipeline.py --bench`: the same models and steps
//! with Pillow, numpy and onnxruntime, called in-process by its own threads (no HTTP at all), its
//! ONNX Runtime sessions shared and on one intra-op thread each, as weir's model nodes are by
//! default. Both run closed loops of `c` clients over the same rendered pages for the same time;
//! for each `c` the two alternate, and which goes first alternates with the repeat, so a noisy
//! spell of the shared machine falls on both. Medians over the repeats are reported.
//!
//! A third side measured in the same rotation is the physical limit of both: the three models
//! alone (`ocr_pipeline.py --models-alone`), run back to back in ONNX Runtime on each page's own
//! inputs by `c` threads with the same sessions and threads. Each side also reports its CPU time
//! per image (the serving process's user + system time over the measurement, from `/proc`,
//! divided by the images answered); the models' own CPU time per image is the models-alone
//! side's, so each pipeline's CPU time outside the models is its figure minus that one.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use crate::client::{closed_loop, connect, Client, Prepared, Until};
use crate::overhead::median;
use crate::process::{cpu_seconds, minor_faults};

/// The model name `graphs/ocr.yaml` serves under.
const MODEL: &str = "ocr";

/// Settings of the pipeline experiment.
#[derive(Debug, Clone)]
pub struct PipelineConfig {
    /// The `weir` binary.
    pub weir: PathBuf,
    /// The graph file.
    pub graph: PathBuf,
    /// A folder of PNG pages (every `*.png` in it is a request).
    pub images: PathBuf,
    /// The Python interpreter (the set-up's venv).
    pub python: PathBuf,
    /// `ocr_pipeline.py`.
    pub script: PathBuf,
    /// Client counts.
    pub clients: Vec<usize>,
    /// Length of one measurement.
    pub seconds: f64,
    /// Measurements of each side at each client count; medians are reported.
    pub repeats: usize,
    /// Dataflow workers of `weir serve`.
    pub workers: usize,
}

/// One side's measurement: images per second and latency per image.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Measured {
    /// Images answered per second.
    pub throughput: f64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 99th-percentile latency, ms.
    pub p99_ms: f64,
    /// CPU time (user + system, every thread of the serving process) per image, ms.
    pub cpu_ms: f64,
    /// Minor page faults of the serving process per image (fresh memory first touched: what
    /// buffers allocated per request cost beyond the allocator's reuse).
    pub faults: f64,
}

/// Both sides at one client count, medians over the repeats.
#[derive(Debug, Clone, Copy)]
pub struct PipelineRow {
    /// Concurrent clients.
    pub clients: usize,
    /// `weir serve` over HTTP.
    pub weir: Measured,
    /// The Python pipeline.
    pub python: Measured,
    /// The three models alone, back to back in ONNX Runtime (from Python).
    pub models: Measured,
}

impl PipelineRow {
    /// CPU time per image outside the models, ms: a side's CPU time per image less the models'.
    pub fn outside_models_ms(&self, side: &Measured) -> f64 {
        side.cpu_ms - self.models.cpu_ms
    }
}

/// A `weir serve` process, killed when dropped.
struct Served {
    child: Child,
    addr: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `weir serve GRAPH` on a free loopback port and waits for its address line.
fn serve(config: &PipelineConfig) -> Result<Served> {
    let mut child = Command::new(&config.weir)
        .arg("serve")
        .arg(&config.graph)
        .args(["--http", "127.0.0.1:0"])
        .args(["--workers", &config.workers.to_string()])
        .env_remove("WEIR_AUTH_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| {
            format!(
                "starting {} (build it first: cargo build --release)",
                config.weir.display()
            )
        })?;
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        BufReader::new(out).read_line(&mut line)?;
    }
    let Some(addr) = line.trim().strip_prefix("weir serving http://") else {
        let _ = child.kill();
        let _ = child.wait();
        bail!("weir serve did not start: `{}`", line.trim());
    };
    Ok(Served {
        addr: addr.to_string(),
        child,
    })
}

/// The PNG files of `dir`, by name.
fn pages(dir: &Path) -> Result<Vec<Vec<u8>>> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {} (run scripts/setup.sh)", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "png"))
        .collect();
    names.sort();
    if names.is_empty() {
        bail!("no PNG pages in {}", dir.display());
    }
    names
        .iter()
        .map(|p| std::fs::read(p).with_context(|| format!("reading {}", p.display())))
        .collect()
}

/// One request per page: the PNG as a one-element BYTES tensor in binary (4-byte length first).
fn requests(addr: &str, pages: &[Vec<u8>]) -> Result<Vec<Prepared>> {
    pages
        .iter()
        .map(|png| {
            let length = u32::try_from(png.len()).context("a page over 4 GiB")?;
            let header = format!(
                r#"{{"inputs":[{{"name":"image","shape":[1],"datatype":"BYTES","parameters":{{"binary_data_size":{}}}}}]}}"#,
                png.len() + 4
            );
            let binary = [&length.to_le_bytes()[..], png].concat();
            Ok(Prepared::infer(addr, MODEL, &header, &binary))
        })
        .collect()
}

/// Posts every request once, waiting up to a minute for the server's first answer (its models
/// load first); fails when any page is not answered with at least one line.
fn warm(addr: &str, requests: &[Prepared]) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut client = loop {
        match Client::connect(addr) {
            Ok(c) => break c,
            Err(e) if Instant::now() > deadline => return Err(e.context("connecting to weir")),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    };
    for (i, r) in requests.iter().enumerate() {
        let (status, body) = client.exchange(&r.head, &r.body)?;
        let body = String::from_utf8_lossy(&body);
        if status != 200 {
            bail!("page {i}: HTTP {status}: {body}");
        }
        let reply: serde_json::Value = serde_json::from_str(&body)?;
        let lines = reply["outputs"]
            .as_array()
            .and_then(|o| o.iter().find(|o| o["name"] == "lines"))
            .and_then(|o| o["data"][0].as_u64());
        if lines.unwrap_or(0) == 0 {
            bail!("page {i}: no text line read: {body}");
        }
    }
    Ok(())
}

/// `clients` keep-alive connections posting the pages in turn for `seconds`.
/// The server's CPU time per image is its CPU seconds over the run per second of the run, divided
/// by the images answered per second.
fn weir_run(
    server: &Served,
    requests: &[Prepared],
    clients: usize,
    seconds: f64,
) -> Result<Measured> {
    let clients = connect(&server.addr, clients)?;
    let pid = server.child.id();
    let (started, cpu, faults) = (Instant::now(), cpu_seconds(pid), minor_faults(pid));
    let stop = started + Duration::from_secs_f64(seconds);
    let (throughput, p50_ms, p99_ms) = closed_loop(clients, requests, Until::Deadline(stop))?;
    let elapsed = started.elapsed().as_secs_f64();
    let per_image = |total: f64| total / elapsed / throughput.max(1e-9);
    Ok(Measured {
        throughput,
        p50_ms,
        p99_ms,
        cpu_ms: per_image(cpu_seconds(pid) - cpu) * 1e3,
        faults: per_image(minor_faults(pid) - faults),
    })
}

/// Which of the Python script's runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PythonSide {
    /// The whole pipeline (`--bench`).
    Pipeline,
    /// The three models alone (`--models-alone`).
    Models,
}

/// `ocr_pipeline.py --bench` (or `--models-alone`) with `clients` threads for `seconds`.
fn python_run(config: &PipelineConfig, side: PythonSide, clients: usize) -> Result<Measured> {
    let out = Command::new(&config.python)
        .arg(&config.script)
        .arg(match side {
            PythonSide::Pipeline => "--bench",
            PythonSide::Models => "--models-alone",
        })
        .arg(&config.images)
        .args(["--clients", &clients.to_string()])
        .args(["--seconds", &config.seconds.to_string()])
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", config.python.display()))?;
    if !out.status.success() {
        bail!("{} failed ({})", config.script.display(), out.status);
    }
    let reply: serde_json::Value = serde_json::from_slice(&out.stdout)
        .with_context(|| format!("{}'s output", config.script.display()))?;
    let field = |name: &str| {
        reply[name]
            .as_f64()
            .ok_or_else(|| anyhow!("no `{name}` in the Python pipeline's answer {reply}"))
    };
    Ok(Measured {
        throughput: field("throughput")?,
        p50_ms: field("p50_ms")?,
        p99_ms: field("p99_ms")?,
        cpu_ms: field("cpu_ms_per_image")?,
        faults: field("minor_faults_per_image")?,
    })
}

fn progress(total: usize) -> ProgressBar {
    let bar = ProgressBar::new(total as u64);
    if let Ok(style) =
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// Runs the experiment: every client count, both sides, `repeats` times.
///
/// # Errors
/// When the server or the Python pipeline does not start, or a request fails.
pub fn pipeline(config: &PipelineConfig) -> Result<Vec<PipelineRow>> {
    let pages = pages(&config.images)?;
    let server = serve(config)?;
    let requests = requests(&server.addr, &pages)?;
    warm(&server.addr, &requests)?;
    let repeats = config.repeats.max(1);
    let bar = progress(repeats * config.clients.len() * 3);
    let mut samples = vec![[Vec::new(), Vec::new(), Vec::new()]; config.clients.len()];
    for r in 0..repeats {
        for (i, &c) in config.clients.iter().enumerate() {
            for step in 0..3 {
                // The three sides in turn, each repeat starting one further along.
                let side = (step + r) % 3;
                let name = ["weir", "Python", "models alone"][side];
                bar.set_message(format!("repeat {}/{repeats}, {c} clients, {name}", r + 1));
                let m = match side {
                    0 => weir_run(&server, &requests, c, config.seconds)?,
                    1 => python_run(config, PythonSide::Pipeline, c)?,
                    _ => python_run(config, PythonSide::Models, c)?,
                };
                samples[i][side].push(m);
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    let med = |v: &[Measured]| Measured {
        throughput: median(v.iter().map(|m| m.throughput).collect()),
        p50_ms: median(v.iter().map(|m| m.p50_ms).collect()),
        p99_ms: median(v.iter().map(|m| m.p99_ms).collect()),
        cpu_ms: median(v.iter().map(|m| m.cpu_ms).collect()),
        faults: median(v.iter().map(|m| m.faults).collect()),
    };
    Ok(config
        .clients
        .iter()
        .zip(&samples)
        .map(|(&clients, [weir, python, models])| PipelineRow {
            clients,
            weir: med(weir),
            python: med(python),
            models: med(models),
        })
        .collect())
}

/// The results as a Markdown table.
pub fn pipeline_table(rows: &[PipelineRow]) -> String {
    let mut out = String::from(
        "| clients | weir images/s | Python images/s | models alone images/s | weir / Python | weir / models | Python / models | weir p50 ms | Python p50 ms | models p50 ms | weir p99 ms | Python p99 ms | weir CPU ms/image outside models | Python CPU ms/image outside models | models CPU ms/image | minor page faults per image, weir / Python |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let ratio = |a: f64, b: f64| a / b.max(1e-9);
        out.push_str(&format!(
            "| {} | {:.1} | {:.1} | {:.1} | {:.2} | {:.2} | {:.2} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.0} / {:.0} |\n",
            r.clients,
            r.weir.throughput,
            r.python.throughput,
            r.models.throughput,
            ratio(r.weir.throughput, r.python.throughput),
            ratio(r.weir.throughput, r.models.throughput),
            ratio(r.python.throughput, r.models.throughput),
            r.weir.p50_ms,
            r.python.p50_ms,
            r.models.p50_ms,
            r.weir.p99_ms,
            r.python.p99_ms,
            r.outside_models_ms(&r.weir),
            r.outside_models_ms(&r.python),
            r.models.cpu_ms,
            r.weir.faults,
            r.python.faults,
        ));
    }
    out
}
