//! INFaaS's online and offline co-location (§6.3.2, Figure 8): online queries
//! with a latency SLO and one offline job on the same instance of the same variant, each alone
//! and together.
//!
//! The variant is the real pretrained PaddleOCR direction classifier of the `text_orientation`
//! task, registered for this process (`local`, 2 intra-op threads) and pre-loaded, so the CPU
//! the queries use is this machine's. The offline job (`POST /v2/offline`) runs its JSON-lines
//! file of requests in the background and pauses while the machine is more than 40 % busy or a
//! variant runs slower than its profile; the online load is Poisson with two high phases.
//! Three runs, each a fresh `weir serve`: online alone, offline alone, both; the job is submitted
//! a few seconds before the first high phase, so that it meets one. Per second the run records
//! the machine's CPU utilisation (`/proc/stat`) and the job's answered count and state.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};
use weir::cli::model::{register, RegisterArgs, RepositoryArg};

use crate::infaas_autoscale::drive::{self, Recorded};
use crate::infaas_autoscale::report::quantile;
use crate::infaas_autoscale::Pattern;
use crate::plot::{draw_labelled_line, draw_legend};
use crate::process::{serve_command, ServeProcess};

/// The task the classifier serves.
const TASK: &str = "text_orientation";

/// What to run.
#[derive(Debug, Clone)]
pub struct OfflineBenchConfig {
    /// The architecture: name and ONNX file.
    pub model: (String, PathBuf),
    /// Its validation set (registration scores it; its rows are the queries).
    pub validation: PathBuf,
    /// Online load.
    pub pattern: Pattern,
    /// Online SLO, ms.
    pub slo_ms: f64,
    /// Requests in the offline job.
    pub offline_requests: usize,
    /// When the job is submitted, seconds into the run.
    pub offline_at_s: f64,
    /// Connections sending the online load.
    pub clients: usize,
}

/// One second of a run.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tick {
    /// Seconds since the run started.
    pub at_s: f64,
    /// Machine CPU utilisation over the last second, 0–1.
    pub cpu: f64,
    /// Offline requests answered so far.
    pub answered: u64,
    /// Whether the job was paused.
    pub paused: bool,
}

/// One run.
#[derive(Debug, Clone, Default)]
pub struct CoRun {
    /// Online outcomes (empty without online load).
    pub online: Recorded,
    /// Per second.
    pub ticks: Vec<Tick>,
}

/// (busy, total) jiffies of all cores.
fn cpu_times() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().next()?.strip_prefix("cpu ")?;
    let v: Vec<u64> = line
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    let idle = v.get(3)? + v.get(4).copied().unwrap_or(0);
    let total: u64 = v.iter().take(8).sum();
    Some((total.saturating_sub(idle), total))
}

/// Longest a run's front end may take to start (its pre-load included).
const START_WITHIN: Duration = Duration::from_secs(90);

fn serve(dir: &Path, variant: &str, label: &str) -> Result<ServeProcess> {
    let log = std::fs::File::create(dir.join(format!("serve-{label}.log")))?;
    let mut cmd = serve_command()?;
    cmd.arg("--repository")
        .arg(dir.join("repository"))
        .arg("--offline-dir")
        .arg(dir.join("jobs"))
        .args(["--preload", &format!("{variant}=local")])
        .args(["--http", "127.0.0.1:0", "--header-timeout-ms", "3600000"])
        .args([
            "--request-timeout-ms",
            &drive::EXPIRE.as_millis().to_string(),
        ]);
    ServeProcess::start(&mut cmd, log, START_WITHIN)
        .with_context(|| format!("the {label} run's front end (see {})", dir.display()))
}

