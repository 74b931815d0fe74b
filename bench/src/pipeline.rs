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

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use crate::http::{closed_loop, Client, Prepared, Until};
use crate::overhead::median;

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
fn weir_run(addr: &str, requests: &[Prepared], clients: usize, seconds: f64) -> Result<Measured> {
    let stop = Instant::now() + Duration::from_secs_f64(seconds);
    let (throughput, p50_ms, p99_ms) = closed_loop(addr, requests, clients, Until::Deadline(stop))?;
    Ok(Measured {
        throughput,
        p50_ms,
        p99_ms,
    })
}

/// `ocr_pipeline.py --bench` with `clients` threads for `seconds`.
fn python_run(config: &PipelineConfig, clients: usize) -> Result<Measured> {
    let out = Command::new(&config.python)
        .arg(&config.script)
        .arg("--bench")
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
    let bar = progress(repeats * config.clients.len() * 2);
    let mut samples = vec![(Vec::new(), Vec::new()); config.clients.len()];
    for r in 0..repeats {
        for (i, &c) in config.clients.iter().enumerate() {
            for side in 0..2 {
                // Even repeats measure weir first, odd ones Python first.
                let weir = (side + r) % 2 == 0;
                bar.set_message(format!(
                    "repeat {}/{repeats}, {c} clients, {}",
                    r + 1,
                    if weir { "weir" } else { "Python" }
                ));
                if weir {
                    samples[i]
                        .0
                        .push(weir_run(&server.addr, &requests, c, config.seconds)?);
                } else {
                    samples[i].1.push(python_run(config, c)?);
                }
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    let med = |v: &[Measured]| Measured {
        throughput: median(v.iter().map(|m| m.throughput).collect()),
        p50_ms: median(v.iter().map(|m| m.p50_ms).collect()),
        p99_ms: median(v.iter().map(|m| m.p99_ms).collect()),
    };
    Ok(config
        .clients
        .iter()
        .zip(&samples)
        .map(|(&clients, (weir, python))| PipelineRow {
            clients,
            weir: med(weir),
            python: med(python),
        })
        .collect())
}

/// The results as a Markdown table.
pub fn pipeline_table(rows: &[PipelineRow]) -> String {
    let mut out = String::from(
        "| clients | weir images/s | Python images/s | weir / Python | weir p50 ms | Python p50 ms | weir p99 ms | Python p99 ms |\n|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {:.1} | {:.1} | {:.2} | {:.1} | {:.1} | {:.1} | {:.1} |\n",
            r.clients,
            r.weir.throughput,
            r.python.throughput,
            r.weir.throughput / r.python.throughput.max(1e-9),
            r.weir.p50_ms,
            r.python.p50_ms,
            r.weir.p99_ms,
            r.python.p99_ms
        ));
    }
    out
}
