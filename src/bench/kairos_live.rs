//! The live Kairos experiment (notes/kairos.md §6.2, the "real run"): real `weir executor`
//! processes of emulated instance types, at the same budget, under open-loop Poisson load.
//!
//! Instance types are emulated with `weir executor --slowdown F` (real ONNX Runtime inference,
//! then a sleep of (F − 1) × its time) and priced by the graph's `cost_per_hour` labels. The model
//! is a 64 → W → W → 10 MLP with seeded random weights written here by `weir-training` (a few
//! hundred µs to a few ms per call, growing with the rows per call, with a 256-byte request, so the
//! emulated service time dominates the zenoh hop and the machine's two cores are not the bottleneck).
//!
//! Set-ups, each a pool within the budget: the heterogeneous pool under Kairos routing (latency
//! learned online), round robin and least outstanding; and every homogeneous pool that fits the
//! budget (as many instances of one type as the budget buys) under least outstanding. Metric: the
//! largest offered rate whose p99 latency (scheduled send → answer) meets the QoS target with every
//! request answered, found by raising the rate ×1.25 from `start_rate` until it fails, then two
//! bisection steps; a point that misses is measured again and fails only if it misses twice. Set-ups take turns within each repeat; medians over repeats are reported.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use plotters::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;

use super::overhead::median;
use super::remote::free_endpoint;
use crate::loadgen::{run_load, Arrival, LoadSpec};
use crate::workload::Workload;
use crate::{load_graph, start, RuntimeOptions};

/// One emulated instance type.
#[derive(Debug, Clone)]
pub struct EmulatedType {
    /// Name, used as the `instance_type` label.
    pub name: String,
    /// `weir executor --slowdown`.
    pub slowdown: f64,
    /// Price, the `cost_per_hour` label.
    pub cost_per_hour: f64,
}

/// The experiment's settings.
#[derive(Debug, Clone)]
pub struct KairosLiveConfig {
    /// Instance types.
    pub types: Vec<EmulatedType>,
    /// Instances per type of the heterogeneous pool.
    pub hetero: Vec<usize>,
    /// Budget in $/h every pool must fit.
    pub budget_per_hour: f64,
    /// p99 latency target, ms.
    pub qos_ms: f64,
    /// MLP hidden width.
    pub hidden: usize,
    /// Most rows per job (the model node's `batching.max_size`).
    pub max_batch: usize,
    /// First offered rate of each sweep, requests/s.
    pub start_rate: f64,
    /// Seconds of load per rate point (bounded to 1000..4000 requests).
    pub seconds_per_point: f64,
    /// Repeats; medians are reported.
    pub repeats: usize,
}

/// A pool and its routing.
#[derive(Debug, Clone)]
pub struct Setup {
    /// Label in tables and plots.
    pub label: String,
    /// Instances per type.
    pub pool: Vec<usize>,
    /// YAML `routing:` value.
    pub routing: String,
}

/// One rate point.
#[derive(Debug, Clone, Copy)]
pub struct RatePoint {
    /// Offered rate, requests/s.
    pub rate: f64,
    /// p50 and p99 latency, ms.
    pub p50_ms: f64,
    /// p99 latency, ms.
    pub p99_ms: f64,
    /// Requests not answered with outputs.
    pub errors: usize,
    /// Answers per second.
    pub throughput: f64,
}

/// One set-up's results.
#[derive(Debug, Clone)]
pub struct SetupResult {
    /// The set-up.
    pub setup: Setup,
    /// Pool price, $/h.
    pub cost_per_hour: f64,
    /// Largest rate meeting QoS, per repeat.
    pub max_rate: Vec<f64>,
    /// Every point measured, per repeat.
    pub points: Vec<Vec<RatePoint>>,
    /// Share of jobs each type served at the last point of the last repeat.
    pub type_share: Vec<f64>,
}

impl SetupResult {
    /// Median of the per-repeat maxima.
    pub fn median_max_rate(&self) -> f64 {
        median(self.max_rate.clone())
    }
}

/// A `weir executor --slowdown` child, SIGKILLed when dropped.
struct EmulatedExecutor {
    child: Child,
    name: String,
    endpoint: String,
    type_idx: usize,
}