/// Registers the model and writes the offline job's input; the variant's name.
pub fn prepare(config: &OfflineBenchConfig, dir: &Path) -> Result<(String, Vec<f32>)> {
    std::fs::create_dir_all(dir.join("jobs"))?;
    register(&RegisterArgs {
        name: config.model.0.clone(),
        task: TASK.into(),
        onnx: config.model.1.clone(),
        validation: config.validation.clone(),
        repository: RepositoryArg {
            repository: dir.join("repository"),
        },
        hardware: None,
        int8: None,
        no_int8: true,
        threads: vec![2],
        levels: vec!["all".into()],
        batches: vec![1],
        runs: 3,
    })
    .context("registering the model")?;
    let variant = format!("{}.fp32-all-t2-b1-local", config.model.0);
    let text = std::fs::read_to_string(&config.validation)?;
    let rows: Vec<Vec<f32>> = text
        .lines()
        .take(16)
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| {
            v["inputs"]["x"].as_array().map(|a| {
                // Three decimals are plenty for pixels (JSON still writes each as an f64).
                a.iter()
                    .filter_map(|x| x.as_f64().map(|f| ((f * 1e3).round() / 1e3) as f32))
                    .collect()
            })
        })
        .collect();
    let Some(first) = rows.first().cloned() else {
        bail!("{}: no rows", config.validation.display());
    };
    let mut input = String::new();
    for i in 0..config.offline_requests {
        let row = &rows[i % rows.len()];
        input += &json!({"id": format!("o{i}"),
            "inputs": [{"name": "x", "shape": [1, 3, 48, 192], "datatype": "FP32", "data": row}]})
        .to_string();
        input.push('\n');
    }
    std::fs::write(dir.join("jobs").join("in.jsonl"), input)?;
    Ok((variant, first))
}

