//! The perf_analyzer experiment: Triton's own load tool against `weir serve --model-repository`,
//! over HTTP and gRPC, beside bare ONNX Runtime on the same model and layout in the same run.
//!
//! The repository holds one model (squeezenet by default) with a `config.pbtxt` giving its
//! instance group (`count` sessions of one intra-op thread each) and nothing else, so the rest is
//! auto-completed as a Triton user's repository would be. `weir serve` runs as its own process
//! (this binary's `serve`, which is `weir serve`'s code) and perf_analyzer (the tritonclient
//! wheel's binary the set-up unpacks) measures it as it would Triton: a closed loop of
//! `concurrency` clients, time windows, its own throughput and latency percentiles. The reference
//! is the same model in ONNX Runtime, in this process, with as many sessions of one thread as the
//! server runs: `concurrency` threads in a closed loop, each call waiting for a free session, so
//! it is what an ideal server (no protocol, no copies, no scheduling) would answer.
//!
//! Each repeat measures bare ORT, HTTP and gRPC at each concurrency, the order of the three
//! turning from repeat to repeat; the table gives medians and spreads over repeats, and each
//! path's throughput over bare ORT's as the median of per-repeat ratios. Every request the tool
//! sent must be counted by weir's statistics as a success, none as a failure.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use weir_operators::model::OrtRuntime;

use crate::client::{timed_loops, Client, Measured};
use crate::overhead::{bare_call, median, row_shape, sessions, spread, Layout};
use crate::process::{free_address, serve_command, ServeProcess};

/// Settings of the perf_analyzer experiment.
#[derive(Debug, Clone)]
pub struct PerfAnalyzerConfig {
    /// The model: its name in the repository and its file.
    pub model: (String, PathBuf),
    /// Client concurrencies.
    pub concurrency: Vec<usize>,
    /// ONNX Runtime sessions (one intra-op thread each) for the server and the reference.
    pub instances: usize,
    /// perf_analyzer's measurement window, ms (it reports the mean of three stable windows).
    pub window_ms: u64,
    /// Repetitions; medians and spreads are reported.
    pub repeats: usize,
    /// perf_analyzer hands its tensors over in system shared memory (`--shared-memory system`,
    /// the server started with it too) instead of in the messages.
    pub shared_memory: bool,
}

/// One repeat at one concurrency.
#[derive(Debug, Clone)]
pub struct PerfAnalyzerRepeat {
    /// The model.
    pub model: String,
    /// Client concurrency.
    pub concurrency: usize,
    /// Bare ONNX Runtime.
    pub bare: Measured,
    /// perf_analyzer over HTTP.
    pub http: Measured,
    /// perf_analyzer over gRPC.
    pub grpc: Measured,
}

/// The folder of the perf_analyzer the set-up unpacked (`bin/perf_analyzer`, `lib/`).
fn tool_dir() -> PathBuf {
    crate::weir_home().join("perf_analyzer")
}

/// The number after `label:` on the first line of `text` that starts with `label`.
fn number_after(text: &str, label: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.trim_start().starts_with(label))?;
    line.split(':')
        .nth(1)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// perf_analyzer's client-side figures and request count for one run.