impl EmulatedExecutor {
    fn spawn(
        name: &str,
        model: &Path,
        slowdown: f64,
        type_idx: usize,
        max_batch: usize,
    ) -> Result<Self> {
        let endpoint = free_endpoint()?;
        let exe = std::env::current_exe().context("locating the weir binary")?;
        let mut child = Command::new(exe)
            .args(["executor", "--name", name, "--listen", &endpoint])
            .arg("--model")
            .arg(format!("model={}", model.display()))
            .args(["--slowdown", &slowdown.to_string()])
            .args(["--max-batch", &max_batch.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("starting weir executor")?;
        let stdout = child.stdout.take();
        let e = EmulatedExecutor {
            child,
            name: name.to_string(),
            endpoint,
            type_idx,
        };
        let mut line = String::new();
        if let Some(out) = stdout {
            std::io::BufReader::new(out).read_line(&mut line)?;
        }
        if !line.starts_with("weir executor") {
            bail!("executor {name} did not start: `{}`", line.trim());
        }
        Ok(e)
    }
}

impl Drop for EmulatedExecutor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes the MLP (seeded weights) to `path` unless it is there.
fn make_model(path: &Path, hidden: usize) -> Result<()> {
    if path.is_file() {
        return Ok(());
    }
    let arch = weir_training::Architecture::Mlp {
        hidden: vec![hidden, hidden],
    };
    let model = weir_training::OnnxModel::from_proto(arch.build(64, 10)?)?;
    model.reinitialize(weir_training::Init::Xavier, &mut StdRng::seed_from_u64(7))?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    model.save(path)?;
    Ok(())
}

/// The set-ups: the heterogeneous pool under three routings, then each homogeneous pool within
/// the budget.
pub fn setups(config: &KairosLiveConfig) -> Vec<Setup> {
    let describe = |pool: &[usize]| {
        pool.iter()
            .zip(&config.types)
            .filter(|(n, _)| **n > 0)
            .map(|(n, t)| format!("{n}×{}", t.name))
            .collect::<Vec<_>>()
            .join(" + ")
    };
    let mut v = Vec::new();
    for (routing, name) in [
        (
            format!("{{kairos: {{qos_ms: {}}}}}", config.qos_ms),
            "kairos",
        ),
        ("round_robin".to_string(), "round robin"),
        ("least_outstanding".to_string(), "least outstanding"),
    ] {
        v.push(Setup {
            label: format!("{} · {name}", describe(&config.hetero)),
            pool: config.hetero.clone(),
            routing,
        });
    }
    for (i, t) in config.types.iter().enumerate() {
        let n = (config.budget_per_hour / t.cost_per_hour + 1e-9).floor() as usize;
        if n == 0 {
            continue;
        }
        let mut pool = vec![0; config.types.len()];
        pool[i] = n;
        v.push(Setup {
            label: format!("{} · least outstanding", describe(&pool)),
            pool,
            routing: "least_outstanding".into(),
        });
    }
    v
}

fn pool_cost(config: &KairosLiveConfig, pool: &[usize]) -> f64 {
    pool.iter()
        .zip(&config.types)
        .map(|(n, t)| *n as f64 * t.cost_per_hour)
        .sum()
}

/// The graph of one set-up on `executors` (the first `pool[t]` of each type).
fn graph_yaml(
    config: &KairosLiveConfig,
    setup: &Setup,
    executors: &[EmulatedExecutor],
    model: &Path,
) -> String {
    let mut chosen = Vec::new();
    for (t, &n) in setup.pool.iter().enumerate() {
        chosen.extend(executors.iter().filter(|e| e.type_idx == t).take(n));
    }
    let mut yaml =
        "name: kairos-live\ninputs:\n  - {name: x, dtype: f32, shape: [64]}\nexecutors:\n"
            .to_string();
    for e in &chosen {
        let t = &config.types[e.type_idx];
        yaml.push_str(&format!(
            "  - {{name: {}, endpoint: \"{}\", labels: {{instance_type: {}, cost_per_hour: \"{}\"}}}}\n",
            e.name, e.endpoint, t.name, t.cost_per_hour
        ));
    }
    yaml.push_str(&format!(
        "nodes:\n  - model:\n      id: model\n      path: {}\n      inputs: {{x: x}}\n      batching: {{max_size: {}}}\n      executor: {{timeout_ms: 5000}}\n      replicas: [{}]\n      routing: {}\noutputs:\n  - {{name: probs, from: model.probs}}\n",
        model.display(),
        config.max_batch,
        chosen.iter().map(|e| e.name.as_str()).collect::<Vec<_>>().join(", "),
        setup.routing
    ));
    yaml
}

/// One sweep of `setup`: its largest rate meeting QoS, the points, and each type's job share.
fn sweep(
    config: &KairosLiveConfig,
    setup: &Setup,
    executors: &[EmulatedExecutor],
    model: &Path,
    dir: &Path,
) -> Result<(f64, Vec<RatePoint>, Vec<f64>)> {
    let path = dir.join("graph.yaml");
    std::fs::write(&path, graph_yaml(config, setup, executors, model))?;
    let graph = load_graph(&path).map_err(|e| anyhow!("{e}"))?;
    let workload = Workload::random(&graph.plan, 64, 3);
    let running = start(graph.plan, RuntimeOptions::default())?;
    let mut points = Vec::new();
    let mut measure = |rate: f64, seed: u64| -> RatePoint {
        let requests = ((rate * config.seconds_per_point) as usize).clamp(1000, 4000);
        let report = run_load(
            running.runtime(),
            &workload,
            &LoadSpec {
                requests,
                warmup: 100,
                arrival: Arrival::Poisson { rate },
                seed,
                label_output: None,
                progress: false,
            },
        );
        let p = RatePoint {
            rate,
            p50_ms: report.latency_ms(0.5),
            p99_ms: if report.ok > 0 {
                report.latency_ms(0.99)
            } else {
                f64::INFINITY
            },
            errors: report.sent - report.ok,
            throughput: report.throughput(),
        };
        eprintln!(
            "  {:<40} {:>7.1} req/s offered: p50 {:>7.2} ms, p99 {:>8.2} ms, {} errors",
            setup.label, p.rate, p.p50_ms, p.p99_ms, p.errors
        );
        points.push(p);
        std::thread::sleep(Duration::from_millis(200));
        p
    };
    // A point that misses is measured once more and fails only if both miss: on a shared machine
    // a scheduling hiccup of tens of ms lands in a few hundred samples' p99 now and then.
    let mut meets = |rate: f64, seed: u64| {
        let ok = |p: &RatePoint| p.errors == 0 && p.p99_ms <= config.qos_ms;
        ok(&measure(rate, seed)) || ok(&measure(rate, seed + 1000))
    };
    let (mut good, mut bad) = (0.0, None);
    let mut rate = config.start_rate;
    for step in 0..30 {
        if meets(rate, step) {
            good = rate;
            rate *= 1.25;
        } else {
            bad = Some(rate);
            break;
        }
    }
    if let Some(mut hi) = bad {
        let mut lo = good;
        for step in 0..2 {
            let mid = if lo > 0.0 { (lo + hi) / 2.0 } else { hi / 2.0 };
            if meets(mid, 100 + step) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        good = lo;
    }
    let states = running
        .replica_pools()
        .into_iter()
        .next()
        .map(|(_, p)| p.replica_states())
        .unwrap_or_default();
    running.shutdown();
    let mut share = vec![0.0; config.types.len()];
    let total: u64 = states.iter().map(|s| s.3).sum();
    for (name, _, _, dispatched) in &states {
        if let Some(e) = executors.iter().find(|e| &e.name == name) {
            share[e.type_idx] += *dispatched as f64 / total.max(1) as f64;
        }
    }
    Ok((good, points, share))
}

/// Runs the experiment.
///
/// # Errors
/// When the model cannot be written, an executor does not start, or a graph fails.
pub fn kairos_live(config: &KairosLiveConfig, model: &Path) -> Result<Vec<SetupResult>> {
    if config.hetero.len() != config.types.len() {
        bail!("the heterogeneous pool needs one count per type");
    }
    let cost = pool_cost(config, &config.hetero);
    if cost > config.budget_per_hour + 1e-9 {
        bail!(
            "the heterogeneous pool costs ${cost:.2}/h, over the ${:.2}/h budget",
            config.budget_per_hour
        );
    }
    make_model(model, config.hidden)?;
    let model =
        &std::fs::canonicalize(model).with_context(|| format!("model {}", model.display()))?;
    let setups = setups(config);
    let mut executors = Vec::new();
    for (t, ty) in config.types.iter().enumerate() {
        let n = setups.iter().map(|s| s.pool[t]).max().unwrap_or(0);
        for i in 0..n {
            let name = format!("{}-{i}", ty.name.replace('.', "-"));
            executors.push(EmulatedExecutor::spawn(
                &name,
                model,
                ty.slowdown,
                t,
                config.max_batch,
            )?);
        }
    }
    let dir = std::env::temp_dir().join(format!("weir-bench-kairos-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut results: Vec<SetupResult> = setups
        .iter()
        .map(|s| SetupResult {
            setup: s.clone(),
            cost_per_hour: pool_cost(config, &s.pool),
            max_rate: Vec::new(),
            points: Vec::new(),
            type_share: Vec::new(),
        })
        .collect();
    for repeat in 0..config.repeats {
        for r in results.iter_mut() {
            let (max, points, share) = sweep(config, &r.setup, &executors, model, &dir)?;
            eprintln!(
                "repeat {}/{} {:<40} max {:>7.1} req/s ({} points)",
                repeat + 1,
                config.repeats,
                r.setup.label,
                max,
                points.len()
            );
            r.max_rate.push(max);
            r.points.push(points);
            r.type_share = share;
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(results)
}

/// The Markdown table: per set-up, price, median largest rate meeting QoS, the per-repeat values,
/// ratios against the best homogeneous pool and against Kairos, and each type's share of jobs.
pub fn kairos_live_table(config: &KairosLiveConfig, results: &[SetupResult]) -> String {
    let best_homo = results
        .iter()
        .filter(|r| r.setup.pool.iter().filter(|&&n| n > 0).count() == 1)
        .map(SetupResult::median_max_rate)
        .fold(0.0, f64::max);
    let kairos = results
        .iter()
        .find(|r| r.setup.routing.starts_with("{kairos"))
        .map(SetupResult::median_max_rate)
        .unwrap_or(0.0);
    let types: Vec<String> = config
        .types
        .iter()
        .map(|t| {
            format!(
                "{} (×{} slower, ${}/h)",
                t.name, t.slowdown, t.cost_per_hour
            )
        })
        .collect();
    let mut s = format!(
        "Types: {}. Budget ${}/h, p99 target {} ms, MLP 64→{}→{}→10, jobs ≤ {} rows, {} repeats.\n\n",
        types.join(", "),
        config.budget_per_hour,
        config.qos_ms,
        config.hidden,
        config.hidden,
        config.max_batch,
        config.repeats
    );
    s.push_str("| set-up | $/h | max req/s meeting p99 (median) | per repeat | vs best homogeneous | Kairos vs it | jobs per type (last run) |\n|---|---|---|---|---|---|---|\n");
    for r in results {
        let m = r.median_max_rate();
        let share: Vec<String> = r
            .type_share
            .iter()
            .zip(&config.types)
            .filter(|(x, _)| **x > 0.0)
            .map(|(x, t)| format!("{} {:.0} %", t.name, x * 100.0))
            .collect();
        s.push_str(&format!(
            "| {} | {:.2} | {:.1} | {} | {:.2} | {} | {} |\n",
            r.setup.label,
            r.cost_per_hour,
            m,
            r.max_rate
                .iter()
                .map(|x| format!("{x:.0}"))
                .collect::<Vec<_>>()
                .join(", "),
            m / best_homo.max(1e-9),
            if m > 0.0 {
                format!("{:.2}", kairos / m)
            } else {
                "–".into()
            },
            share.join(", ")
        ));
    }
    s
}

/// p99 latency against offered rate per set-up (the median repeat's sweep, by its maximum), with
/// the QoS target as a dashed line.
///
/// # Errors
/// When the image cannot be drawn or written.
pub fn plot_kairos_live(
    config: &KairosLiveConfig,
    results: &[SetupResult],
    path: &Path,
) -> Result<()> {
    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let sweeps: Vec<Vec<(f64, f64)>> = results
        .iter()
        .map(|r| {
            let m = r.median_max_rate();
            let idx = r
                .max_rate
                .iter()
                .position(|&x| x == m)
                .unwrap_or_else(|| r.max_rate.len().saturating_sub(1));
            let mut pts: Vec<(f64, f64)> = r
                .points
                .get(idx)
                .map(|v| {
                    v.iter()
                        .map(|p| (p.rate, p.p99_ms.min(config.qos_ms * 4.0)))
                        .collect()
                })
                .unwrap_or_default();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            pts
        })
        .collect();
    let right = sweeps.iter().flatten().map(|p| p.0).fold(1.0, f64::max) * 1.05;
    let top = config.qos_ms * 4.0;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Kairos live: p99 latency vs offered load (budget ${}/h)",
                config.budget_per_hour
            ),
            ("sans-serif", 20),
        )
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..right, 0.0..top)
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_desc("offered rate, requests/s (Poisson)")
        .y_desc("p99 latency, ms (capped at 4× QoS)")
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .draw_series(LineSeries::new(
            vec![(0.0, config.qos_ms), (right, config.qos_ms)],
            ShapeStyle::from(BLACK).stroke_width(1),
        ))
        .map_err(|e| anyhow!("{e}"))?
        .label(format!("p99 target {} ms", config.qos_ms))
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK));
    let colors = [
        RED,
        BLUE,
        GREEN,
        MAGENTA,
        CYAN,
        RGBColor(255, 140, 0),
        RGBColor(120, 60, 0),
    ];
    for (k, (r, pts)) in results.iter().zip(sweeps).enumerate() {
        let color = colors[k % colors.len()];
        let style = ShapeStyle::from(color).stroke_width(2);
        chart
            .draw_series(LineSeries::new(pts.clone(), style))
            .map_err(|e| anyhow!("{e}"))?
            .label(format!(
                "{} (max {:.0}/s)",
                r.setup.label,
                r.median_max_rate()
            ))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
        chart
            .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, style.filled())))
            .map_err(|e| anyhow!("{e}"))?;
    }
    super::plot::draw_legend(&mut chart)?;
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

/// The model file the experiment writes and serves, under `.weir/models/`.
pub fn default_model(weir_home: &Path, hidden: usize) -> PathBuf {
    weir_home
        .join("models")
        .join(format!("kairos_mlp_{hidden}.onnx"))
}