/// One run: online load if `online`, the offline job if `offline`, for the pattern's length.
pub fn run(
    config: &OfflineBenchConfig,
    dir: &Path,
    variant: &str,
    row: &[f32],
    online: bool,
    offline: bool,
) -> Result<CoRun> {
    let label = match (online, offline) {
        (true, true) => "together",
        (true, false) => "online",
        _ => "offline",
    };
    let server = serve(dir, variant, label)?;
    let parameters = json!({"variant": variant});
    let body = |id: &str| {
        json!({"id": id, "parameters": parameters,
            "inputs": [{"name": "x", "shape": [1, 3, 48, 192], "datatype": "FP32", "data": row}]})
        .to_string()
    };
    let path = format!("/v2/models/{TASK}/infer");
    // Warm the instance and the connections.
    let (status, text) = drive::post(&server.addr, &path, &body("warm"))?;
    if status != 200 {
        bail!("the first query: {status} {text}");
    }
    let submit = || -> Result<String> {
        let output = format!("out-{label}.jsonl");
        let _ = std::fs::remove_file(dir.join("jobs").join(&output));
        let submit = json!({"model": TASK, "input": "in.jsonl", "output": output,
            "parameters": parameters});
        let (status, text) = drive::post(&server.addr, "/v2/offline", &submit.to_string())?;
        if status != 202 {
            bail!("submitting the job: {status} {text}");
        }
        let doc: Value = serde_json::from_str(&text)?;
        Ok(doc["id"].as_str().unwrap_or_default().to_string())
    };
    let seconds = config.pattern.seconds();
    let start = Instant::now();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let job: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
    let mut ticks = Vec::new();
    let mut recorded = Recorded::default();
    std::thread::scope(|s| -> Result<()> {
        let watch = s.spawn(|| {
            let mut out = Vec::new();
            let mut last = cpu_times();
            let mut next = Duration::ZERO;
            while !stop.load(std::sync::atomic::Ordering::Acquire)
                && start.elapsed().as_secs_f64() < seconds
            {
                next += Duration::from_secs(1);
                std::thread::sleep(next.saturating_sub(start.elapsed()));
                let now = cpu_times();
                let cpu = match (last, now) {
                    (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => {
                        (b1 - b0) as f64 / (t1 - t0) as f64
                    }
                    _ => f64::NAN,
                };
                last = now;
                let id = job.lock().map(|j| j.clone()).unwrap_or_default();
                let (answered, paused) = id
                    .as_ref()
                    .and_then(|id| drive::get(&server.addr, &format!("/v2/offline/{id}")).ok())
                    .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                    .map_or((0, false), |d| {
                        (d["answered"].as_u64().unwrap_or(0), d["state"] == "paused")
                    });
                out.push(Tick {
                    at_s: start.elapsed().as_secs_f64(),
                    cpu,
                    answered,
                    paused,
                });
            }
            out
        });
        let submitter = s.spawn(|| -> Result<()> {
            if offline {
                std::thread::sleep(
                    Duration::from_secs_f64(config.offline_at_s).saturating_sub(start.elapsed()),
                );
                let id = submit()?;
                *job.lock().map_err(|_| anyhow!("job id lock"))? = Some(id);
            }
            Ok(())
        });
        if online {
            recorded = drive::drive(
                &server.addr,
                &path,
                &body,
                &config.pattern,
                seconds,
                config.clients,
                7,
                label,
            )?;
        }
        // Offline alone: the watch runs for the pattern's length.
        while start.elapsed().as_secs_f64() < seconds {
            std::thread::sleep(Duration::from_millis(100));
        }
        stop.store(true, std::sync::atomic::Ordering::Release);
        submitter
            .join()
            .map_err(|_| anyhow!("the submitter panicked"))??;
        ticks = watch.join().map_err(|_| anyhow!("the watch panicked"))?;
        Ok(())
    })?;
    Ok(CoRun {
        online: recorded,
        ticks,
    })
}

/// The figures of the three runs.
#[derive(Debug, Clone)]
pub struct CoRow {
    /// Which run.
    pub run: &'static str,
    /// Online: served q/s, p50 and p99 ms, SLO violations (fraction); `None` without online load.
    pub online: Option<(f64, f64, f64, f64)>,
    /// Offline requests answered in the window; `None` without the job.
    pub offline: Option<u64>,
    /// Share of the seconds the job was paused.
    pub paused: f64,
    /// Mean CPU utilisation inside and outside the high phases.
    pub cpu_high_low: (f64, f64),
}

/// Summarises `run` (`label` its name) against the SLO.
pub fn summarise(
    label: &'static str,
    run: &CoRun,
    pattern: &Pattern,
    slo_ms: f64,
    online: bool,
    offline: bool,
) -> CoRow {
    let o = &run.online.outcomes;
    let online = online.then(|| {
        let ok: Vec<f64> = o.iter().filter(|x| x.ok).map(|x| x.latency_ms).collect();
        let late = o.iter().filter(|x| !x.ok || x.latency_ms > slo_ms).count();
        (
            ok.len() as f64 / pattern.seconds(),
            quantile(ok.clone(), 0.5),
            quantile(ok, 0.99),
            late as f64 / o.len().max(1) as f64,
        )
    });
    let high = |t: f64| pattern.spikes().iter().any(|(a, b)| (*a..*b).contains(&t));
    let mean = |f: &dyn Fn(&Tick) -> bool| {
        let v: Vec<f64> = run
            .ticks
            .iter()
            .filter(|t| f(t) && t.cpu.is_finite())
            .map(|t| t.cpu)
            .collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    CoRow {
        run: label,
        online,
        offline: offline.then(|| run.ticks.last().map_or(0, |t| t.answered)),
        paused: run.ticks.iter().filter(|t| t.paused).count() as f64
            / run.ticks.len().max(1) as f64,
        cpu_high_low: (mean(&|t| high(t.at_s)), mean(&|t| !high(t.at_s))),
    }
}

/// The table of the three runs.
pub fn table(rows: &[CoRow]) -> String {
    use std::fmt::Write as _;
    let mut out = String::from(
        "| run | online served q/s | online p50 / p99 ms | online SLO violations | offline answered | seconds paused | CPU in high / low phases |\n|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let online = match r.online {
            Some((q, p50, p99, v)) => {
                format!("{q:.1} | {p50:.1} / {p99:.1} | {:.2} %", 100.0 * v)
            }
            None => "– | – | –".into(),
        };
        let offline = r.offline.map_or("–".into(), |n| n.to_string());
        let _ = writeln!(
            out,
            "| {} | {online} | {offline} | {:.0} % | {:.0} % / {:.0} % |",
            r.run,
            100.0 * r.paused,
            100.0 * r.cpu_high_low.0,
            100.0 * r.cpu_high_low.1
        );
    }
    out
}

/// Figure 8's panels: online p99 per 5 s, offline progress, CPU utilisation with the 40 % line
/// (the colours are the runs', as the last panel's legend gives them).
///
/// # Errors
/// When the image cannot be drawn or written.
pub fn plot(runs: &[(&str, &CoRun)], pattern: &Pattern, path: &Path) -> Result<()> {
    use plotters::prelude::*;
    let e = |e: DrawingAreaErrorKind<_>| anyhow!("{e}");
    let seconds = pattern.seconds();
    let root = BitMapBackend::new(path, (1000, 900)).into_drawing_area();
    root.fill(&WHITE).map_err(e)?;
    let panels = root.split_evenly((3, 1));
    let colours = [RED, BLUE, RGBColor(30, 150, 60)];
    let width = 5.0;
    let p99s: Vec<(usize, Vec<(f64, f64)>)> = runs
        .iter()
        .enumerate()
        .filter(|(_, (_, r))| !r.online.outcomes.is_empty())
        .map(|(k, (_, r))| {
            let n = (seconds / width).ceil() as usize;
            let points = (0..n)
                .map(|i| {
                    let (a, b) = (i as f64 * width, (i + 1) as f64 * width);
                    let v: Vec<f64> = r
                        .online
                        .outcomes
                        .iter()
                        .filter(|o| (a..b).contains(&o.at_s))
                        .map(|o| o.latency_ms)
                        .collect();
                    (a + width / 2.0, quantile(v, 0.99))
                })
                .filter(|p| p.1.is_finite())
                .collect();
            (k, points)
        })
        .collect();
    let top = p99s
        .iter()
        .flat_map(|(_, p)| p.iter().map(|x| x.1))
        .fold(1.0, f64::max)
        * 1.2;
    let mut chart = ChartBuilder::on(&panels[0])
        .caption("online p99 latency per 5 s", ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..seconds, 0.0..top)
        .map_err(e)?;
    chart.configure_mesh().y_desc("ms").draw().map_err(e)?;
    for (k, points) in p99s {
        let style = ShapeStyle::from(colours[k % colours.len()]).stroke_width(2);
        draw_labelled_line(&mut chart, points, style, runs[k].0)?;
    }
    draw_legend(&mut chart)?;
    let answered = runs
        .iter()
        .flat_map(|(_, r)| r.ticks.iter().map(|t| t.answered as f64))
        .fold(1.0, f64::max)
        * 1.1;
    let mut chart = ChartBuilder::on(&panels[1])
        .caption(
            "offline requests answered (spikes shaded)",
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..seconds, 0.0..answered)
        .map_err(e)?;
    chart.configure_mesh().draw().map_err(e)?;
    for (a, b) in pattern.spikes() {
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(a, 0.0), (b, answered)],
                RGBColor(230, 230, 230).filled(),
            )))
            .map_err(e)?;
    }
    for (k, (_, r)) in runs.iter().enumerate() {
        if r.ticks.iter().all(|t| t.answered == 0) {
            continue;
        }
        let c = colours[k % colours.len()];
        let points = r.ticks.iter().map(|t| (t.at_s, t.answered as f64));
        chart
            .draw_series(LineSeries::new(points, ShapeStyle::from(c).stroke_width(2)))
            .map_err(e)?;
    }
    let mut chart = ChartBuilder::on(&panels[2])
        .caption(
            "machine CPU utilisation (pause above 40 %)",
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..seconds, 0.0..100.0)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc("seconds into the run")
        .y_desc("%")
        .draw()
        .map_err(e)?;
    chart
        .draw_series(LineSeries::new(
            vec![(0.0, 40.0), (seconds, 40.0)],
            ShapeStyle::from(BLACK).stroke_width(1),
        ))
        .map_err(e)?;
    for (k, (name, r)) in runs.iter().enumerate() {
        let c = colours[k % colours.len()];
        let points = r
            .ticks
            .iter()
            .filter(|t| t.cpu.is_finite())
            .map(|t| (t.at_s, 100.0 * t.cpu));
        draw_labelled_line(
            &mut chart,
            points,
            ShapeStyle::from(c).stroke_width(2),
            *name,
        )?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(e)?;
    root.present().map_err(e)?;
    Ok(())
}