fn perf_analyzer(
    model: &str,
    (protocol, url): (&str, &str),
    concurrency: usize,
    window_ms: u64,
    shared_memory: bool,
) -> Result<(Measured, u64)> {
    let dir = tool_dir();
    let bin = dir.join("bin/perf_analyzer");
    if !bin.is_file() {
        bail!(
            "{} is missing: run scripts/setup.sh (it unpacks perf_analyzer from the tritonclient wheel)",
            bin.display()
        );
    }
    let out = Command::new(&bin)
        .env("LD_LIBRARY_PATH", dir.join("lib"))
        .args(["-m", model, "-u", url, "-i", protocol])
        .args(["--concurrency-range", &concurrency.to_string()])
        .args(["--measurement-interval", &window_ms.to_string()])
        // Three windows whatever the machine's noise: the run's length is bounded.
        .args(["--stability-percentage", "1000", "--max-trials", "3"])
        .args(if shared_memory {
            &["--shared-memory", "system"][..]
        } else {
            &[]
        })
        .output()
        .context("running perf_analyzer")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || text.contains("error") {
        bail!(
            "perf_analyzer -i {protocol} -c {concurrency} failed:\n{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let client = text.split("Server:").next().unwrap_or_default();
    let field = |label: &str| {
        number_after(client, label)
            .ok_or_else(|| anyhow!("perf_analyzer printed no `{label}`:\n{text}"))
    };
    let figures = (
        field("Throughput")?,
        field("p50 latency")? / 1000.0,
        field("p99 latency")? / 1000.0,
    );
    Ok((figures, field("Request count")? as u64))
}

/// Bare ONNX Runtime: `concurrency` threads calling for `duration`, each call on the first free
/// session of `pool`.
fn bare(
    pool: &[Mutex<ort::session::Session>],
    input: &str,
    shape: &[usize],
    data: &[f32],
    concurrency: usize,
    duration: Duration,
) -> Result<Measured> {
    let until = Instant::now() + duration;
    timed_loops(
        vec![(); concurrency],
        |_, _| Instant::now() < until,
        |k, _, _| {
            let mut session = free_session(pool, k)?;
            bare_call(&mut session, input, shape, data).map(drop)
        },
    )
}

/// The first session of `pool` not in use, looked for from the `k`-th on, waiting on the `k`-th
/// when all are busy.
fn free_session(
    pool: &[Mutex<ort::session::Session>],
    k: usize,
) -> Result<std::sync::MutexGuard<'_, ort::session::Session>> {
    let n = pool.len();
    for i in 0..n {
        if let Ok(guard) = pool[(k + i) % n].try_lock() {
            return Ok(guard);
        }
    }
    pool[k % n]
        .lock()
        .map_err(|_| anyhow!("a session's lock was poisoned"))
}

/// Writes the one-model repository under `root`.
pub(crate) fn repository(root: &Path, name: &str, file: &Path, instances: usize) -> Result<()> {
    let folder = root.join(name);
    std::fs::create_dir_all(folder.join("1"))?;
    std::fs::copy(file, folder.join("1/model.onnx"))
        .with_context(|| format!("copying {}", file.display()))?;
    std::fs::write(
        folder.join("config.pbtxt"),
        format!(
            "instance_group [ {{ count: {instances} kind: KIND_CPU }} ]\n\
             parameters {{ key: \"intra_op_thread_count\" value: {{ string_value: \"1\" }} }}\n"
        ),
    )?;
    Ok(())
}

/// weir's success and failure counts for `model`, from its statistics.
fn counts(addr: &str, model: &str) -> Result<(u64, u64)> {
    let mut client = Client::connect(addr)?;
    let (status, body) = client.get(addr, &format!("/v2/models/{model}/stats"))?;
    if status != 200 {
        bail!("statistics answered {status}");
    }
    let v: serde_json::Value = serde_json::from_slice(&body)?;
    let stats = &v["model_stats"][0]["inference_stats"];
    let count = |k: &str| stats[k]["count"].as_u64().unwrap_or_default();
    Ok((count("success"), count("fail")))
}

/// Runs the perf_analyzer experiment.
///
/// # Errors
/// When the model, perf_analyzer or the server cannot start, a run fails, or weir's statistics
/// do not count every request perf_analyzer sent as a success.
pub fn perf_analyzer_bench(config: &PerfAnalyzerConfig) -> Result<Vec<PerfAnalyzerRepeat>> {
    let (name, file) = &config.model;
    let dir = std::env::temp_dir().join(format!("weir-perf-analyzer-{}", std::process::id()));
    let root = dir.join("models");
    repository(&root, name, file, config.instances)?;
    let grpc = free_address()?;
    let mut cmd = serve_command()?;
    cmd.arg("--model-repository").arg(&root).args([
        "--http",
        "127.0.0.1:0",
        "--grpc",
        &grpc,
        "--no-ui",
    ]);
    if config.shared_memory {
        cmd.args(["--shared-memory", "system"]);
    }
    let log = std::fs::File::create(dir.join("serve.log"))?;
    let server = ServeProcess::start(&mut cmd, log, Duration::from_secs(60))?;

    let runtime = OrtRuntime::get()?;
    let layout = Layout {
        instances: config.instances,
        threads: 1,
    };
    let pool: Vec<Mutex<_>> = sessions(&runtime, file, layout)?
        .into_iter()
        .map(Mutex::new)
        .collect();
    let (input, _) = crate::overhead::model_input(file)?;
    let shape = row_shape(file)?;
    let data: Vec<f32> = (0..shape.iter().product::<usize>())
        .map(|i| (i % 255) as f32 / 255.0)
        .collect();
    // The bare loop runs as long as perf_analyzer's three windows.
    let duration = Duration::from_millis(config.window_ms * 3);

    let mut repeats = Vec::new();
    for rep in 0..config.repeats {
        for &c in &config.concurrency {
            let mut row = PerfAnalyzerRepeat {
                model: name.clone(),
                concurrency: c,
                bare: (0.0, 0.0, 0.0),
                http: (0.0, 0.0, 0.0),
                grpc: (0.0, 0.0, 0.0),
            };
            for step in 0..3 {
                match (step + rep) % 3 {
                    0 => row.bare = bare(&pool, &input, &shape, &data, c, duration)?,
                    1 => {
                        let before = counts(&server.addr, name)?;
                        let (f, sent) = perf_analyzer(
                            name,
                            ("http", &server.addr),
                            c,
                            config.window_ms,
                            config.shared_memory,
                        )?;
                        checked(&server.addr, name, before, sent, "http", c)?;
                        row.http = f;
                    }
                    _ => {
                        let before = counts(&server.addr, name)?;
                        let (f, sent) = perf_analyzer(
                            name,
                            ("grpc", &grpc),
                            c,
                            config.window_ms,
                            config.shared_memory,
                        )?;
                        checked(&server.addr, name, before, sent, "grpc", c)?;
                        row.grpc = f;
                    }
                }
            }
            eprintln!(
                "repeat {}/{} c{c}: bare {:.1} req/s, HTTP {:.1}, gRPC {:.1}",
                rep + 1,
                config.repeats,
                row.bare.0,
                row.http.0,
                row.grpc.0
            );
            repeats.push(row);
        }
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(repeats)
}

/// Fails unless weir counted at least `sent` more successes than `before`, and no failure.
fn checked(
    addr: &str,
    model: &str,
    before: (u64, u64),
    sent: u64,
    protocol: &str,
    concurrency: usize,
) -> Result<()> {
    let after = counts(addr, model)?;
    if after.0 - before.0 < sent || after.1 != before.1 {
        bail!(
            "{protocol} c{concurrency}: perf_analyzer sent {sent} requests; weir counted {} successes and {} failures",
            after.0 - before.0,
            after.1 - before.1
        );
    }
    Ok(())
}

/// The repeats grouped by client concurrency, lowest first.
fn by_concurrency(repeats: &[PerfAnalyzerRepeat]) -> Vec<(usize, Vec<&PerfAnalyzerRepeat>)> {
    let mut levels: Vec<usize> = repeats.iter().map(|r| r.concurrency).collect();
    levels.sort_unstable();
    levels.dedup();
    levels
        .into_iter()
        .map(|c| (c, repeats.iter().filter(|r| r.concurrency == c).collect()))
        .collect()
}

/// The table as Markdown: per concurrency, each path's median [min–max] over repeats, and the
/// protocols' throughput over bare ORT's.
pub fn perf_analyzer_table(repeats: &[PerfAnalyzerRepeat]) -> String {
    let mut s = String::from(
        "| clients | bare ORT req/s | HTTP req/s | gRPC req/s | HTTP / bare | gRPC / bare | bare p50 ms | HTTP p50 ms | gRPC p50 ms | bare p99 ms | HTTP p99 ms | gRPC p99 ms |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for (c, at) in by_concurrency(repeats) {
        let pick = |f: fn(&PerfAnalyzerRepeat) -> f64| at.iter().map(|r| f(r)).collect::<Vec<_>>();
        s.push_str(&format!(
            "| {c} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            spread(&pick(|r| r.bare.0), 1),
            spread(&pick(|r| r.http.0), 1),
            spread(&pick(|r| r.grpc.0), 1),
            spread(&pick(|r| r.http.0 / r.bare.0.max(1e-9)), 3),
            spread(&pick(|r| r.grpc.0 / r.bare.0.max(1e-9)), 3),
            spread(&pick(|r| r.bare.1), 2),
            spread(&pick(|r| r.http.1), 2),
            spread(&pick(|r| r.grpc.1), 2),
            spread(&pick(|r| r.bare.2), 2),
            spread(&pick(|r| r.http.2), 2),
            spread(&pick(|r| r.grpc.2), 2),
        ));
    }
    s
}

/// Per concurrency and path, the median over repeats (what the plot draws).
pub fn perf_analyzer_medians(repeats: &[PerfAnalyzerRepeat]) -> Vec<PerfAnalyzerRepeat> {
    by_concurrency(repeats)
        .into_iter()
        .map(|(c, at)| {
            let m = |f: fn(&PerfAnalyzerRepeat) -> Measured| {
                let v: Vec<Measured> = at.iter().map(|r| f(r)).collect();
                (
                    median(v.iter().map(|x| x.0).collect()),
                    median(v.iter().map(|x| x.1).collect()),
                    median(v.iter().map(|x| x.2).collect()),
                )
            };
            PerfAnalyzerRepeat {
                model: at.first().map(|r| r.model.clone()).unwrap_or_default(),
                concurrency: c,
                bare: m(|r| r.bare),
                http: m(|r| r.http),
                grpc: m(|r| r.grpc),
            }
        })
        .collect()
}
